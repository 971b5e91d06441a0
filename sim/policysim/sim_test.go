package policysim

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ctxtier/ctxtier/internal/testdep"
	"github.com/ctxtier/ctxtier/sim/trace"
	"github.com/ctxtier/ctxtier/tiers/policy"
)

func reqs(chains ...[]uint64) []trace.Request {
	out := make([]trace.Request, len(chains))
	for i, c := range chains {
		out[i] = trace.Request{HashIDs: c}
	}
	return out
}

func TestPrefixSemantics(t *testing.T) {
	for _, tc := range []struct {
		name     string
		reqs     []trace.Request
		capacity int
		hits     int64
	}{
		{"repeat fits", reqs([]uint64{1, 2, 3}, []uint64{1, 2, 3}), 3, 3},
		// Block 1 is evicted by 4's insertion (LRU), so the third request
		// misses at its head and its resident blocks do not count.
		{"miss stops the prefix", reqs([]uint64{1, 2, 3}, []uint64{4}, []uint64{1, 2, 3}), 3, 0},
		{"shared head", reqs([]uint64{1, 2}, []uint64{1, 3}, []uint64{1, 2}), 8, 3},
		{"request larger than tier", reqs([]uint64{1, 2, 3, 4, 5}, []uint64{1, 2}), 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Run(tc.reqs, tc.capacity, "lru", policy.NewLRU, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if r.Hits != tc.hits {
				t.Fatalf("hits %d, want %d (total %d)", r.Hits, tc.hits, r.Total)
			}
			b, _ := Belady(tc.reqs, tc.capacity, Options{})
			if b.Hits < r.Hits {
				t.Fatalf("belady %d hits below lru %d", b.Hits, r.Hits)
			}
		})
	}
	if _, err := Run(nil, 0, "lru", policy.NewLRU, Options{}); err == nil {
		t.Fatal("capacity 0 must be rejected")
	}
}

// agentic generates sessions that grow a context turn by turn on top of a
// few shared system prompts (tool-using agents), interleaved, with a share
// of one-shot requests: a workload family unlike the Mooncake traces.
func agentic(seed uint64, sessions, prompts, promptBlocks int) []trace.Request {
	rng := rand.New(rand.NewPCG(seed, 7))
	next := uint64(1 << 40)
	fresh := func() uint64 { next++; return next }
	sys := make([][]uint64, prompts)
	for i := range sys {
		for range promptBlocks {
			sys[i] = append(sys[i], fresh())
		}
	}
	type sess struct {
		ctx   []uint64
		turns int
	}
	live := []*sess{}
	var out []trace.Request
	for started := 0; started < sessions || len(live) > 0; {
		if started < sessions && (len(live) < 16 || rng.IntN(4) == 0) {
			s := &sess{ctx: append([]uint64(nil), sys[rng.IntN(prompts)]...), turns: 1 + rng.IntN(12)}
			live = append(live, s)
			started++
		}
		if rng.IntN(5) == 0 { // a one-shot request sharing only the prompt
			c := append([]uint64(nil), sys[rng.IntN(prompts)]...)
			for range 1 + rng.IntN(6) {
				c = append(c, fresh())
			}
			out = append(out, trace.Request{HashIDs: c})
		}
		i := rng.IntN(len(live))
		s := live[i]
		for range 1 + rng.IntN(3) {
			s.ctx = append(s.ctx, fresh())
		}
		out = append(out, trace.Request{HashIDs: append([]uint64(nil), s.ctx...)})
		if s.turns--; s.turns == 0 {
			live = append(live[:i], live[i+1:]...)
		}
	}
	return out
}

