package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/client"
)

// readyRecord returns the fields of the process's "ctxd ready" log line.
func readyRecord(t *testing.T, p *proc) map[string]any {
	t.Helper()
	for _, line := range strings.Split(p.Log(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "ctxd ready" {
			return rec
		}
	}
	t.Fatal("no ctxd ready log line")
	return nil
}

// TestCtxdDRAMPolicyDefaultWindow starts real ctxd processes with a 16 MiB
// DRAM tier and no NVMe tier (an eviction drops the block), once without a
// --dram-policy flag and once with --dram-policy lru. Each gets a hot set of
// 4 blocks that are read back (hits), then a scan of 48 chained blocks it
// never reads, three times the DRAM capacity. The default must be window,
// named in the ready log, and behave as Window: the hot blocks were hit, so
// they live in its main segment and the scan evicts only window blocks;
// under LRU the scan evicts them. Every block that is still found must have
// its exact bytes, and the tier must have evicted.
func TestCtxdDRAMPolicyDefaultWindow(t *testing.T) {
	const bs = 1 << 20
	const hot, scan = 4, 48
	payload := func(i int) []byte {
		b := make([]byte, bs)
		for j := range b {
			b[j] = byte(i*131 + j*7 + j>>12)
		}
		return b
	}
	for _, tc := range []struct {
		name       string
		args       []string
		wantPolicy string
		hotKept    bool
	}{
		{"default", nil, "window", true},
		{"lru", []string{"--dram-policy", "lru"}, "lru", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startCtxd(t, append([]string{"--dram-capacity", "16MiB", "--nvme-dir", "off"}, tc.args...)...)
			if got := readyRecord(t, p)["dram_policy"]; got != tc.wantPolicy {
				t.Fatalf("ready log dram_policy = %v, want %s", got, tc.wantPolicy)
			}
			ctx := withTimeout(t, 2*time.Minute)
			c, err := client.Dial(ctx, p.Native, client.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			key := func(i int) block.Key { return block.NewKey("default", uint64(1000+i)) }
			for i := range hot {
				if err := c.Put(ctx, key(i), payload(i)); err != nil {
					t.Fatalf("put hot %d: %v", i, err)
				}
			}
			for i := range hot {
				got, err := c.Get(ctx, key(i))
				if err != nil || !bytes.Equal(got, payload(i)) {
					t.Fatalf("hot block %d before the scan: %d bytes, %v", i, len(got), err)
				}
			}
			for i := hot; i < hot+scan; i++ {
				opts := block.PutOptions{}
				if i > hot {
					opts.Parent, opts.HasParent = key(i-1).Hash, true
				}
				if err := c.PutWithOptions(ctx, key(i), payload(i), opts); err != nil {
					t.Fatalf("put scan %d: %v", i, err)
				}
			}
			if ev := metricValue(t, p.HTTP, `ctxtier_tier_evictions_total{tier="dram"}`); ev < scan-16 {
				t.Fatalf("%v dram evictions after %d MiB of puts into 16 MiB: the load did not evict", ev, hot+scan)
			}
			kept := 0
			for i := range hot + scan {
				got, err := c.Get(ctx, key(i))
				switch {
				case err == nil:
					if !bytes.Equal(got, payload(i)) {
						t.Fatalf("block %d: wrong bytes after eviction", i)
					}
					kept++
				case !errors.Is(err, block.ErrNotFound):
					t.Fatalf("get %d: %v", i, err)
				case i < hot && tc.hotKept:
					t.Errorf("hot block %d was evicted by a scan under %s", i, tc.wantPolicy)
				}
				if err == nil && i < hot && !tc.hotKept {
					t.Errorf("hot block %d survived a scan of 3x the capacity under %s", i, tc.wantPolicy)
				}
			}
			if kept == 0 {
				t.Fatal("no block resident after the scan")
			}
			t.Logf("%s: %d of %d blocks resident after the scan", tc.wantPolicy, kept, hot+scan)
		})
	}
}
