package router

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/prefill"
)

// testCost: 100 tokens/block at 1000 tok/s = 0.1 s per recomputed block;
// 1 MB blocks: tier 100 MB/s = 0.01 s, host 1 GB/s = 0.001 s, disk 20 MB/s =
// 0.05 s per block; a running decode block costs 0.002 s.
var testCost = CostConfig{
	Prefill:            prefill.Config{TokensPerSec: 1000},
	BlockBytes:         1e6,
	FetchBytesPerSec:   100e6,
	HostBytesPerSec:    1e9,
	DiskBytesPerSec:    20e6,
	DecodeBlockSeconds: 0.002,
}

// attCost has the attention term on a model small enough to price by hand
// (ctxstore/prefill's tests derive it): 2 layers of width 5, 50 parameters,
// 3 tokens/s on a 10-token prompt, so 900 FLOP/s; with 2-token blocks,
// recomputing block j after the blocks before it costs 2 x 100 + 40 x 2 x
// (2j + 1) = 280 + 160j FLOPs: 0.311, 0.489, 0.667, 0.844, 1.022, 1.200,
// 1.378 s for j = 0..6. 1 MB blocks: the tier (1.6 MB/s) 0.625 s, host
// 0.1 s, disk 0.5 s per block.
var attCost = CostConfig{
	Prefill:          prefill.Config{TokensPerSec: 3, Attention: true, Layers: 2, Dim: 5, Params: 50, RefTokens: 10},
	BlockBytes:       1e6,
	FetchBytesPerSec: 1.6e6,
	HostBytesPerSec:  1e7,
	DiskBytesPerSec:  2e6,
}

// attBlock is attCost's recompute cost of blocks j to k-1 (2-token blocks).
func attBlock(j, k int) float64 {
	var s float64
	for ; j < k; j++ {
		s += (280 + 160*float64(j)) / 900
	}
	return s
}