// TestPoliciesOnOtherWorkloads checks that the policies do not collapse on
// a workload family they were not developed on: agentic sessions with long
// shared prompts, at several capacities (block sizes only rescale the
// capacity in blocks, so capacities from small to large stand in for them).
func TestPoliciesOnOtherWorkloads(t *testing.T) {
	for _, w := range []struct {
		name              string
		sessions, prompts int
		promptBlocks      int
	}{{"few long prompts", 400, 3, 16}, {"many short prompts", 400, 40, 2}} {
		rs := agentic(1, w.sessions, w.prompts, w.promptBlocks)
		bound := trace.InfiniteCacheHitRatio(rs)
		for _, capacity := range []int{64, 256, 1024, 4096} {
			l, _ := Run(rs, capacity, "lru", policy.NewLRU, Options{})
			for _, pc := range []struct {
				name string
				f    policy.Factory
			}{{"segmented", policy.NewSegmented}, {"window", policy.NewWindow}, {"duel", policy.NewDuel}} {
				s, _ := Run(rs, capacity, pc.name, pc.f, Options{})
				t.Logf("%s cap %d: bound %.3f lru %.3f %s %.3f", w.name, capacity, bound, l.HitRatio(), pc.name, s.HitRatio())
				if s.HitRatio() < 0.95*l.HitRatio() {
					t.Errorf("%s cap %d: %s %.3f collapses below LRU %.3f", w.name, capacity, pc.name, s.HitRatio(), l.HitRatio())
				}
			}
		}
	}
}

// sharedTraces finds ../shared/traces beside the repository root, or the
// directory named by CTXTIER_SHARED_TRACES.
func sharedTraces(t *testing.T) string {
	if d := os.Getenv("CTXTIER_SHARED_TRACES"); d != "" {
		return d
	}
	d := filepath.Join("..", "..", "..", "shared", "traces")
	return testdep.Path(t, d, "the shared traces", "they live in ../shared/traces beside the repository; or set CTXTIER_SHARED_TRACES")
}

// sweepTokens are the capacities of `ctxbench sim --sweep` (its
// --sweep-tokens default), the sweep docs/policy.md reports.
var sweepTokens = []int{500_000, 1_000_000, 2_000_000, 3_000_000, 5_000_000, 7_500_000, 10_000_000, 15_000_000, 20_000_000, 30_000_000}

// TestSharedTraces replays the Mooncake traces through the Window and Duel
// policies at every capacity of the sweep. It asserts what they achieve
// (see docs/policy.md): Duel has at least LRU's hits at every capacity,
// exactly (hit counts, no tolerance: issue 21's "never below LRU"). Window
// has at least LRU's hits except at the cells listed in belowLRU, where it
// is measured below LRU and may be by at most 0.5 points of the bound; and
// both keep the measured floors at 3M and 10M tokens. The targets
// (60% of the bound at 3M, 90% at 10M) are not reached on the conversation
// trace; the floors record the measured result instead.
func TestSharedTraces(t *testing.T) {
	dir := sharedTraces(t)
	belowLRU := map[string]map[int]bool{ // trace -> tokens: Window below LRU there
		"conversation_trace.jsonl": {20_000_000: true, 30_000_000: true},
		"synthetic_trace.jsonl":    {20_000_000: true},
	}
	for _, tc := range []struct {
		file            string
		floor3, floor10 [2]float64 // fraction of the bound: window, duel
	}{
		{"conversation_trace.jsonl", [2]float64{0.47, 0.46}, [2]float64{0.81, 0.81}},
		{"synthetic_trace.jsonl", [2]float64{0.51, 0.51}, [2]float64{0.91, 0.91}},
	} {
		rs, err := trace.ReadFile(filepath.Join(dir, tc.file))
		if err != nil {
			t.Fatalf("shared trace %s unreadable: %v", tc.file, err)
		}
		bound := trace.InfiniteCacheHitRatio(rs)
		for _, tokens := range sweepTokens {
			capacity := tokens / trace.MooncakeBlockTokens
			l, _ := Run(rs, capacity, "lru", policy.NewLRU, Options{})
			s, _ := Run(rs, capacity, "window", policy.NewWindow, Options{})
			d, _ := Run(rs, capacity, "duel", policy.NewDuel, Options{})
			sf, lf, df := s.HitRatio()/bound, l.HitRatio()/bound, d.HitRatio()/bound
			t.Logf("%s %gM tokens: lru %.2f%% of bound (%d hits), window %.2f%% (%d), duel %.2f%% (%d)",
				tc.file, float64(tokens)/1e6, 100*lf, l.Hits, 100*sf, s.Hits, 100*df, d.Hits)
			switch {
			case !belowLRU[tc.file][tokens] && s.Hits < l.Hits:
				t.Errorf("%s %d tokens: window %d hits below lru %d", tc.file, tokens, s.Hits, l.Hits)
			case sf < lf-0.005:
				t.Errorf("%s %d tokens: window %.4f more than 0.5 points below lru %.4f", tc.file, tokens, sf, lf)
			}
			if d.Hits < l.Hits {
				t.Errorf("%s %d tokens: duel %d hits below lru %d", tc.file, tokens, d.Hits, l.Hits)
			}
			for i, r := range []struct {
				name string
				f    float64
			}{{"window", sf}, {"duel", df}} {
				if tokens == 3_000_000 && r.f < tc.floor3[i] || tokens == 10_000_000 && r.f < tc.floor10[i] {
					t.Errorf("%s %d tokens: %s %.3f of bound, below the measured floor", tc.file, tokens, r.name, r.f)
				}
			}
		}
	}
}

