package replay

import (
	"math"
	"testing"

	"github.com/ctxtier/ctxtier/sim/trace"
)

// smallModel is a model small enough to compute costs by hand: 2 layers of
// width 5 (4 x L x d = 40 attention FLOPs per token per context position),
// 50 parameters (100 linear FLOPs per token), calibrated to 3 tokens/s on a
// 10-token prompt. That prompt costs 10 x 100 + 40 x 10 x 5 = 3000 FLOPs in
// 10/3 s, so the effective rate is 900 FLOP/s.
func smallModel() Config {
	cfg := DefaultConfig()
	cfg.PrefillTokensPerSec = 3
	cfg.PrefillPassSeconds = 0.5
	cfg.Attention = true
	cfg.ModelLayers = 2
	cfg.ModelDim = 5
	cfg.ModelParams = 50
	cfg.AttentionRefTokens = 10
	return cfg
}

func TestPrefillCostByHand(t *testing.T) {
	def := DefaultConfig()
	// Llama-3.1-8B defaults: F = 25000 x (2 x 8e9 + 4 x 32 x 4096 x 6000)
	// = 4.786432e14 FLOP/s.
	const defF = 25000 * (16e9 + 4*32*4096*6000.0)
	for _, tc := range []struct {
		name string
		cfg  Config
		p, n int
		want float64
	}{
		{"empty pass", smallModel(), 0, 0, 0.5},
		{"reference length runs at the calibrated rate", smallModel(), 0, 10, 0.5 + 10.0/3},
		{"one token, no prefix", smallModel(), 0, 1, 0.5 + (100+40*0.5)/900.0},
		{"ten after ten", smallModel(), 10, 10, 0.5 + (1000+40*10*15)/900.0},
		{"one after a long prefix", smallModel(), 100, 1, 0.5 + (100+40*100.5)/900.0},
		{"term off is linear", func() Config { c := smallModel(); c.Attention = false; return c }(), 100, 1, 0.5 + 1.0/3},
		{"defaults: 12k-token reference", def, 0, 12000, 0.005 + 12000/25000.0},
		{"defaults: one block from empty", def, 0, 512, 0.005 + (512*16e9+4*32*4096*512*256.0)/defF},
		{"defaults: one block after 100k", def, 100_000, 512, 0.005 + (512*16e9+4*32*4096*512*100_256.0)/defF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			got := tc.cfg.prefillSeconds(tc.p, tc.n)
			if math.Abs(got-tc.want) > 1e-9*math.Max(1, tc.want) {
				t.Fatalf("prefillSeconds(%d, %d) = %.12g, want %.12g", tc.p, tc.n, got, tc.want)
			}
		})
	}
	// The term makes a block after a long prefix dearer than one from empty.
	if a, b := def.prefillSeconds(100_000, 512), def.prefillSeconds(0, 512); a < 2*b {
		t.Fatalf("a block after 100k tokens costs %v, from empty %v: want the attention term to dominate", a, b)
	}
}

// TestAttentionTermRaisesTheTierGainOnLongPrefixes replays a long prompt
// and, later, the same prompt plus one block: the shared tier serves the
// follow-up's 200-block prefix, no-cache recomputes it. With the reference
// length (100 tokens) below the prefix (800 tokens), the prefix's
// recompute costs more with the attention term than at the linear rate,
// so the tier saves more.
func TestAttentionTermRaisesTheTierGainOnLongPrefixes(t *testing.T) {
	cfg := testConfig()
	cfg.PrefillWorkers = 1
	cfg.HBMBlocks = 0 // the follow-up's prefix comes from the tier, not HBM
	cfg.Policies = []Policy{NoCache, SharedTier}
	cfg.ModelLayers, cfg.ModelDim, cfg.ModelParams, cfg.AttentionRefTokens = 1, 1, 50, 100
	long := make([]uint64, 201)
	for i := range long {
		long[i] = uint64(i + 1)
	}
	reqs := []trace.Request{req(0, 800, 1, long[:200]...), req(100_000, 804, 1, long...)}
	gain := func(attention bool) float64 {
		c := cfg
		c.Attention = attention
		rep := run(t, c, newMemTier(0), reqs)
		nc, st := rep.Policy(NoCache).Records[1], rep.Policy(SharedTier).Records[1]
		if st.TierBlocks != 200 || st.ComputeTokens != 4 || nc.ComputeTokens != 804 {
			t.Fatalf("attention %v: shared tier %+v, no cache %+v", attention, st, nc)
		}
		return nc.TTFT - st.TTFT
	}
	lin, att := gain(false), gain(true)
	// The shared tier pays the fetch of 200 blocks and the put of the new
	// one, each block's unsent 9/10 at the tier bandwidth (lookups and
	// the real calls take 0 on the still clock); the
	// difference is the compute: without the term 800 tokens at 100/s;
	// with it F = 100 x (100 + 4 x 50) = 30000 FLOP/s and the skipped
	// compute is 800 x (100 + 4 x 400) FLOPs.
	fetch := 804 * 1000 * (1 - 1.0/10) / cfg.TierBytesPerSec
	if want := 800/100.0 - fetch; math.Abs(lin-want) > 1e-9 {
		t.Fatalf("gain without the term %v, want %v", lin, want)
	}
	if want := 800*(100+4*400.0)/30000 - fetch; math.Abs(att-want) > 1e-9 {
		t.Fatalf("gain with the term %v, want %v", att, want)
	}
	if att <= lin {
		t.Fatalf("gain with the attention term %v not above without %v", att, lin)
	}
}
