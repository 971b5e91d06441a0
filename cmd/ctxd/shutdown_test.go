package main

import (
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/client"
)

// TestShutdownUnderLoad stops a real ctxd with SIGTERM while clients keep
// putting and reading over the native protocol, with a DRAM tier small
// enough that puts evict all the time: alone (an eviction drops), and over
// NVMe (an eviction demotes). ctxd must exit cleanly: its shutdown stops the
// servers and the background loops before the DRAM tier unmaps its arena
// (cmd/ctxd/node.go, tiers/dram/DESIGN.md invariant 15), so nothing faults
// on the unmapped pages, no request is answered Closed by a tier that
// closed under it, and no lease is still held when the tier closes (closing
// the tiers before the servers made the DRAM-only case fail on that last
// check when this test was written).
func TestShutdownUnderLoad(t *testing.T) {
	cases := []struct {
		name string
		args func(t *testing.T) []string
	}{
		// DRAM alone: a request that reached a closed DRAM tier is answered Closed.
		{"dram only", func(*testing.T) []string { return []string{"--dram-capacity", "8MiB", "--nvme-dir", "off"} }},
		// Write-back to NVMe: evictions demote while ctxd shuts down.
		{"dram over nvme", func(t *testing.T) []string { return nvmeArgs(t.TempDir()) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { shutdownUnderLoad(t, tc.args(t)) })
	}
}

func shutdownUnderLoad(t *testing.T, args []string) {
	p := startCtxd(t, args...)
	ctx := withTimeout(t, 3*time.Minute)
	const bs = 256 << 10
	const keys = 128 // 32 MiB of blocks over an 8 MiB DRAM tier
	pool := make([]byte, 2*bs)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range pool {
		pool[i] = byte(r.Uint32())
	}
	payload := func(i int) []byte { off := (i * 4099) % bs; return pool[off : off+bs] }

	var (
		wg       sync.WaitGroup
		stopping atomic.Bool
		ops      atomic.Int64
		errMu    sync.Mutex
		firstErr error
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := client.Dial(ctx, p.Native, client.DefaultOptions())
			if err != nil {
				errMu.Lock()
				firstErr = errors.Join(firstErr, err)
				errMu.Unlock()
				return
			}
			defer c.Close()
			r := rand.New(rand.NewPCG(uint64(w), 5))
			buf := make([]byte, bs)
			for ctx.Err() == nil {
				i := r.IntN(keys)
				k := block.NewKey("default", uint64(i))
				if r.IntN(2) == 0 {
					err = c.Put(ctx, k, payload(i))
				} else if _, err = c.GetInto(ctx, k, buf); errors.Is(err, block.ErrNotFound) {
					err = nil
				}
				if err != nil {
					// The server going away fails calls with connection
					// errors; a Closed answer means a request reached a
					// closed tier: the tiers closed before the servers drained.
					if stopping.Load() && !errors.Is(err, block.ErrClosed) {
						return
					}
					errMu.Lock()
					firstErr = errors.Join(firstErr, err)
					errMu.Unlock()
					return
				}
				ops.Add(1)
			}
		}()
	}
	for ops.Load() < 200 && ctx.Err() == nil {
		errMu.Lock()
		err := firstErr
		errMu.Unlock()
		if err != nil {
			t.Fatalf("load before shutdown: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ev := metricValue(t, p.HTTP, `ctxtier_tier_evictions_total{tier="dram"}`); ev == 0 {
		t.Fatalf("no DRAM eviction after %d operations: the load did not exercise demotion", ops.Load())
	}
	stopping.Store(true)
	err := p.Stop(time.Minute)
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("load: %v", firstErr)
	}
	log := p.Log()
	for _, bad := range []string{"fatal error", "SIGSEGV", "unexpected fault address", "panic:"} {
		if strings.Contains(log, bad) {
			t.Fatalf("ctxd logged %q while shutting down under load:\n%s", bad, log)
		}
	}
	if err != nil {
		t.Fatalf("ctxd did not exit cleanly after SIGTERM under load (%d operations): %v", ops.Load(), err)
	}
	if ev := strings.Count(log, "dram tier closed with blocks still leased"); ev != 0 {
		t.Fatalf("the DRAM tier closed with leases still held: the servers were not drained first")
	}
	t.Logf("%d operations before and during shutdown", ops.Load())
}
