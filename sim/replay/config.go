package replay

import (
	"fmt"
	"github.com/ctxtier/ctxtier/ctxstore/prefill"
	"math"
	"strings"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Policy is one way of serving the trace; a run compares several.
type Policy string

const (
	// NoCache recomputes every prompt in full. It is routed by the router,
	// which sees no cached blocks and so sends each request to the worker
	// with the least queued work: the baseline isolates what caching saves
	// from what load balancing saves.
	NoCache Policy = "no-cache"
	// HBMRoundRobin gives each prefill worker its own HBM prefix cache and
	// routes round-robin.
	HBMRoundRobin Policy = "hbm-round-robin"
	// HBMKVAware gives each worker its own HBM prefix cache and routes with
	// the router fed by the workers' KV events: the worker with the cheapest
	// recompute-plus-queue cost, i.e. the longest HBM prefix weighted by load
	// (as Dynamo's KV router does).
	HBMKVAware Policy = "hbm-kv-aware"
	// SharedTier adds ctxtier as a shared tier behind the workers' HBM:
	// workers fetch the prefix ctxtier holds and put what they computed, and
	// the router weighs each worker's HBM prefix, the tier's prefix and load.
	SharedTier Policy = "shared-tier"
)

// AllPolicies lists the policies in report order.
var AllPolicies = []Policy{NoCache, HBMRoundRobin, HBMKVAware, SharedTier}

// ParsePolicies parses a comma-separated list of policy names ("all" for every one).
func ParsePolicies(s string) ([]Policy, error) {
	if s == "" || s == "all" {
		return append([]Policy(nil), AllPolicies...), nil
	}
	var out []Policy
	seen := map[Policy]bool{}
	for _, f := range strings.Split(s, ",") {
		p := Policy(strings.TrimSpace(f))
		if !p.valid() {
			return nil, fmt.Errorf("%w: unknown policy %q (want %v or all)", block.ErrInvalidArgument, p, AllPolicies)
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out, nil
}

func (p Policy) valid() bool {
	for _, q := range AllPolicies {
		if p == q {
			return true
		}
	}
	return false
}

func (p Policy) usesHBM() bool { return p != NoCache }

// Config configures a replay. Sizes and rates describe the modelled
// deployment; BytesScale only shrinks what travels to ctxtier.
type Config struct {
	// Namespace holds the shared tier's blocks; its block size must be BlockTokens.
	Namespace string
	// KeySalt makes the block hashes of a run: a trace hash id h becomes
	// h XOR SaltMask(KeySalt), so runs with different salts against the
	// same server do not see each other's blocks. 0 keeps the trace's ids.
	KeySalt uint64
	// BlockTokens is the tokens per block (the trace's: 512 for Mooncake).
	BlockTokens int
	// KVBytesPerToken is the model's KV-cache bytes per token, all layers:
	// 2 (K,V) x layers x KV heads x head dim x bytes per element. Llama-3-8B:
	// 2 x 32 x 8 x 128 x 2 (bf16) = 131072.
	KVBytesPerToken int64
	// BytesScale divides each block's bytes on the wire: a block of B bytes
	// is sent as ceil(B/BytesScale) real bytes (at least a 16-byte header),
	// while the cost model accounts all B, the unsent part at TierBytesPerSec.
	// 1 sends everything.
	BytesScale int64
	// PrefillWorkers and DecodeWorkers are the simulated workers.
	PrefillWorkers int
	DecodeWorkers  int
	// Prefill is the prefill cost model (ctxstore/prefill): throughput,
	// fixed cost per pass and, with its Attention term, the model shape.
	// The router of the routed policies prices recompute with the same
	// model (NewLocalRouter), so both use one formula.
	Prefill prefill.Config
	// HBMBlocks bounds each prefill worker's HBM prefix cache, in blocks.
	HBMBlocks int
	// TierBytesPerSec accounts the block bytes a scaled run does not send,
	// both ways (the worker's link to ctxtier).
	TierBytesPerSec float64
	// PutOverlap overlaps the modelled transfer of put blocks with the
	// prefill that produced them, as a layer-wise offload does (each layer's
	// KV is written while the next layer computes): only the part of the
	// transfer that outlasts the compute delays the first token. Off, the
	// whole put is on the critical path. The measured call counts either way.
	PutOverlap bool
	// HandoffBytesPerSec is the prefill-to-decode KV transfer rate.
	HandoffBytesPerSec float64
	// DecodeSecondsPerToken is the time per output token of a decoding request.
	DecodeSecondsPerToken float64
	// DecodeKVTokens bounds the tokens (prompt + output) a decode worker holds.
	DecodeKVTokens int
	// Speed paces the replay against the wall clock: 1 is real time, 10 ten
	// times faster; 0 runs as fast as it can. Results are in virtual time
	// either way; pacing only changes how load reaches ctxd.
	Speed float64
	// Policies are the policies compared, in report order.
	Policies []Policy
	// MaxBatch and MaxBatchBytes bound the keys and wire bytes of one batch
	// get or put (ctxd's HTTP API takes 1024 items and 256 MiB by default).
	MaxBatch      int
	MaxBatchBytes int64
	// Temperature is the router's sampling temperature (0: the cheapest worker).
	Temperature float64
	// KeepRecords keeps every request's record in the result.
	KeepRecords bool
	// Concurrency is how the shared-tier policy's real calls run. 1: one
	// at a time, in event order, each call's measured duration added to
	// virtual time (the sequential mode). N > 1: concurrently, as engines
	// make them: each prefill worker calls ctxtier over its own client
	// (Deps.WorkerTiers; worker w uses lane w mod N) and puts on its own
	// goroutine, so several workers' puts and the other workers' lookups
	// and fetches are in flight at once. Virtual time then advances by
	// the modelled costs only (the measured calls are added to each
	// request's own TTFT afterwards), and the ordering rule of lanes.go
	// keeps the tier's answers those of the sequential mode with calls
	// that take no time.
	Concurrency int
	// Ordering is what a read waits for in a concurrent run (lanes.go):
	// every put in flight (OrderAll), or only the puts of its blocks
	// (OrderBlocks), which lets more calls overlap but lets a read see
	// blocks that an earlier put, still in flight, would have evicted.
	Ordering Ordering
}

// Ordering is the ordering rule of a concurrent run.
type Ordering string

const (
	// OrderAll makes every read wait for every put in flight: the tier's
	// state at a read, evictions included, follows every earlier put.
	OrderAll Ordering = "all"
	// OrderBlocks makes a read wait only for the puts in flight that carry
	// one of its blocks: the same answers as OrderAll while the tier does
	// not evict; when it evicts, evictions lag behind the puts in flight.
	OrderBlocks Ordering = "blocks"
)

// DefaultConfig describes Llama-3.1-8B (32 layers, width 4096, 8.0e9
// parameters, bf16 KV, 128 KiB/token) on H100-class workers: 25k prefill
// tokens/s on a 12,000-token prompt with the attention term on, plus 5 ms per pass, 800 blocks (50 GiB) of HBM prefix cache,
// 50 GB/s (one 400 Gb/s NIC per GPU) to ctxtier and 25 GB/s for the
// handoff, 8 ms per output token; four
// prefill and four decode workers; blocks sent at 1/1024 of their size.
func DefaultConfig() Config {
	const kvPerToken = 2 * 32 * 8 * 128 * 2
	const hbmBytes = 50 << 30
	return Config{
		Namespace:             block.DefaultNamespace,
		BlockTokens:           512,
		KVBytesPerToken:       kvPerToken,
		BytesScale:            1024,
		PrefillWorkers:        4,
		DecodeWorkers:         4,
		Prefill:               prefill.DefaultConfig(),
		HBMBlocks:             hbmBytes / (512 * kvPerToken),
		TierBytesPerSec:       50e9,
		HandoffBytesPerSec:    25e9,
		DecodeSecondsPerToken: 0.008,
		DecodeKVTokens:        hbmBytes / kvPerToken,
		Policies:              append([]Policy(nil), AllPolicies...),
		MaxBatch:              256,
		MaxBatchBytes:         64 << 20,
		KeepRecords:           true,
		Concurrency:           1,
		Ordering:              OrderAll,
	}
}

// Validate checks the configuration; errors wrap block.ErrInvalidArgument.
func (c Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: replay: %s", block.ErrInvalidArgument, fmt.Sprintf(format, a...))
	}
	posf := func(v float64) bool { return v > 0 && !math.IsInf(v, 0) }
	if err := block.ValidNamespaceName(c.Namespace); err != nil {
		return err
	}
	if err := c.Prefill.Validate(); err != nil {
		return fmt.Errorf("%w: replay: %w", block.ErrInvalidArgument, err)
	}
	switch {
	case c.BlockTokens < 1:
		return bad("block tokens %d must be positive", c.BlockTokens)
	case c.KVBytesPerToken < 1:
		return bad("KV bytes per token %d must be positive", c.KVBytesPerToken)
	case c.BytesScale < 1:
		return bad("bytes scale %d must be at least 1", c.BytesScale)
	case c.PrefillWorkers < 1 || c.DecodeWorkers < 1:
		return bad("prefill and decode workers must be at least 1")
	case c.HBMBlocks < 0:
		return bad("HBM blocks %d must not be negative", c.HBMBlocks)
	case !posf(c.TierBytesPerSec) || !posf(c.HandoffBytesPerSec):
		return bad("tier and handoff bandwidths must be positive")
	case c.DecodeSecondsPerToken < 0 || math.IsNaN(c.DecodeSecondsPerToken):
		return bad("decode seconds per token %v must not be negative", c.DecodeSecondsPerToken)
	case c.DecodeKVTokens < 1:
		return bad("decode KV tokens %d must be positive", c.DecodeKVTokens)
	case c.Speed < 0 || math.IsNaN(c.Speed) || math.IsInf(c.Speed, 0):
		return bad("speed %v must be 0 (unpaced) or positive", c.Speed)
	case len(c.Policies) == 0:
		return bad("no policy to run")
	case c.MaxBatch < 1 || c.MaxBatchBytes < 1:
		return bad("max batch %d and max batch bytes %d must be positive", c.MaxBatch, c.MaxBatchBytes)
	case c.Concurrency < 1:
		return bad("concurrency %d must be at least 1", c.Concurrency)
	case c.Ordering != OrderAll && c.Ordering != OrderBlocks:
		return bad("ordering %q: want %s or %s", c.Ordering, OrderAll, OrderBlocks)
	case c.Temperature < 0 || math.IsNaN(c.Temperature) || math.IsInf(c.Temperature, 0):
		return bad("temperature %v must not be negative", c.Temperature)
	}
	seen := map[Policy]bool{}
	for _, p := range c.Policies {
		if !p.valid() {
			return bad("unknown policy %q", p)
		}
		if seen[p] {
			return bad("policy %q listed twice", p)
		}
		seen[p] = true
	}
	return nil
}

// blockFullBytes is the modelled size of a block of tokens tokens.
func (c Config) blockFullBytes(tokens int) int64 { return int64(tokens) * c.KVBytesPerToken }

// blockWireBytes is what a block of full bytes weighs on the wire.
func (c Config) blockWireBytes(full int64) int64 {
	w := (full + c.BytesScale - 1) / c.BytesScale
	return max(w, blockHeader)
}
