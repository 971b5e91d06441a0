package console

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
	"github.com/ctxtier/ctxtier/tiers/dram"
)

func TestRatesOverWindows(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := rates{window: 5 * time.Second}
	steps := []struct {
		name   string
		after  time.Duration
		totals map[string]Traffic
		want   map[string]Traffic
		window time.Duration
	}{
		{"first reading has no rate", 0, map[string]Traffic{"a": {Gets: 10}}, nil, 0},
		{"under a window: still none", 2 * time.Second, map[string]Traffic{"a": {Gets: 20}}, nil, 0},
		{"a window later: rate against the first reading", 5 * time.Second,
			map[string]Traffic{"a": {Gets: 60, Hits: 50, Misses: 10, ReadBytes: 5000}, "b": {Puts: 10, WrittenBytes: 1000}},
			map[string]Traffic{"a": {Gets: 10, Hits: 10, Misses: 2, ReadBytes: 1000}, "b": {Puts: 2, WrittenBytes: 200}}, 5 * time.Second},
		{"within the next window: the same rates", 7 * time.Second, map[string]Traffic{"a": {Gets: 1000}},
			map[string]Traffic{"a": {Gets: 10, Hits: 10, Misses: 2, ReadBytes: 1000}, "b": {Puts: 2, WrittenBytes: 200}}, 5 * time.Second},
		{"a longer window divides by its length; a counter that fell counts from 0", 15 * time.Second,
			map[string]Traffic{"a": {Gets: 160, Hits: 5}, "b": {Puts: 30, WrittenBytes: 100}},
			map[string]Traffic{"a": {Gets: 10, Hits: 0.5}, "b": {Puts: 2, WrittenBytes: 10}}, 10 * time.Second},
	}
	for _, st := range steps {
		got, window := r.observe(t0.Add(st.after), st.totals)
		if window != st.window || len(got) != len(st.want) {
			t.Fatalf("%s: rates %v over %v, want %v over %v", st.name, got, window, st.want, st.window)
		}
		for ns, w := range st.want {
			if got[ns] != w {
				t.Fatalf("%s: %s rates %+v, want %+v", st.name, ns, got[ns], w)
			}
		}
	}
}

// scrape reads the samples of a /metrics text reply whose names start
// with prefix, as "name{labels}" -> value.
func scrape(t *testing.T, url, prefix string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || !strings.HasPrefix(name, prefix) {
			continue
		}
		f, err := strconv.ParseFloat(val, 64)
		if err != nil {
			t.Fatalf("%s: %v", sc.Text(), err)
		}
		out[name] = f
	}
	return out
}

