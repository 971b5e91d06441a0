package main

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/sim/policysim"
	"github.com/ctxtier/ctxtier/sim/trace"
	"github.com/ctxtier/ctxtier/sim/trace/agentic"
	"github.com/ctxtier/ctxtier/tiers/policy"
)

// TestReplayCtxdMatchesSimulator replays a small agentic trace against a
// real ctxd whose DRAM tier holds 1000 blocks of 4 KiB (eviction happens),
// without hints and with them. Every access is counted, every hit's bytes
// are compared with what was put, and without hints the hit ratio must be
// close to the simulator's for the same policy (window) at the same
// capacity: the same policy code decides, only the order of touches and
// inserts within a request differs. With hints only correctness is checked
// here (the paced replay's result depends on the machine's speed);
// docs/benchmarks.md has the measured numbers.
func TestReplayCtxdMatchesSimulator(t *testing.T) {
	c := agentic.DefaultConfig()
	c.Sessions = 40
	reqs, err := agentic.Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	const blocks, bs = 1000, 4096
	sim, err := policysim.Run(reqs, blocks, "window", policy.NewWindow, policysim.Options{})
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
		t.Logf("hints=%v sessions=%v: ctxd hit ratio %.4f, simulator window %.4f, bound %.4f, %s, %d session ends, %d blocks released", hints, mode.sessions, res.HitRatio(), sim.HitRatio(), trace.InfiniteCacheHitRatio(reqs), res.wall, res.ended, res.released)
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
			t.Errorf("ctxd window hit ratio %.4f, simulator %.4f: more than 5 points apart", res.HitRatio(), sim.HitRatio())
		}
	}
}
