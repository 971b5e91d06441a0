package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/client"
)

// TestCtxdServesBothProtocols starts a real ctxd, puts a block over the
// native protocol, reads it over HTTP and back, then stops it with SIGTERM.
func TestCtxdServesBothProtocols(t *testing.T) {
	p := startCtxd(t, "--dram-capacity", "64MiB")
	ctx := withTimeout(t, 30*time.Second)
	c, err := client.Dial(ctx, p.Native, client.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	data := bytes.Repeat([]byte("kv-cache!"), 100000)
	k := block.NewKey("default", 0xcb38de07a0c0bf1c)
	if err := c.Put(ctx, k, data); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + p.HTTP + "/v1/namespaces/default/blocks/cb38de07a0c0bf1c")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(body, data) {
		t.Fatalf("HTTP get: status %d, %d bytes", resp.StatusCode, len(body))
	}
	n, err := c.Lookup(ctx, []block.Key{k, block.NewKey("default", 1)})
	if err != nil || n != 1 {
		t.Fatalf("lookup = %d, %v", n, err)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := http.Get("http://" + p.HTTP + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
		if path == "/metrics" && !strings.Contains(string(b), `ctxtier_tier_resident_bytes{tier="dram"}`) {
			t.Fatalf("/metrics lacks the dram tier gauges")
		}
		// The namespace's traffic: one native put, one HTTP get (a hit).
		for _, want := range []string{
			`ctxtier_namespace_puts_total{namespace="default"} 1` + "\n",
			`ctxtier_namespace_written_bytes_total{namespace="default"} 900000` + "\n",
			`ctxtier_namespace_gets_total{namespace="default"} 1` + "\n",
			`ctxtier_namespace_hits_total{namespace="default"} 1` + "\n",
			`ctxtier_namespace_read_bytes_total{namespace="default"} 900000` + "\n",
		} {
			if path == "/metrics" && !strings.Contains(string(b), want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
	}
	// The router is mounted: a query over the block we stored reports the
	// tier's own prefix depth.
	resp, err = http.Post("http://"+p.HTTP+"/v1/route/query", "application/json",
		strings.NewReader(`{"namespace":"default","block_hashes":["cb38de07a0c0bf1c","0000000000000001"]}`))
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(rb), `"tier_depth":1`) {
		t.Fatalf("route query: %d %s", resp.StatusCode, rb)
	}
	// The S3 admin endpoint answers, and refuses anonymous requests.
	resp, err = http.Get("http://" + p.S3 + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("anonymous S3 request: %d, want 403", resp.StatusCode)
	}
	if err := p.Stop(20 * time.Second); err != nil {
		t.Fatalf("graceful shutdown: %v", err)
	}
	if !strings.Contains(p.Log(), "shutting down") {
		t.Fatal("no shutdown log line")
	}
}

// TestMemoryBoundedUnderEvictingLoad runs a mixed put/get load whose working
// set is 8x the DRAM capacity, so the tier evicts continuously, and samples
// ctxd's resident memory throughout. It must stay within capacity + 10% +
// 200 MiB. CTXTIER_SOAK sets the duration (make soak: 2m; default 15s).
func TestMemoryBoundedUnderEvictingLoad(t *testing.T) {
	dur := 15 * time.Second
	if s := os.Getenv("CTXTIER_SOAK"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		dur = d
	} else if testing.Short() {
		dur = 5 * time.Second
	}
	const capacity = 256 << 20
	const bs = 1 << 20
	const keys = 8 * capacity / bs
	p := startCtxd(t, "--dram-capacity", "256MiB")
	ctx := withTimeout(t, dur+time.Minute)
	c, err := client.Dial(ctx, p.Native, client.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Block i is a 1 MiB window into a fixed random buffer, at an offset
	// that depends on i: distinct content per key with no per-put cost.
	pool := make([]byte, 2*bs)
	pr := rand.New(rand.NewPCG(1, 2))
	for j := 0; j < len(pool); j += 8 {
		binary.LittleEndian.PutUint64(pool[j:], pr.Uint64())
	}
	payload := func(i int) []byte {
		off := (i * 4099) % bs
		return pool[off : off+bs]
	}
	var maxRSS, puts, gets, hits atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				if r, err := p.RSS(); err == nil && r > maxRSS.Load() {
					maxRSS.Store(r)
				}
			}
		}
	}()
	errc := make(chan error, 4)
	deadline := time.Now().Add(dur)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 9))
			buf := make([]byte, bs)
			for time.Now().Before(deadline) {
				i := r.IntN(keys)
				k := block.NewKey("default", uint64(i))
				if r.IntN(2) == 0 {
					if err := c.Put(ctx, k, payload(i)); err != nil {
						errc <- fmt.Errorf("put: %w", err)
						return
					}
					puts.Add(1)
					continue
				}
				n, err := c.GetInto(ctx, k, buf)
				gets.Add(1)
				switch {
				case err == nil:
					hits.Add(1)
					if !bytes.Equal(buf[:n], payload(i)) {
						errc <- fmt.Errorf("block %d: wrong bytes", i)
						return
					}
				case !errors.Is(err, block.ErrNotFound):
					errc <- fmt.Errorf("get: %w", err)
					return
				}
			}
		}()
	}
	time.Sleep(dur)
	close(stop)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	bound := int64(capacity)*11/10 + 200<<20
	t.Logf("%v of load: %d puts, %d gets (%d hits); max RSS %d MiB, bound %d MiB",
		dur, puts.Load(), gets.Load(), hits.Load(), maxRSS.Load()>>20, bound>>20)
	if ev := metricValue(t, p.HTTP, `ctxtier_tier_evictions_total{tier="dram"}`); ev == 0 {
		t.Fatalf("no evictions after %d puts: the load did not exercise eviction", puts.Load())
	}
	if maxRSS.Load() == 0 || maxRSS.Load() > bound {
		t.Fatalf("max RSS %d MiB exceeds capacity + 10%% + 200 MiB = %d MiB", maxRSS.Load()>>20, bound>>20)
	}
}

// metricValue scrapes one sample from ctxd's /metrics.
func metricValue(t *testing.T, httpAddr, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("metric %s: %v", series, err)
			}
			return v
		}
	}
	t.Fatalf("metric %s not exported", series)
	return 0
}
