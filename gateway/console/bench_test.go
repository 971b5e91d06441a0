package console

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// manyNamespaces is a console over n namespaces, with a registry that has
// the tier families and Go's own collectors (as ctxd's has), and the
// registry's /metrics beside it as the baseline.
func manyNamespaces(tb testing.TB, n int) (*httptest.Server, *prometheus.Registry) {
	ts, reg, _ := manyNamespacesConsole(tb, n)
	return ts, reg
}

// manyNamespacesConsole is manyNamespaces with the console, every
// namespace with traffic.
func manyNamespacesConsole(tb testing.TB, n int) (*httptest.Server, *prometheus.Registry, *Console) {
	tb.Helper()
	ns := &fakeNamespaces{use: map[string]Usage{}}
	for i := range n {
		name := fmt.Sprintf("ns-%04d", i)
		ns.list = append(ns.list, block.Namespace{Name: name, DataShards: 1, ParityShards: 2, TTLSeconds: 3600})
		ns.use[name] = Usage{Blocks: int64(i), Bytes: int64(i) << 20}
	}
	reg := tierRegistry(tb)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	traffic := fakeTraffic{}
	for i := range n {
		v := uint64(i+1) * 1000
		traffic = append(traffic, ctxstore.TrafficCount{Namespace: fmt.Sprintf("ns-%04d", i), Gets: v, Hits: v - 1, Misses: 1, Puts: v / 2, ReadBytes: v << 20, WrittenBytes: v << 19})
	}
	// Three members; the other two answer for their traffic in process
	// (the request itself is not measured here) with as many namespaces.
	cl := &fakeCluster{}
	peers := &fakeMembers{of: map[string]TrafficSource{}}
	for i := range 3 {
		m := clusterMember(i)
		m.HTTPAddr = fmt.Sprintf("127.0.0.1:%d", 9000+i)
		cl.status.Members = append(cl.status.Members, m)
		peers.of[m.ID] = traffic
	}
	c, err := New(DefaultConfig(), Deps{NodeID: "n0", Cluster: cl, Gatherer: reg, Namespaces: ns, Traffic: traffic, Members: peers},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		tb.Fatal(err)
	}
	for i := range c.cfg.samples() { // a full 15-minute ring
		c.Sampler().Sample(time.UnixMilli(int64(i) * c.cfg.SampleInterval.Milliseconds()))
	}
	mux := http.NewServeMux()
	mux.Handle("/ui/", c.Handler())
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	ts := httptest.NewServer(mux)
	tb.Cleanup(ts.Close)
	return ts, reg, c
}

func get(tb testing.TB, url string) int {
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		tb.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	return int(n)
}

// BenchmarkServe1000Namespaces measures the page and its JSON with 1,000
// namespaces against a /metrics scrape of the same registry.
func BenchmarkServe1000Namespaces(b *testing.B) {
	ts, _ := manyNamespaces(b, 1000)
	for _, path := range []string{"/metrics", "/ui/", "/ui/api/overview", "/ui/api/series"} {
		b.Run(path, func(b *testing.B) {
			for b.Loop() {
				get(b, ts.URL+path)
			}
		})
	}
}

// TestServeTime1000Namespaces logs (measures, does not assert) how long
// the page and its JSON take with 1,000 namespaces, and the ratio to a
// /metrics scrape of the same registry in the same run.
func TestServeTime1000Namespaces(t *testing.T) {
	ts, _ := manyNamespaces(t, 1000)
	median := func(path string) (time.Duration, int) {
		const runs = 21
		var ds []time.Duration
		size := 0
		for range runs {
			start := time.Now()
			size = get(t, ts.URL+path)
			ds = append(ds, time.Since(start))
		}
		for i := range ds {
			for j := i + 1; j < len(ds); j++ {
				if ds[j] < ds[i] {
					ds[i], ds[j] = ds[j], ds[i]
				}
			}
		}
		return ds[runs/2], size
	}
	base, baseSize := median("/metrics")
	t.Logf("/metrics (baseline): median %v, %d bytes", base, baseSize)
	for _, path := range []string{"/ui/", "/ui/api/overview", "/ui/api/series"} {
		d, size := median(path)
		t.Logf("%s with 1000 namespaces: median %v, %d bytes, %.2fx /metrics", path, d, size, float64(d)/float64(base))
	}
}

// BenchmarkSample is the sampler's cost per sample (one gather of a
// registry with the tier families and Go's collectors, as ctxd has); it
// runs once per Config.SampleInterval with no browser open. The baseline
// is one /metrics scrape of the same registry.
// The per-namespace series are not in that registry (ctxd serves them
// from their own, beside it), so the number of namespaces does not change
// this cost.
func BenchmarkSample(b *testing.B) {
	ts, reg := manyNamespaces(b, 0)
	s := NewSampler(DefaultConfig(), reg, nil)
	b.Run("sample", func(b *testing.B) {
		for b.Loop() {
			s.Sample(time.Now())
		}
	})
	b.Run("metrics-scrape", func(b *testing.B) {
		for b.Loop() {
			get(b, ts.URL+"/metrics")
		}
	})
}

// fakeTraffic is a fixed set of namespace counters.
type fakeTraffic []ctxstore.TrafficCount

func (f fakeTraffic) Snapshot() []ctxstore.TrafficCount { return f }

// BenchmarkOverviewBuild is what one refresh tick costs while a page is
// open (the status, a gather, 1,000 namespaces with traffic, JSON), next
// to a request served the cached bytes and a /metrics scrape of the same
// registry (the baseline); it prints the ratios.
func BenchmarkOverviewBuild(b *testing.B) {
	ts, _, c := manyNamespacesConsole(b, 1000)
	ctx := context.Background()
	var build, served, scrape float64
	b.Run("build", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.rebuild(ctx, time.Now().Add(time.Hour)); err != nil {
				b.Fatal(err)
			}
		}
		build = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("serve-cached", func(b *testing.B) {
		for b.Loop() {
			get(b, ts.URL+"/ui/api/overview")
		}
		served = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("metrics-scrape", func(b *testing.B) {
		for b.Loop() {
			get(b, ts.URL+"/metrics")
		}
		scrape = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	if scrape > 0 {
		b.Logf("overview with 1000 namespaces: build %.2f ms (%.2fx /metrics), cached request %.2f ms (%.2fx /metrics); /metrics %.2f ms",
			build/1e6, build/scrape, served/1e6, served/scrape, scrape/1e6)
	}
}
