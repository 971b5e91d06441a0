package policysim

import (
	"path/filepath"
	"testing"

	"github.com/ctxtier/ctxtier/sim/trace"
	"github.com/ctxtier/ctxtier/tiers/policy"
)

func reqsOf(ids ...uint64) []trace.Request {
	rs := make([]trace.Request, len(ids))
	for i, id := range ids {
		rs[i] = trace.Request{HashIDs: []uint64{id}}
	}
	return rs
}

// TestReusedOracleVictims drives the oracle by hand: one single-block
// request per access, so access i is request i.
func TestReusedOracleVictims(t *testing.T) {
	const a, b, c = 1, 2, 3
	// B and A both reused and live; B is least recent, A is needed farther ahead.
	twoLive := func(o *reusedOracle) {
		o.at(0)
		o.Insert(0, policy.Meta{Hash: b})
		o.at(1)
		o.Touch(0)
		o.at(2)
		o.Insert(1, policy.Meta{Hash: a})
		o.at(3)
		o.Touch(1)
		o.at(4)
	}
	for _, tc := range []struct {
		name string
		reqs []trace.Request
		k    Knowledge
		ops  func(o *reusedOracle) // runs accesses 0..n-2; the victim is asked at access n-1
		want policy.Handle
	}{
		{
			// B seen once (window), A reused and never used again: A goes
			// first although it is the most recent block.
			name: "dead reused before window", reqs: reqsOf(b, a, a, c, b), k: KnowsDeath,
			ops: func(o *reusedOracle) {
				o.at(0)
				o.Insert(0, policy.Meta{Hash: b})
				o.at(1)
				o.Insert(1, policy.Meta{Hash: a})
				o.at(2)
				o.Touch(1)
				o.at(3)
			},
			want: 1,
		},
		{
			name: "death knowledge orders live reused blocks by recency", reqs: reqsOf(b, b, a, a, c, b, a), k: KnowsDeath,
			ops:  twoLive,
			want: 0,
		},
		{
			name: "future knowledge orders live reused blocks by next use", reqs: reqsOf(b, b, a, a, c, b, a), k: KnowsFuture,
			ops:  twoLive,
			want: 1,
		},
		{
			// A live reused block outlasts a window block that will be used
			// again: the oracle cannot see first reuses.
			name: "window before live reused", reqs: reqsOf(a, a, b, c, a, b), k: KnowsFuture,
			ops: func(o *reusedOracle) {
				o.at(0)
				o.Insert(0, policy.Meta{Hash: a})
				o.at(1)
				o.Touch(0)
				o.at(2)
				o.Insert(1, policy.Meta{Hash: b})
				o.at(3)
			},
			want: 1,
		},
		{
			// Tail demotion: the last block of a request is the window's
			// first victim although it is its most recent block.
			name: "request tail first", reqs: []trace.Request{{HashIDs: []uint64{a, b}}, {HashIDs: []uint64{c}}}, k: KnowsDeath,
			ops: func(o *reusedOracle) {
				o.at(0)
				o.Insert(0, policy.Meta{Hash: a})
				o.at(1)
				o.Insert(1, policy.Meta{Hash: b, Parent: a, HasParent: true})
				o.at(2)
			},
			want: 1,
		},
		{
			// A block inserted again after eviction has two uses: it is reused.
			name: "return after eviction counts as reused", reqs: reqsOf(a, b, a, c, a), k: KnowsFuture,
			ops: func(o *reusedOracle) {
				o.at(0)
				o.Insert(0, policy.Meta{Hash: a})
				o.at(1)
				o.Remove(0)
				o.Insert(0, policy.Meta{Hash: b})
				o.at(2)
				o.Insert(1, policy.Meta{Hash: a})
				o.at(3)
			},
			want: 0, // b (window) goes before the returned a, which is live
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newReusedOracle(tc.reqs, 2, tc.k)
			tc.ops(o)
			got, ok := o.Victim(nil)
			if !ok || got != tc.want {
				t.Fatalf("victim %d (ok %v), want %d", got, ok, tc.want)
			}
		})
	}
}

func TestReusedOracleRejects(t *testing.T) {
	rs := reqsOf(1, 2, 1)
	if _, err := ReusedOracle(rs, 0, KnowsDeath, Options{}); err == nil {
		t.Fatal("capacity 0 accepted")
	}
	if _, err := ReusedOracle(rs, 2, Knowledge(9), Options{}); err == nil {
		t.Fatal("unknown knowledge accepted")
	}
}

// TestReusedOracleOnSharedTraces records the partial-oracle bounds that
// docs/policy.md cites: knowing the future of reused blocks is at least as
// good as knowing only their death, and both stay at or above the Window
// policy, which knows neither.
func TestReusedOracleOnSharedTraces(t *testing.T) {
	if testing.Short() {
		t.Skip("replays both shared traces several times")
	}
	dir := sharedTraces(t)
	for _, file := range []string{"conversation_trace.jsonl", "synthetic_trace.jsonl"} {
		rs, err := trace.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatalf("shared trace %s unreadable: %v", file, err)
		}
		bound := trace.InfiniteCacheHitRatio(rs)
		for _, tokens := range []int{3_000_000, 10_000_000} {
			capacity := tokens / trace.MooncakeBlockTokens
			d, _ := ReusedOracle(rs, capacity, KnowsDeath, Options{})
			f, _ := ReusedOracle(rs, capacity, KnowsFuture, Options{})
			w, _ := Run(rs, capacity, "window", policy.NewWindow, Options{})
			df, ff, wf := d.HitRatio()/bound, f.HitRatio()/bound, w.HitRatio()/bound
			t.Logf("%s %dM: death %.1f%% future %.1f%% window %.1f%% of bound", file, tokens/1_000_000, 100*df, 100*ff, 100*wf)
			if ff < df-0.005 || df < wf {
				t.Errorf("%s %d: future %.3f, death %.3f, window %.3f out of order", file, tokens, ff, df, wf)
			}
		}
	}
}
