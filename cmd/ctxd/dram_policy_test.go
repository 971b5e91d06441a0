package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
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

// TestCtxdDRAMPolicies starts real ctxd processes with a 32 MiB DRAM tier
// and no NVMe tier (an eviction drops the block): without a --dram-policy
// flag, and with window and lru. Each gets a hot set of 4 blocks, then
// rounds of: read the hot blocks (a miss is put again, as an engine saves
// what it recomputed), then a scan of 40 chained blocks it never reads,
// 1.25 times the DRAM capacity. Under lru every scan evicts the hot set;
// under window it stays from the first round on (hit, it lives in the main
// segment and the scan evicts window blocks). The default must be duel,
// named in the ready log, and behave as Duel: LRU order at first (the hot
// set lost), then, once its Window shadow has shown a significant lead in
// hits, Window's (the hot set kept through the last rounds), as its
// metrics say (Window leading after one switch). Every block
// that is found must have its exact bytes, and the tier must have evicted.
func TestCtxdDRAMPolicies(t *testing.T) {
	const bs = 1 << 20
	const hot, scan, rounds = 4, 40, 16
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
		// windowLeads and switches: the policy metrics at the end.
		windowLeads, switches float64
		// check judges the hot hits of rounds 1.. (round 0 reads the
		// hot set right after its put).
		check func(hits []int) bool
	}{
		{"default", nil, "duel", 1, 1, func(h []int) bool {
			return h[0] == 0 && h[1] == 0 && h[len(h)-1] == hot && h[len(h)-2] == hot && h[len(h)-3] == hot
		}},
		{"window", []string{"--dram-policy", "window"}, "window", 1, 0, func(h []int) bool {
			return !slices.ContainsFunc(h, func(n int) bool { return n != hot })
		}},
		{"lru", []string{"--dram-policy", "lru"}, "lru", 0, 0, func(h []int) bool {
			return !slices.ContainsFunc(h, func(n int) bool { return n != 0 })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startCtxd(t, append([]string{"--dram-capacity", "32MiB", "--nvme-dir", "off"}, tc.args...)...)
			if got := readyRecord(t, p)["dram_policy"]; got != tc.wantPolicy {
				t.Fatalf("ready log dram_policy = %v, want %s", got, tc.wantPolicy)
			}
			ctx := withTimeout(t, 3*time.Minute)
			c, err := client.Dial(ctx, p.Native, client.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			key := func(i int) block.Key { return block.NewKey("default", uint64(1000+i)) }
			// get reads block i: whether it was resident (with its bytes).
			get := func(i int) bool {
				got, err := c.Get(ctx, key(i))
				switch {
				case err == nil && !bytes.Equal(got, payload(i)):
					t.Fatalf("block %d: wrong bytes", i)
				case err != nil && !errors.Is(err, block.ErrNotFound):
					t.Fatalf("get %d: %v", i, err)
				}
				return err == nil
			}
			for i := range hot {
				if err := c.Put(ctx, key(i), payload(i)); err != nil {
					t.Fatalf("put hot %d: %v", i, err)
				}
			}
			next := hot // the next scan block
			var hits []int
			for round := range rounds {
				n := 0
				for i := range hot {
					if get(i) {
						n++
					} else if err := c.Put(ctx, key(i), payload(i)); err != nil {
						t.Fatalf("put hot %d again: %v", i, err)
					}
				}
				if round == 0 && n != hot {
					t.Fatalf("%d of %d hot blocks resident right after their put", n, hot)
				}
				if round > 0 {
					hits = append(hits, n)
				}
				for i := next; i < next+scan; i++ {
					opts := block.PutOptions{}
					if i > next {
						opts.Parent, opts.HasParent = key(i-1).Hash, true
					}
					if err := c.PutWithOptions(ctx, key(i), payload(i), opts); err != nil {
						t.Fatalf("put scan %d: %v", i, err)
					}
				}
				next += scan
			}
			if ev := metricValue(t, p.HTTP, `ctxtier_tier_evictions_total{tier="dram"}`); ev < float64(rounds*(scan-32)) {
				t.Fatalf("%v dram evictions after %d rounds of %d MiB of puts into 32 MiB: the load did not evict", ev, rounds, scan)
			}
			leads := metricValue(t, p.HTTP, `ctxtier_tier_policy_window_leads{tier="dram"}`)
			switches := metricValue(t, p.HTTP, `ctxtier_tier_policy_switches_total{tier="dram"}`)
			if leads != tc.windowLeads || switches != tc.switches {
				t.Errorf("%s: policy_window_leads %v, policy_switches_total %v; want %v and %v", tc.name, leads, switches, tc.windowLeads, tc.switches)
			}
			kept := 0
			for i := range next {
				if get(i) {
					kept++
				}
			}
			if kept == 0 {
				t.Fatal("no block resident after the rounds")
			}
			t.Logf("%s: hot hits per round %v; %d of %d blocks resident at the end", tc.wantPolicy, hits, kept, next)
			if !tc.check(hits) {
				t.Errorf("%s: hot hits per round %v do not behave as %s", tc.name, hits, tc.wantPolicy)
			}
		})
	}
}
