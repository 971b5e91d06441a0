package main

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/sim/policysim"
	"github.com/ctxtier/ctxtier/sim/replay"
	"github.com/ctxtier/ctxtier/sim/trace"
	"github.com/ctxtier/ctxtier/sim/trace/agentic"
	"github.com/ctxtier/ctxtier/tiers/policy"
)

// smallAgentic is the default agentic workload cut to 40 sessions.
func smallAgentic(t *testing.T) []trace.Request {
	t.Helper()
	c := agentic.DefaultConfig()
	c.Sessions = 40
	reqs, err := agentic.Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	return reqs
}

// TestReplayCtxdMatchesSimulator replays a small agentic trace against a
// real ctxd whose DRAM tier holds 1000 blocks of 4 KiB (eviction happens),
// without hints and with them. Every access is counted, every hit's bytes
// are compared with what was put, and without hints the hit ratio must be
// close to the simulator's for the same policy (duel, ctxd's default) at the same
// capacity: the same policy code decides, only the order of touches and
// inserts within a request differs. With hints only correctness is checked
// here (the paced replay's result depends on the machine's speed);
// docs/benchmarks.md has the measured numbers.
func TestReplayCtxdMatchesSimulator(t *testing.T) {
	reqs := smallAgentic(t)
	const blocks, bs = 1000, 4096
	sim, err := policysim.Run(reqs, blocks, "duel", policy.NewDuel, policysim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bin := ctxdBinary(t)
	ends := 0
	for _, r := range reqs {
		if r.Hints != nil && r.Hints.SessionEnd && r.Session != "" {
			ends++
		}
	}
	for _, mode := range []struct{ hints, sessions bool }{{false, false}, {true, false}, {true, true}} {
		hints := mode.hints
		native, _ := startCtxdWith(t, bin, "--dram-capacity", strconv.Itoa(blocks*bs), "--nvme-dir", "off")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		res, err := replayCtxd(ctx, reqs, ctxdArgs{addr: native, namespace: "default", blockBytes: bs, hints: hints, sessions: mode.sessions, speed: 50, graceMs: 10000}, nil)
		cancel()
		if err != nil {
			t.Fatalf("hints=%v: %v", hints, err)
		}
		if res.Total != sim.Total || res.checked < res.Hits || res.Hits == 0 || res.Hits == res.Total {
			t.Fatalf("hints=%v: %d/%d hits, %d verified; the simulator counted %d accesses", hints, res.Hits, res.Total, res.checked, sim.Total)
		}
		t.Logf("hints=%v sessions=%v: ctxd hit ratio %.4f, simulator duel %.4f, bound %.4f, %s, %d session ends, %d blocks released", hints, mode.sessions, res.HitRatio(), sim.HitRatio(), trace.InfiniteCacheHitRatio(reqs), res.wall, res.ended, res.released)
		if res.HitRatio() >= trace.InfiniteCacheHitRatio(reqs)-0.01 {
			t.Fatalf("hints=%v: hit ratio %.4f at the infinite-cache bound: nothing was evicted", hints, res.HitRatio())
		}
		if mode.sessions && (res.ended != int64(ends) || ends == 0 || res.released == 0) {
			t.Fatalf("sessions: %d of the trace's %d session ends sent, %d blocks released", res.ended, ends, res.released)
		}
		if !mode.sessions && res.ended != 0 {
			t.Fatalf("hints=%v: %d session ends sent without --ctxd-sessions", hints, res.ended)
		}
		if !hints && math.Abs(res.HitRatio()-sim.HitRatio()) > 0.05 {
			t.Errorf("ctxd duel hit ratio %.4f, simulator %.4f: more than 5 points apart", res.HitRatio(), sim.HitRatio())
		}
	}
}

// TestReplayCtxdLikeTheReplay: with the keys the simulator sees (a fixed
// key salt, the trace salted the same way) and prefix-only reads (a lookup,
// a get of the prefix, a put of the rest, as `ctxbench replay` drives
// ctxd), ctxd's hit ratio matches the simulator's with PrefixTouchOnly. Not
// hit for hit under Window: measured over seven runs, some with the machine
// loaded (load average up to 6.8), LRU equal hit for hit in every run,
// Window 65 to 73 of 36 222 below, hence the tolerances. (Before a re-put
// of a block whose eviction had not reached the cluster index yet was
// written in its batch's order, ctxstore/cluster putInOrder, Window moved
// with the load, up to 305 hits below, and failed the 0.005 here in CI.)
func TestReplayCtxdLikeTheReplay(t *testing.T) {
	reqs := smallAgentic(t)
	saltTrace(reqs, replay.SaltMask(7))
	const blocks, bs = 1000, 4096
	bin := ctxdBinary(t)
	for _, tc := range []struct {
		policy string
		f      policy.Factory
		tol    float64
	}{
		{"lru", policy.NewLRU, 0.002},
		{"window-nohints", policy.NewWindow, 0.005},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			sim, err := policysim.Run(reqs, blocks, tc.policy, tc.f, policysim.Options{PrefixTouchOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			native, _ := startCtxdWith(t, bin, "--dram-capacity", strconv.Itoa(blocks*bs), "--nvme-dir", "off", "--dram-policy", tc.policy)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			res, err := replayCtxd(ctx, reqs, ctxdArgs{addr: native, namespace: "default", blockBytes: bs, speed: 1, fixedKeys: true, prefixOnly: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: ctxd %d hits of %d, simulator %d (ratio %.4f vs %.4f), %s", tc.policy, res.Hits, res.Total, sim.Hits, res.HitRatio(), sim.HitRatio(), res.wall)
			if res.Total != sim.Total || res.checked < res.Hits || res.Hits == 0 {
				t.Fatalf("%d/%d hits, %d verified; the simulator counted %d accesses", res.Hits, res.Total, res.checked, sim.Total)
			}
			if res.HitRatio() >= trace.InfiniteCacheHitRatio(reqs)-0.01 {
				t.Fatalf("hit ratio %.4f at the infinite-cache bound: nothing was evicted", res.HitRatio())
			}
			if d := math.Abs(res.HitRatio() - sim.HitRatio()); d > tc.tol {
				t.Errorf("ctxd hit ratio %.4f, simulator %.4f: %.4f apart, more than %.4f", res.HitRatio(), sim.HitRatio(), d, tc.tol)
			}
		})
	}
}
