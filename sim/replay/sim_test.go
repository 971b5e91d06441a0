package replay

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/blocktest"
	"github.com/ctxtier/ctxtier/internal/testdep"
	"github.com/ctxtier/ctxtier/sim/trace"
)

// still is a clock that never moves: measured calls take no time, so a run
// is deterministic.
func still() time.Time { return time.Unix(0, 0) }

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.BlockTokens = 4
	cfg.KVBytesPerToken = 1000
	cfg.BytesScale = 10
	cfg.PrefillWorkers = 2
	cfg.DecodeWorkers = 1
	cfg.Prefill.TokensPerSec = 100 // one 4-token block: 40 ms
	cfg.Prefill.PassSeconds = 0
	cfg.Prefill.Attention = false // linear costs keep the hand-computed TTFTs simple; attention_test.go covers the term
	cfg.HBMBlocks = 100
	cfg.TierBytesPerSec = 1e6
	cfg.HandoffBytesPerSec = 1e6
	cfg.DecodeSecondsPerToken = 0.01
	cfg.DecodeKVTokens = 1000
	return cfg
}

func req(ms int64, in, out int, ids ...uint64) trace.Request {
	return trace.Request{TimestampMs: ms, InputLength: in, OutputLength: out, HashIDs: ids}
}

func run(t *testing.T, cfg Config, tier TierClient, reqs []trace.Request) *Report {
	t.Helper()
	rep, err := Run(context.Background(), cfg, Deps{Tier: tier, Now: still}, reqs)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestNoCacheTTFTIsQueuePlusCompute(t *testing.T) {
	cfg := testConfig()
	cfg.PrefillWorkers = 1
	cfg.Policies = []Policy{NoCache}
	// Two requests at t=0 on one worker: the second waits for the first.
	rep := run(t, cfg, nil, []trace.Request{req(0, 8, 2, 1, 2), req(0, 6, 2, 3, 4)})
	recs := rep.Policies[0].Records
	if !near(recs[0].TTFT, 0.08) || !near(recs[0].Queue, 0) {
		t.Fatalf("first: ttft %v queue %v, want 0.08 and 0", recs[0].TTFT, recs[0].Queue)
	}
	// 6 tokens: a 4-token block and a 2-token one: 60 ms after 80 ms of queue.
	if !near(recs[1].Queue, 0.08) || !near(recs[1].TTFT, 0.14) {
		t.Fatalf("second: ttft %v queue %v, want 0.14 and 0.08", recs[1].TTFT, recs[1].Queue)
	}
	// Handoff of 6 tokens x 1000 B at 1 MB/s; decode 2 tokens x 10 ms.
	if !near(recs[1].Handoff, 0.006) || !near(recs[1].E2E, 0.14+0.006+0.02) {
		t.Fatalf("second: handoff %v e2e %v", recs[1].Handoff, recs[1].E2E)
	}
	if p := rep.Policies[0]; p.HitBlocks() != 0 || p.Blocks != 4 || p.Tokens != 14 {
		t.Fatalf("no-cache counted hits or wrong totals: %+v", p)
	}
}

func TestHBMHitsSkipCompute(t *testing.T) {
	cfg := testConfig()
	cfg.PrefillWorkers = 1
	cfg.Policies = []Policy{HBMRoundRobin}
	rep := run(t, cfg, nil, []trace.Request{req(0, 12, 1, 1, 2, 3), req(1000, 16, 1, 1, 2, 3, 4)})
	r := rep.Policies[0].Records[1]
	if r.HBMBlocks != 3 || r.HBMTokens != 12 || r.ComputeTokens != 4 || !near(r.TTFT, 0.04) {
		t.Fatalf("second request: %+v", r)
	}
	p := rep.Policies[0]
	if p.HBMHitBlocks != 3 || p.Blocks != 7 || !near(p.BlockHitRatio, 3.0/7) {
		t.Fatalf("totals: %+v", p)
	}
}

func TestKVAwareRoutesToThePrefixHolder(t *testing.T) {
	cfg := testConfig()
	cfg.Policies = []Policy{HBMRoundRobin, HBMKVAware}
	reqs := []trace.Request{
		req(0, 16, 1, 1, 2, 3, 4),
		req(1000, 20, 1, 1, 2, 3, 4, 5), // same prefix, a second later
	}
	rep := run(t, cfg, nil, reqs)
	rr, kv := rep.Policy(HBMRoundRobin), rep.Policy(HBMKVAware)
	if rr.Records[1].Worker == rr.Records[0].Worker || rr.Records[1].HBMBlocks != 0 {
		t.Fatalf("round-robin should send the follow-up elsewhere and miss: %+v", rr.Records[1])
	}
	if kv.Records[1].Worker != kv.Records[0].Worker || kv.Records[1].HBMBlocks != 4 {
		t.Fatalf("kv-aware should send the follow-up to the prefix holder: %+v", kv.Records[1])
	}
	if kv.TTFT.Mean >= rr.TTFT.Mean {
		t.Fatalf("kv-aware mean TTFT %v not below round-robin %v", kv.TTFT.Mean, rr.TTFT.Mean)
	}
}

func TestKVAwareWeighsLoad(t *testing.T) {
	cfg := testConfig()
	cfg.Policies = []Policy{HBMKVAware}
	// Worker 0 holds a one-block prefix but is busy for 10 s with a long
	// request: recomputing one block on the idle worker is cheaper.
	long := make([]uint64, 250)
	for i := range long {
		long[i] = uint64(1000 + i)
	}
	reqs := []trace.Request{
		req(0, 4, 1, 7),
		req(100, 1000, 1, long...),
		req(200, 8, 1, 7, 8),
	}
	rep := run(t, cfg, nil, reqs)
	recs := rep.Policies[0].Records
	// Both idle and neither holding the long prompt: the tie goes to the
	// first worker, which holds the short prefix too.
	if recs[1].Worker != recs[0].Worker || recs[2].Worker == recs[0].Worker {
		t.Fatalf("workers %d, %d, %d: the follow-up went to the busy prefix holder", recs[0].Worker, recs[1].Worker, recs[2].Worker)
	}
	if recs[2].Queue > 0 {
		t.Fatalf("follow-up waited %v s: the router ignored load", recs[2].Queue)
	}
}

func TestSharedTierFetchesAcrossWorkers(t *testing.T) {
	cfg := testConfig()
	cfg.HBMBlocks = 0 // only the tier can hit
	cfg.Policies = []Policy{SharedTier}
	tier := blocktest.New()
	rep := run(t, cfg, tier, []trace.Request{req(0, 12, 1, 1, 2, 3), req(1000, 16, 1, 1, 2, 3, 4)})
	r := rep.Policies[0].Records[1]
	if r.TierBlocks != 3 || r.HBMBlocks != 0 || r.ComputeTokens != 4 {
		t.Fatalf("follow-up: %+v", r)
	}
	// 3 blocks of 4000 B, 400 B on the wire: 3600 B each modelled at 1 MB/s.
	if r.FetchBytes != 12000 || r.FetchWireBytes != 1200 || !near(r.FetchModeled, 3*3600/1e6) {
		t.Fatalf("fetch accounting: %+v", r)
	}
	if !near(r.TTFT, r.FetchModeled+0.04+r.PutModeled) || r.PutBytes != 4000 {
		t.Fatalf("ttft %v, put bytes %d: %+v", r.TTFT, r.PutBytes, r)
	}
	if n := tier.Len(); n != 4 {
		t.Fatalf("tier holds %d blocks, want 4", n)
	}
	// Each put names its block's parent as an engine does: none for the
	// chain's first block, the previous hash otherwise, also for block 4,
	// put alone by the follow-up after fetching 1-3.
	type parentOf struct {
		hash uint64
		has  bool
	}
	want := map[uint64]parentOf{1: {}, 2: {1, true}, 3: {2, true}, 4: {3, true}}
	for h, p := range want {
		o, _ := tier.PutOptions(block.NewKey(cfg.Namespace, h))
		if got := (parentOf{o.Parent, o.HasParent}); got != p {
			t.Errorf("block %d put with parent %+v, want %+v", h, got, p)
		}
	}
}

func TestSharedTierSeesBlocksOnlyOnceComputed(t *testing.T) {
	cfg := testConfig()
	cfg.Policies = []Policy{SharedTier}
	// Same prompt twice at once: the second starts on the other worker before
	// the first has put anything, so it cannot hit.
	rep := run(t, cfg, blocktest.New(), []trace.Request{req(0, 8, 1, 1, 2), req(0, 8, 1, 1, 2)})
	if h := rep.Policies[0].HitBlocks(); h != 0 {
		t.Fatalf("%d hits on blocks not yet computed", h)
	}
	if rep.InfiniteBlockHitRatio != 0.5 {
		t.Fatalf("bound %v, want 0.5 (it sees blocks at arrival)", rep.InfiniteBlockHitRatio)
	}
}

func TestSharedTierRejectsWrongBlock(t *testing.T) {
	cfg := testConfig()
	cfg.HBMBlocks = 0
	cfg.Policies = []Policy{SharedTier}
	tier := blocktest.New(blocktest.WithCorruptReads())
	_, err := Run(context.Background(), cfg, Deps{Tier: tier, Now: still}, []trace.Request{req(0, 8, 1, 1, 2), req(1000, 8, 1, 1, 2)})
	if !errors.Is(err, ErrWrongBlock) {
		t.Fatalf("err = %v, want ErrWrongBlock", err)
	}
}

func TestSharedTierEvictedBlockIsRecomputed(t *testing.T) {
	cfg := testConfig()
	cfg.HBMBlocks = 0
	cfg.Policies = []Policy{SharedTier}
	tier := blocktest.New(blocktest.WithCapacity(2)) // holds two blocks: the first request's head is evicted
	rep := run(t, cfg, tier, []trace.Request{req(0, 12, 1, 1, 2, 3), req(1000, 12, 1, 1, 2, 3)})
	if r := rep.Policies[0].Records[1]; r.TierBlocks != 0 || r.ComputeTokens != 12 {
		t.Fatalf("evicted head still hit: %+v", r)
	}
}

func TestRunIsDeterministic(t *testing.T) {
	reqs := synthetic(300, 11)
	cfg := testConfig()
	cfg.HBMBlocks = 20
	a := run(t, cfg, blocktest.New(), reqs)
	b := run(t, cfg, blocktest.New(), reqs)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Fatal("two runs of the same trace differ")
	}
}