func TestPrice(t *testing.T) {
	tests := []struct {
		name string
		cfg  CostConfig
		in   CostInput
		want Cost
	}{
		{"nothing cached", testCost, CostInput{Blocks: 10, BlockTokens: 100},
			Cost{Seconds: 1.0, RecomputeSec: 1.0, RecomputeBlocks: 10}},
		{"all on device", testCost, CostInput{Blocks: 10, BlockTokens: 100, Depth: [NumMedia]int{10, 10, 10}},
			Cost{CachedBlocks: 10}},
		{"device then host then disk", testCost,
			CostInput{Blocks: 10, BlockTokens: 100, Depth: [NumMedia]int{4, 6, 8}},
			Cost{Seconds: 2*0.001 + 2*0.05 + 2*0.1, LoadSec: 2*0.001 + 2*0.05, RecomputeSec: 0.2,
				CachedBlocks: 4, LocalBlocks: 4, RecomputeBlocks: 2}},
		{"tier beyond local", testCost,
			CostInput{Blocks: 10, BlockTokens: 100, Depth: [NumMedia]int{2, 2, 2}, Tier: 7},
			Cost{Seconds: 5*0.01 + 3*0.1, FetchSec: 0.05, RecomputeSec: 0.3,
				CachedBlocks: 2, FetchBlocks: 5, RecomputeBlocks: 3}},
		{"tier shorter than local", testCost,
			CostInput{Blocks: 10, BlockTokens: 100, Depth: [NumMedia]int{5, 5, 5}, Tier: 3},
			Cost{Seconds: 0.5, RecomputeSec: 0.5, CachedBlocks: 5, RecomputeBlocks: 5}},
		{"disk block also in tier is fetched (cheaper)", testCost,
			CostInput{Blocks: 4, BlockTokens: 100, Depth: [NumMedia]int{0, 0, 4}, Tier: 2},
			Cost{Seconds: 2*0.01 + 2*0.05, LoadSec: 2*0.01 + 2*0.05, LocalBlocks: 4}},
		{"slow tier: recompute instead of fetch", CostConfig{Prefill: prefill.Config{TokensPerSec: 1000}, BlockBytes: 1e6,
			FetchBytesPerSec: 1e6, HostBytesPerSec: 1e9, DiskBytesPerSec: 1e9},
			CostInput{Blocks: 3, BlockTokens: 100, Tier: 3},
			Cost{Seconds: 0.3, RecomputeSec: 0.3, RecomputeBlocks: 3}},
		{"measured bandwidth overrides configured", testCost,
			CostInput{Blocks: 2, BlockTokens: 100, Tier: 2, FetchBps: 1e9},
			Cost{Seconds: 2 * 0.001, FetchSec: 0.002, FetchBlocks: 2}},
		{"load adds queueing", testCost,
			CostInput{Blocks: 1, BlockTokens: 100, Depth: [NumMedia]int{1, 1, 1}, Load: Load{PrefillBlocks: 3, DecodeBlocks: 50}},
			Cost{Seconds: 0.3 + 0.1, QueueSec: 0.4, CachedBlocks: 1}},
		{"stale worker's cache is not credited", testCost,
			CostInput{Blocks: 2, BlockTokens: 100, Depth: [NumMedia]int{2, 2, 2}, Stale: true},
			Cost{Seconds: 0.2, RecomputeSec: 0.2, RecomputeBlocks: 2}},
		{"stale trusted when configured", func() CostConfig { c := testCost; c.TrustStale = true; return c }(),
			CostInput{Blocks: 2, BlockTokens: 100, Depth: [NumMedia]int{2, 2, 2}, Stale: true},
			Cost{CachedBlocks: 2}},
		{"depths clamped to blocks and made cumulative", testCost,
			CostInput{Blocks: 2, BlockTokens: 100, Depth: [NumMedia]int{5, 1, 0}, Tier: 9},
			Cost{CachedBlocks: 2}},
		// Attention: blocks 0 and 1 cost less to recompute than to fetch
		// (0.311, 0.489 < 0.625), blocks 2-4 more, so the tier serves 2-4
		// and 5-6 are recomputed after them.
		{"attention: the tier's deep blocks fetched, its head recomputed", attCost,
			CostInput{Blocks: 7, BlockTokens: 2, Tier: 5},
			Cost{Seconds: attBlock(0, 2) + 3*0.625 + attBlock(5, 7), RecomputeSec: attBlock(0, 2) + attBlock(5, 7),
				FetchSec: 3 * 0.625, RecomputeBlocks: 4, FetchBlocks: 3}},
		{"attention: a tier shallower than the split is all recomputed", attCost,
			CostInput{Blocks: 3, BlockTokens: 2, Tier: 2},
			Cost{Seconds: attBlock(0, 3), RecomputeSec: attBlock(0, 3), RecomputeBlocks: 3}},
		// Disk blocks: 0 and 1 are cheaper to recompute than to load
		// (0.5 s), 2 is loaded; the host block 3 loads at 0.1 s.
		{"attention: local blocks take the cheaper of load and recompute", attCost,
			CostInput{Blocks: 4, BlockTokens: 2, Depth: [NumMedia]int{0, 0, 3}},
			Cost{Seconds: attBlock(0, 2) + 0.5 + attBlock(3, 4), LoadSec: attBlock(0, 2) + 0.5,
				RecomputeSec: attBlock(3, 4), LocalBlocks: 3, RecomputeBlocks: 1}},
		{"attention: device prefix moves the rest deeper", attCost,
			CostInput{Blocks: 4, BlockTokens: 2, Depth: [NumMedia]int{2, 3, 3}},
			Cost{Seconds: 0.1 + attBlock(3, 4), LoadSec: 0.1, RecomputeSec: attBlock(3, 4),
				CachedBlocks: 2, LocalBlocks: 1, RecomputeBlocks: 1}},
		{"attention: queued blocks at the calibrated rate", attCost,
			CostInput{Blocks: 1, BlockTokens: 2, Depth: [NumMedia]int{1, 1, 1}, Load: Load{PrefillBlocks: 3}},
			Cost{Seconds: 3 * 2 / 3.0, QueueSec: 3 * 2 / 3.0, CachedBlocks: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.cfg.Price(tc.in)
			if !costEq(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func costEq(a, b Cost) bool {
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	return near(a.Seconds, b.Seconds) && near(a.RecomputeSec, b.RecomputeSec) && near(a.LoadSec, b.LoadSec) &&
		near(a.FetchSec, b.FetchSec) && near(a.QueueSec, b.QueueSec) && a.CachedBlocks == b.CachedBlocks &&
		a.LocalBlocks == b.LocalBlocks && a.FetchBlocks == b.FetchBlocks && a.RecomputeBlocks == b.RecomputeBlocks
}

func TestChoose(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	tests := []struct {
		name  string
		costs []float64
		temp  float64
		want  int
	}{
		{"empty", nil, 0, -1},
		{"argmin", []float64{3, 1, 2}, 0, 1},
		{"tie takes first", []float64{2, 1, 1}, 0, 1},
		{"all equal with temperature", []float64{1, 1, 1}, 1, 0},
	}
	for _, tc := range tests {
		if got := Choose(tc.costs, tc.temp, rng); got != tc.want {
			t.Errorf("%s: got %d want %d", tc.name, got, tc.want)
		}
	}
	// With a temperature, cheaper is likelier but not certain.
	costs := []float64{1, 2, 3}
	counts := make([]int, 3)
	for range 3000 {
		counts[Choose(costs, 0.5, rng)]++
	}
	if !(counts[0] > counts[1] && counts[1] > counts[2] && counts[2] > 0) {
		t.Fatalf("softmax counts %v", counts)
	}
	// The expected shares are exp(-x/T) over normalised costs 0, .5, 1.
	z := 1 + math.Exp(-1) + math.Exp(-2)
	if share := float64(counts[0]) / 3000; math.Abs(share-1/z) > 0.05 {
		t.Fatalf("cheapest share %.3f, want ~%.3f", share, 1/z)
	}
}

func TestCostConfigValidate(t *testing.T) {
	if err := DefaultCostConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := DefaultCostConfig()
	bad.Prefill.TokensPerSec = 0
	if bad.Validate() == nil {
		t.Fatal("zero prefill rate accepted")
	}
	bad = DefaultCostConfig()
	bad.Prefill.Layers = 0
	if !errors.Is(bad.Validate(), block.ErrInvalidArgument) {
		t.Fatal("attention term without a model shape accepted")
	}
	bad = DefaultCostConfig()
	bad.DecodeBlockSeconds = -1
	if bad.Validate() == nil {
		t.Fatal("negative decode cost accepted")
	}
}

// BenchmarkPrice prices a 2,000-block request (32k tokens of 16) with a
// device prefix, host and disk blocks and a deeper tier prefix, under the
// linear prefill model (the baseline) and the attention model, alternating
// batches of 1,000 prices in the same run, and reports the attention
// model's time per price as a ratio of the linear one's.
func BenchmarkPrice(b *testing.B) {
	in := CostInput{Blocks: 2000, BlockTokens: 16, Depth: [NumMedia]int{100, 300, 600}, Tier: 1500}
	linear := DefaultCostConfig()
	linear.Prefill.Attention = false
	att := DefaultCostConfig()
	const batch = 1000
	var sink float64
	var tl, ta time.Duration
	for range b.N {
		start := time.Now()
		for range batch {
			sink += linear.Price(in).Seconds
		}
		tl += time.Since(start)
		start = time.Now()
		for range batch {
			sink += att.Price(in).Seconds
		}
		ta += time.Since(start)
	}
	n := float64(b.N * batch)
	b.ReportMetric(float64(tl.Nanoseconds())/n, "linear-ns/price")
	b.ReportMetric(float64(ta.Nanoseconds())/n, "attention-ns/price")
	b.ReportMetric(float64(ta)/float64(tl), "attention/linear")
	if sink == 0 {
		b.Fatal("no cost computed")
	}
}
