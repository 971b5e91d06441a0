package replay

import (
	"math"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block/blocktest"
	"github.com/ctxtier/ctxtier/sim/trace"
)

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
	cfg.Prefill.Layers, cfg.Prefill.Dim, cfg.Prefill.Params, cfg.Prefill.RefTokens = 1, 1, 50, 100
	long := make([]uint64, 201)
	for i := range long {
		long[i] = uint64(i + 1)
	}
	reqs := []trace.Request{req(0, 800, 1, long[:200]...), req(100_000, 804, 1, long...)}
	gain := func(attention bool) float64 {
		c := cfg
		c.Prefill.Attention = attention
		rep := run(t, c, blocktest.New(), reqs)
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