// synthetic makes n requests of multi-turn conversations: each turn repeats
// its conversation's previous prompt and adds blocks.
func synthetic(n int, seed uint64) []trace.Request {
	x := seed | 1
	rnd := func(k int) int {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return int(x % uint64(k))
	}
	var convs [][]uint64
	next := uint64(1)
	var out []trace.Request
	for i := range n {
		var ids []uint64
		if len(convs) > 0 && rnd(3) > 0 {
			c := rnd(len(convs))
			ids = append([]uint64(nil), convs[c]...)
			for range 1 + rnd(3) {
				ids = append(ids, next)
				next++
			}
			convs[c] = ids
		} else {
			ids = []uint64{0} // a shared system prompt
			for range 2 + rnd(4) {
				ids = append(ids, next)
				next++
			}
			convs = append(convs, ids)
		}
		out = append(out, req(int64(i)*200, len(ids)*4-rnd(3), 1+rnd(20), ids...))
	}
	return out
}

func TestSharedTierReachesTheBound(t *testing.T) {
	reqs := synthetic(400, 3)
	cfg := testConfig()
	cfg.HBMBlocks = 8
	rep := run(t, cfg, blocktest.New(), reqs)
	tierRes, nc := rep.Policy(SharedTier), rep.Policy(NoCache)
	if tierRes.BlockHitRatio < 0.95*rep.InfiniteBlockHitRatio {
		t.Fatalf("shared tier %.4f below 95%% of the bound %.4f", tierRes.BlockHitRatio, rep.InfiniteBlockHitRatio)
	}
	if tierRes.BlockHitRatio > rep.InfiniteBlockHitRatio+1e-12 {
		t.Fatalf("shared tier %.4f above the bound %.4f", tierRes.BlockHitRatio, rep.InfiniteBlockHitRatio)
	}
	if hbm := rep.Policy(HBMKVAware); hbm.BlockHitRatio >= tierRes.BlockHitRatio {
		t.Fatalf("HBM-only %.4f not below the shared tier %.4f with 8-block HBM", hbm.BlockHitRatio, tierRes.BlockHitRatio)
	}
	if tierRes.TTFTReduction == nil || tierRes.TTFTReduction.Mean <= 0 || tierRes.TTFT.Mean >= nc.TTFT.Mean {
		t.Fatalf("no TTFT reduction: tier %+v no-cache %+v", tierRes.TTFT, nc.TTFT)
	}
}

