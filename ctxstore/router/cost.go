package router

import (
	"fmt"

	"github.com/ctxtier/ctxtier/ctxstore/prefill"
	"math"
	"math/rand/v2"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// CostConfig prices a request on a worker, in estimated seconds until its
// prefill is done: blocks to recompute, blocks to load from the worker's
// host memory or disk, blocks to fetch from ctxtier, and the work already
// queued on the worker. Each block not on the device takes the cheaper of
// loading it and recomputing it. Recomputing block j (0-based) costs
// Prefill.ComputeSeconds(j x block tokens, block tokens): with the
// attention term a block deep in a long prompt costs more to recompute
// than one near its head, so deep blocks are fetched where the head's are
// recomputed. The pass's fixed cost (Prefill.PassSeconds) is the same on
// every worker and is left out.
type CostConfig struct {
	// Prefill is the prefill cost model, shared with the replay
	// (sim/replay): throughput, and the model shape for the attention term.
	Prefill prefill.Config
	// BlockBytes is the KV bytes of one block (all layers), to price transfers.
	BlockBytes int64
	// FetchBytesPerSec is the initial tier-to-worker bandwidth; the router
	// replaces it with a moving average of ObserveFetch reports.
	FetchBytesPerSec float64
	// HostBytesPerSec and DiskBytesPerSec price loading blocks a worker holds
	// in host memory or on disk into its device.
	HostBytesPerSec float64
	DiskBytesPerSec float64
	// DecodeBlockSeconds is what one block of a running decode costs a new
	// request on the same worker (its share of each batched step).
	DecodeBlockSeconds float64
	// TrustStale credits a stale worker's matched blocks; by default they are
	// priced as recompute.
	TrustStale bool
}

// DefaultCostConfig describes Llama-3.1-8B on one H100-class worker:
// prefill.DefaultConfig (25k tokens/s on a 12,000-token prompt, attention
// term on), 2 MiB blocks (16 tokens of 128 KiB of KV), 10 GB/s from the
// tier, 25 GB/s host to device, 5 GB/s disk.
func DefaultCostConfig() CostConfig {
	return CostConfig{
		Prefill:            prefill.DefaultConfig(),
		BlockBytes:         2 << 20,
		FetchBytesPerSec:   10e9,
		HostBytesPerSec:    25e9,
		DiskBytesPerSec:    5e9,
		DecodeBlockSeconds: 0.0005,
	}
}

// Validate checks the configuration.
func (c CostConfig) Validate() error {
	pos := func(name string, v float64) error {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: router cost %s %v must be positive and finite", block.ErrInvalidArgument, name, v)
		}
		return nil
	}
	if err := c.Prefill.Validate(); err != nil {
		return fmt.Errorf("%w: router cost: %w", block.ErrInvalidArgument, err)
	}
	for _, e := range []error{
		pos("block_bytes", float64(c.BlockBytes)),
		pos("fetch_bytes_per_sec", c.FetchBytesPerSec),
		pos("host_bytes_per_sec", c.HostBytesPerSec),
		pos("disk_bytes_per_sec", c.DiskBytesPerSec),
	} {
		if e != nil {
			return e
		}
	}
	if c.DecodeBlockSeconds < 0 || math.IsNaN(c.DecodeBlockSeconds) {
		return fmt.Errorf("%w: router cost decode_block_seconds %v is negative", block.ErrInvalidArgument, c.DecodeBlockSeconds)
	}
	return nil
}

// CostInput is what the cost of one worker depends on.
type CostInput struct {
	Blocks      int           // blocks in the request
	BlockTokens int           // tokens per block
	Depth       [NumMedia]int // the worker's cumulative matched depths
	Stale       bool          // the worker's entries are not trusted
	Tier        int           // prefix depth ctxtier holds
	Load        Load          // reported plus router-predicted load
	FetchBps    float64       // current tier fetch bandwidth (0: configured)
}