// opLog is a test policy that evicts the resident block with the largest
// hash and logs every operation the replay makes.
type opLog struct {
	hash map[policy.Handle]uint64
	ops  []string
}

func (p *opLog) Insert(h policy.Handle, m policy.Meta) {
	p.hash[h] = m.Hash
	p.ops = append(p.ops, fmt.Sprintf("insert %d", m.Hash))
}
func (p *opLog) Touch(h policy.Handle) { p.ops = append(p.ops, fmt.Sprintf("touch %d", p.hash[h])) }
func (p *opLog) Remove(h policy.Handle) {
	p.ops = append(p.ops, fmt.Sprintf("remove %d", p.hash[h]))
	delete(p.hash, h)
}
func (p *opLog) Victim(func(policy.Handle) bool) (policy.Handle, bool) {
	var v policy.Handle
	ok := false
	for h, x := range p.hash {
		if !ok || x > p.hash[v] {
			v, ok = h, true
		}
	}
	return v, ok
}
func (p *opLog) Len() int { return len(p.hash) }

// TestPrefixTouchOnly: by default every resident block of a request is
// touched, also after its first miss; with PrefixTouchOnly only the hit
// prefix is, and resident blocks after the miss are left alone (what ctxd
// sees from `ctxbench replay`). Hits are the same either way; Belady
// ignores the option.
func TestPrefixTouchOnly(t *testing.T) {
	// Capacity 3. After [5 1 2] and [9] (which evicts 5, the largest), the
	// third request misses its head 5 (evicting 9), then finds 1 and 2
	// resident after the miss.
	rs := reqs([]uint64{5, 1, 2}, []uint64{9}, []uint64{5, 1, 2}, []uint64{1, 2, 7})
	common := []string{"insert 5", "insert 1", "insert 2", "remove 5", "insert 9", "remove 9", "insert 5"}
	for _, tc := range []struct {
		name string
		opt  Options
		want []string
	}{
		{"every resident block", Options{}, append(append([]string{}, common...),
			"touch 1", "touch 2", "touch 1", "touch 2", "remove 5", "insert 7")},
		{"hit prefix only", Options{PrefixTouchOnly: true}, append(append([]string{}, common...),
			"touch 1", "touch 2", "remove 5", "insert 7")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p *opLog
			r, err := Run(rs, 3, "oplog", func(int) policy.Policy {
				p = &opLog{hash: map[policy.Handle]uint64{}}
				return p
			}, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if r.Hits != 2 || r.Total != 10 {
				t.Fatalf("hits %d of %d, want 2 of 10", r.Hits, r.Total)
			}
			if !slices.Equal(p.ops, tc.want) {
				t.Fatalf("operations\n got %v\nwant %v", p.ops, tc.want)
			}
			b, err := Belady(rs, 3, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			b0, _ := Belady(rs, 3, Options{})
			if b != b0 {
				t.Fatalf("belady with %+v: %+v, without: %+v", tc.opt, b, b0)
			}
		})
	}
}