// tracePath finds a shared trace beside the repository, or skips (fails when strict).
func tracePath(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join("..", "..", "..", "shared", "traces", name)
	return testdep.Path(t, p, "shared trace "+name, "the shared traces live in ../shared/traces beside the repository")
}

func TestSharedTierReachesTheBoundOnRealTrace(t *testing.T) {
	for _, name := range []string{"conversation_trace.jsonl", "synthetic_trace.jsonl"} {
		t.Run(name, func(t *testing.T) {
			reqs, err := trace.ReadFile(tracePath(t, name))
			if err != nil {
				t.Fatal(err)
			}
			reqs = Slice(reqs, 700, 0)
			cfg := DefaultConfig()
			cfg.BytesScale = 1 << 16 // the fake tier copies bytes; keep them few
			cfg.KeepRecords = false
			rep := run(t, cfg, blocktest.New(), reqs)
			tr := rep.Policy(SharedTier)
			t.Logf("bound %.4f; shared tier %.4f; hbm-kv %.4f; hbm-rr %.4f; TTFT mean reduction %.1f%%",
				rep.InfiniteBlockHitRatio, tr.BlockHitRatio, rep.Policy(HBMKVAware).BlockHitRatio,
				rep.Policy(HBMRoundRobin).BlockHitRatio, 100*tr.TTFTReduction.Mean)
			if tr.BlockHitRatio < 0.95*rep.InfiniteBlockHitRatio {
				t.Fatalf("shared tier %.4f below 95%% of the bound %.4f", tr.BlockHitRatio, rep.InfiniteBlockHitRatio)
			}
			if tr.TTFTReduction.Mean <= 0 {
				t.Fatalf("no TTFT reduction against no cache: %+v", tr.TTFTReduction)
			}
		})
	}
}