// Price returns the cost of running a request described by in on one worker.
func (c CostConfig) Price(in CostInput) Cost {
	n := max(in.Blocks, 0)
	bt := float64(max(in.BlockTokens, 1))
	d := in.Depth
	if in.Stale && !c.TrustStale {
		d = [NumMedia]int{}
	}
	for l := range d { // clamp, keep cumulative
		d[l] = min(max(d[l], 0), n)
		if l > 0 {
			d[l] = max(d[l], d[l-1])
		}
	}
	tier := min(max(in.Tier, 0), n)
	fetchBps := in.FetchBps
	if !(fetchBps > 0) {
		fetchBps = c.FetchBytesPerSec
	}
	bb := float64(c.BlockBytes)
	bti := int(bt)
	perBlock := [NumMedia]float64{0, bb / c.HostBytesPerSec, bb / c.DiskBytesPerSec}
	fetch := bb / fetchBps

	var out Cost
	out.CachedBlocks = d[Device]
	prev := d[Device]
	for l := Host; l < NumMedia; l++ {
		k := d[l] - prev
		if k <= 0 {
			continue
		}
		// Each block takes the cheapest way in: load from the local medium,
		// fetch from the tier where the tier holds it too, or recompute.
		inTier := max(prev, min(d[l], tier))
		out.LocalBlocks += k
		out.LoadSec += c.Prefill.BlockSeconds(prev, inTier, bti, min(perBlock[l], fetch)) +
			c.Prefill.BlockSeconds(inTier, d[l], bti, perBlock[l])
		prev = d[l]
	}
	local := d[Disk]
	if tier > local {
		// The leading blocks cheaper to recompute than to fetch are
		// recomputed, the rest fetched.
		r := c.Prefill.Split(local, tier, bti, fetch)
		out.RecomputeBlocks += r
		out.RecomputeSec += c.Prefill.ComputeSeconds(local*bti, r*bti)
		out.FetchBlocks = tier - local - r
		out.FetchSec = float64(out.FetchBlocks) * fetch
	}
	from := max(local, tier)
	rest := n - from
	out.RecomputeBlocks += rest
	out.RecomputeSec += c.Prefill.ComputeSeconds(from*bti, rest*bti)
	out.QueueSec = c.queueSec(in.Load, bt/c.Prefill.TokensPerSec)
	out.Seconds = out.RecomputeSec + out.LoadSec + out.FetchSec + out.QueueSec
	return out
}

// queueSec prices a worker's queued work; recompute is seconds per block.
// Queued blocks' positions are unknown, so they are priced at the model's
// calibrated rate (Prefill.TokensPerSec).
func (c CostConfig) queueSec(l Load, recompute float64) float64 {
	return float64(max(l.PrefillBlocks, 0))*recompute + float64(max(l.DecodeBlocks, 0))*c.DecodeBlockSeconds
}

// Choose picks an index into costs: the cheapest at temperature 0 (the first
// on ties), else a softmax sample over the costs normalised to [0,1] between
// the cheapest and the dearest, p_i ∝ exp(-norm_i / temperature). It returns
// -1 for no candidates.
func Choose(costs []float64, temperature float64, rng *rand.Rand) int {
	if len(costs) == 0 {
		return -1
	}
	lo, hi, best := costs[0], costs[0], 0
	for i, c := range costs {
		if c < lo {
			lo, best = c, i
		}
		hi = max(hi, c)
	}
	if !(temperature > 0) || rng == nil || hi == lo {
		return best
	}
	span := hi - lo
	var sum float64
	for _, c := range costs {
		sum += math.Exp(-(c - lo) / span / temperature)
	}
	r := rng.Float64() * sum
	for i, c := range costs {
		r -= math.Exp(-(c - lo) / span / temperature)
		if r <= 0 {
			return i
		}
	}
	return best // rounding left r a hair above 0
}