// TestNamespaceTrafficMatchesMetrics runs traffic through a real store
// whose counters are registered as ctxd registers them, and checks the
// overview's per-namespace numbers against the /metrics text served from
// them, and both against the requests made.
func TestNamespaceTrafficMatchesMetrics(t *testing.T) {
	ctx := context.Background()
	cat, err := ctxstore.OpenFileCatalog(filepath.Join(t.TempDir(), "ns.json"))
	if err != nil {
		t.Fatal(err)
	}
	dcfg := dram.DefaultConfig()
	dcfg.Capacity, dcfg.MaxBlockSize = 8<<20, 1<<20
	tier, err := dram.New(dcfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tier.Close() })
	st, err := ctxstore.New(ctxstore.DefaultConfig(), cat, tier, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	// As in ctxd: the node registry, and the namespace series in their own
	// registry served beside it on /metrics.
	reg, nsReg := tierRegistry(t), prometheus.NewRegistry()
	nsReg.MustRegister(ctxstore.NewTrafficCollector(st))
	for _, ns := range []string{"hot", "cold", "idle"} {
		if err := st.CreateNamespace(ctx, block.Namespace{Name: ns, BlockTokens: 16}); err != nil {
			t.Fatal(err)
		}
	}
	traffic := []struct {
		ns           string
		puts, hits   int
		misses, size int
	}{{"hot", 6, 25, 4, 3000}, {"cold", 2, 1, 7, 100}}
	for _, tr := range traffic {
		for i := range tr.puts {
			if err := st.Put(ctx, block.NewKey(tr.ns, uint64(i+1)), []byte(strings.Repeat("x", tr.size)), block.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range tr.hits + tr.misses {
			id := uint64(i%tr.puts + 1)
			if i >= tr.hits {
				id = uint64(1000 + i)
			}
			if ref, err := st.Get(ctx, block.NewKey(tr.ns, id)); err == nil {
				ref.Release()
			}
		}
	}

	c, err := New(DefaultConfig(), Deps{NodeID: "n1", Cluster: &fakeCluster{}, Gatherer: reg, Namespaces: storeNamespaces{st}, Traffic: st.Traffic()},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ui/", c.Handler())
	mux.Handle("/metrics", promhttp.HandlerFor(prometheus.Gatherers{reg, nsReg}, promhttp.HandlerOpts{}))
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)

	m := scrape(t, ts.URL+"/metrics", "ctxtier_namespace_")
	resp, err := http.Get(ts.URL + "/ui/api/overview")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var ov Overview
	var raw struct{ Namespaces []map[string]json.RawMessage }
	if err := json.Unmarshal(body, &ov); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw.Namespaces) != 4 { // hot, cold, idle and default
		t.Fatalf("%d namespaces in the overview, want 4", len(raw.Namespaces))
	}
	for _, n := range raw.Namespaces {
		_, has := n["traffic"]
		if busy := string(n["name"]) == `"hot"` || string(n["name"]) == `"cold"`; has != busy {
			t.Errorf("namespace %s: traffic in the JSON %v (only a namespace with traffic has it)", n["name"], has)
		}
	}
	views := map[string]NamespaceView{}
	for _, v := range ov.Namespaces {
		views[v.Name] = v
	}
	for _, tr := range traffic {
		v := views[tr.ns].Traffic
		for _, f := range []struct {
			family    string
			page, exp float64
		}{
			{"gets_total", v.Gets, float64(tr.hits + tr.misses)},
			{"hits_total", v.Hits, float64(tr.hits)},
			{"misses_total", v.Misses, float64(tr.misses)},
			{"puts_total", v.Puts, float64(tr.puts)},
			{"read_bytes_total", v.ReadBytes, float64(tr.hits * tr.size)},
			{"written_bytes_total", v.WrittenBytes, float64(tr.puts * tr.size)},
		} {
			metric := `ctxtier_namespace_` + f.family + `{namespace="` + tr.ns + `"}`
			got, ok := m[metric]
			if !ok || got != f.page || got != f.exp {
				t.Errorf("%s: overview %v, /metrics %v (present %v), traffic made %v", metric, f.page, got, ok, f.exp)
			}
		}
	}
	if v := views["idle"]; v.Traffic != (Traffic{}) {
		t.Errorf("idle namespace has traffic %+v", v.Traffic)
	}
	for name := range m {
		if strings.Contains(name, `"idle"`) {
			t.Errorf("/metrics has a series for the idle namespace: %s", name)
		}
	}
}

// storeNamespaces lists a store's namespaces (no usage scan).
type storeNamespaces struct{ s *ctxstore.Store }

func (n storeNamespaces) Namespaces() []block.Namespace { return n.s.Namespaces() }
func (n storeNamespaces) Usage(context.Context) (map[string]Usage, error) {
	return map[string]Usage{}, nil
}

// countingCluster counts the overview builds (each asks for the status).
type countingCluster struct {
	fakeCluster
	builds atomic.Int64
}

func (c *countingCluster) Status(ctx context.Context) (clusterapi.Status, error) {
	c.builds.Add(1)
	return c.fakeCluster.Status(ctx)
}

func TestOverviewServedFromTheRefresh(t *testing.T) {
	cfg := DefaultConfig()
	cfg.OverviewInterval, cfg.OverviewMaxAge, cfg.OverviewIdle = 20*time.Millisecond, time.Hour, 200*time.Millisecond
	cl := &countingCluster{}
	c, err := New(cfg, Deps{NodeID: "n1", Cluster: cl, Gatherer: prometheus.NewRegistry()}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(c.Handler())
	t.Cleanup(ts.Close)
	overviewTime := func() int64 {
		t.Helper()
		resp, err := http.Get(ts.URL + "/ui/api/overview")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var ov Overview
		if err := json.NewDecoder(resp.Body).Decode(&ov); err != nil || resp.StatusCode != 200 {
			t.Fatalf("overview: %d %v", resp.StatusCode, err)
		}
		return ov.Time
	}
	// Without the refresh running, the first request builds and the next
	// ones (within OverviewMaxAge) are served the same bytes.
	first := overviewTime()
	for range 5 {
		if got := overviewTime(); got != first {
			t.Fatalf("overview rebuilt on a request within OverviewMaxAge: time %d, then %d", first, got)
		}
	}
	if n := cl.builds.Load(); n != 1 {
		t.Fatalf("%d builds for 6 requests, want 1", n)
	}
	// With Run, a request starts the refresh: the overview is rebuilt in
	// the background while pages ask, and no longer once they stop.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go c.Run(ctx)
	deadline := time.Now().Add(30 * time.Second)
	for overviewTime() == first {
		if time.Now().After(deadline) {
			t.Fatal("the refresh did not rebuild the overview in 30 s")
		}
		time.Sleep(cfg.OverviewInterval)
	}
	// Stop asking: after OverviewIdle the builds stop.
	var idle int64
	for stable := 0; stable < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("builds still going on with no request: %d", cl.builds.Load())
		}
		before := cl.builds.Load()
		time.Sleep(cfg.OverviewIdle + 10*cfg.OverviewInterval)
		if idle = cl.builds.Load(); idle == before {
			stable++
		} else {
			stable = 0
		}
	}
	// A request wakes it again.
	overviewTime()
	for cl.builds.Load() == idle {
		if time.Now().After(deadline) {
			t.Fatal("a request did not wake the refresh")
		}
		time.Sleep(cfg.OverviewInterval)
	}
}