func TestSliceAndValidate(t *testing.T) {
	reqs := []trace.Request{req(100, 1, 1, 1), req(600, 1, 1, 2), req(1200, 1, 1, 3)}
	if got := Slice(reqs, 0, time.Second); len(got) != 2 {
		t.Fatalf("1 s window kept %d", len(got))
	}
	if got := Slice(reqs, 1, 0); len(got) != 1 {
		t.Fatalf("max 1 kept %d", len(got))
	}
	if got := Slice(reqs, 0, 0); !reflect.DeepEqual(got, reqs) {
		t.Fatal("no limit changed the trace")
	}
	for name, mut := range map[string]func(*Config){
		"namespace":  func(c *Config) { c.Namespace = "Bad Name" },
		"scale":      func(c *Config) { c.BytesScale = 0 },
		"workers":    func(c *Config) { c.PrefillWorkers = 0 },
		"rate":       func(c *Config) { c.Prefill.TokensPerSec = math.Inf(1) },
		"speed":      func(c *Config) { c.Speed = -1 },
		"policy":     func(c *Config) { c.Policies = []Policy{"lru"} },
		"duplicate":  func(c *Config) { c.Policies = []Policy{NoCache, NoCache} },
		"no policy":  func(c *Config) { c.Policies = nil },
		"hbm":        func(c *Config) { c.HBMBlocks = -1 },
		"decode mem": func(c *Config) { c.DecodeKVTokens = 0 },
		"pass":       func(c *Config) { c.Prefill.PassSeconds = -1 },
		"layers":     func(c *Config) { c.Prefill.Layers = 0 },
		"dim":        func(c *Config) { c.Prefill.Dim = -1 },
		"params":     func(c *Config) { c.Prefill.Params = math.NaN() },
		"ref":        func(c *Config) { c.Prefill.RefTokens = 0 },
	} {
		c := DefaultConfig()
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: bad config accepted", name)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := ParsePolicies("no-cache,bogus"); err == nil {
		t.Fatal("bogus policy parsed")
	}
	if ps, err := ParsePolicies("shared-tier, no-cache"); err != nil || !reflect.DeepEqual(ps, []Policy{SharedTier, NoCache}) {
		t.Fatalf("ParsePolicies = %v, %v", ps, err)
	}
}

func TestRunRejectsUnsortedTraceAndMissingTier(t *testing.T) {
	cfg := testConfig()
	cfg.Policies = []Policy{NoCache}
	if _, err := Run(context.Background(), cfg, Deps{}, []trace.Request{req(5, 1, 1, 1), req(1, 1, 1, 2)}); err == nil {
		t.Fatal("unsorted trace accepted")
	}
	cfg.Policies = []Policy{SharedTier}
	if _, err := Run(context.Background(), cfg, Deps{}, []trace.Request{req(0, 1, 1, 1)}); err == nil {
		t.Fatal("shared tier without a client accepted")
	}
}

func TestPacingFollowsSpeed(t *testing.T) {
	cfg := testConfig()
	cfg.Policies = []Policy{NoCache}
	cfg.Speed = 10
	var slept time.Duration
	now := time.Unix(0, 0)
	deps := Deps{
		Now:   func() time.Time { return now },
		Sleep: func(_ context.Context, d time.Duration) error { slept += d; now = now.Add(d); return nil },
	}
	if _, err := Run(context.Background(), cfg, deps, []trace.Request{req(0, 4, 1, 1), req(5000, 4, 1, 2)}); err != nil {
		t.Fatal(err)
	}
	// The last event is the second request's free at 5.04 s: 0.504 s at 10x.
	if slept < 500*time.Millisecond || slept > 510*time.Millisecond {
		t.Fatalf("slept %v, want about 504ms", slept)
	}
}

func TestBatchesRespectItemAndByteBounds(t *testing.T) {
	cfg := testConfig()
	cfg.MaxBatch = 3
	cfg.MaxBatchBytes = 1000
	tio := &tierIO{cfg: cfg}
	sizes := []int64{400, 400, 400, 100, 100, 100, 100, 2000, 10}
	var got [][2]int
	for lo, hi := 0, 0; lo < len(sizes); lo = hi {
		hi = tio.batchEnd(lo, sizes)
		got = append(got, [2]int{lo, hi})
	}
	want := [][2]int{{0, 2}, {2, 5}, {5, 7}, {7, 8}, {8, 9}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("batches %v, want %v", got, want)
	}
}

func TestPutOverlapHidesTransferBehindCompute(t *testing.T) {
	cfg := testConfig()
	cfg.Policies = []Policy{SharedTier}
	cfg.TierBytesPerSec = 1e5 // a 4000 B block: 36 ms modelled against 40 ms compute
	reqs := []trace.Request{req(0, 8, 1, 1, 2)}
	sync := run(t, cfg, blocktest.New(), reqs).Policies[0].Records[0]
	cfg.PutOverlap = true
	over := run(t, cfg, blocktest.New(), reqs).Policies[0].Records[0]
	if !near(sync.TTFT, 0.08+2*0.036) || !near(over.TTFT, 0.08) {
		t.Fatalf("ttft sync %v (want 0.152), overlapped %v (want 0.08)", sync.TTFT, over.TTFT)
	}
	cfg.TierBytesPerSec = 2e4 // 180 ms per block: the transfer outlasts the compute
	over = run(t, cfg, blocktest.New(), reqs).Policies[0].Records[0]
	if !near(over.TTFT, 2*0.18) {
		t.Fatalf("ttft overlapped %v, want 0.36", over.TTFT)
	}
}

func TestCDFPoints(t *testing.T) {
	if got := CDFPoints([]float64{3}, 100); !reflect.DeepEqual(got, [][2]float64{{3, 1}}) {
		t.Fatalf("one sample: %v", got)
	}
	got := CDFPoints([]float64{4, 1, 3, 2}, 100)
	want := [][2]float64{{1, 0.25}, {2, 0.5}, {3, 0.75}, {4, 1}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("CDF %v, want %v", got, want)
	}
	if len(CDFPoints(make([]float64, 1000), 10)) != 10 || CDFPoints(nil, 10) != nil {
		t.Fatal("CDF point count wrong")
	}
}

func TestPrefillPassCostIsPaidOncePerRequest(t *testing.T) {
	cfg := testConfig()
	cfg.PrefillWorkers = 1
	cfg.Prefill.PassSeconds = 0.005
	cfg.Policies = []Policy{HBMRoundRobin}
	rep := run(t, cfg, nil, []trace.Request{req(0, 8, 1, 1, 2), req(1000, 8, 1, 1, 2)})
	recs := rep.Policies[0].Records
	if !near(recs[0].Compute, 0.085) || !near(recs[1].Compute, 0.005) || recs[1].HBMBlocks != 2 {
		t.Fatalf("compute %v and %v, want 0.085 and 0.005 (a whole-prompt hit still runs one pass)", recs[0].Compute, recs[1].Compute)
	}
}

// Two runs with different salts never share a block hash over a trace's
// ids (plain XOR of salts 7 and 11 mapped ids h and h^12 to one hash), and
// salt 0 keeps the trace's ids.
func TestSaltMaskSeparatesRuns(t *testing.T) {
	for _, tc := range []struct{ a, b uint64 }{{7, 11}, {1, 2}, {1, 3}, {0, 1}, {0x10, 0x11}} {
		seen := map[uint64]bool{}
		for h := range uint64(1 << 14) {
			seen[h^SaltMask(tc.a)] = true
		}
		for h := range uint64(1 << 14) {
			if seen[h^SaltMask(tc.b)] {
				t.Fatalf("salts %d and %d: id %d of the second run has a hash of the first", tc.a, tc.b, h)
			}
		}
	}
	if SaltMask(0) != 0 {
		t.Fatal("salt 0 must keep the trace's ids")
	}
}
