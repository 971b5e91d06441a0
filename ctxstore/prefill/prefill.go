// Package prefill is the cost model of an engine's prefill: the seconds a
// worker takes to compute n new tokens after a cached prefix of p tokens.
// The router (ctxstore/router) prices recompute against fetch with it, and
// the replay (sim/replay) charges its simulated workers with it, so both
// use one formula:
//
//	seconds(p, n) = PassSeconds + (2·Params·n + 4·Layers·Dim·n·(p + n/2)) / F
//
// The first term of the numerator is the linear part (two FLOPs per
// parameter per token), the second the attention scores and weighted
// values: new token i attends to p+i+1 positions, 2·Dim FLOPs each for
// QKᵀ and again for V, in every layer, summed in continuous form. F, the
// effective compute rate, is calibrated so that a prompt of RefTokens
// tokens from an empty cache runs at TokensPerSec. Without Attention the
// cost is PassSeconds + n / TokensPerSec. docs/replay.md derives the
// formula and cites the defaults' sources.
package prefill

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrConfig reports an unusable configuration.
var ErrConfig = errors.New("prefill: invalid configuration")

// Config is a model and worker shape.
type Config struct {
	// TokensPerSec is a worker's prefill throughput on a prompt of RefTokens
	// tokens computed from an empty cache. Without Attention it is the rate
	// of every computed token.
	TokensPerSec float64
	// PassSeconds is the fixed cost of one prefill forward pass (the weights
	// are read once whatever the token count).
	PassSeconds float64
	// Attention adds the attention term, so a token computed after a long
	// prefix costs more than one after a short prefix.
	Attention bool
	// Layers, Dim and Params are the model's shape: layers, attention width
	// (query heads x head dim) and non-embedding parameter count. Used only
	// with Attention.
	Layers int
	Dim    int
	Params float64
	// RefTokens is the prompt length at which the model runs at
	// TokensPerSec. Used only with Attention.
	RefTokens int
}

// DefaultConfig is Llama-3.1-8B (32 layers, width 4096, 8.0e9 parameters)
// on an H100-class worker: 25k tokens/s on a 12,000-token prompt with the
// attention term on, plus 5 ms per pass (docs/replay.md gives the sources).
func DefaultConfig() Config {
	return Config{
		TokensPerSec: 25_000,
		PassSeconds:  0.005,
		Attention:    true,
		Layers:       32,
		Dim:          4096,
		Params:       8.0e9,
		RefTokens:    12_000,
	}
}

// Validate reports whether c is usable; errors wrap ErrConfig.
func (c Config) Validate() error {
	posf := func(v float64) bool { return v > 0 && !math.IsInf(v, 0) }
	switch {
	case !posf(c.TokensPerSec):
		return fmt.Errorf("%w: tokens per second %v must be positive and finite", ErrConfig, c.TokensPerSec)
	case c.PassSeconds < 0 || math.IsNaN(c.PassSeconds) || math.IsInf(c.PassSeconds, 0):
		return fmt.Errorf("%w: pass seconds %v must not be negative", ErrConfig, c.PassSeconds)
	case c.Attention && (c.Layers < 1 || c.Dim < 1):
		return fmt.Errorf("%w: model layers %d and dim %d must be positive", ErrConfig, c.Layers, c.Dim)
	case c.Attention && !posf(c.Params):
		return fmt.Errorf("%w: model params %v must be positive and finite", ErrConfig, c.Params)
	case c.Attention && c.RefTokens < 1:
		return fmt.Errorf("%w: attention reference tokens %d must be positive", ErrConfig, c.RefTokens)
	}
	return nil
}

// AttentionFLOPs is the attention score and value FLOPs of n new tokens
// after a cached prefix of p tokens: 4 x layers x dim x n x (p + n/2).
func AttentionFLOPs(layers, dim, p, n int) float64 {
	fn := float64(n)
	return 4 * float64(layers) * float64(dim) * fn * (float64(p) + fn/2)
}

// FLOPsPerSec is the effective compute rate with the attention term: the
// rate at which a RefTokens prompt from an empty cache, 2 x Params FLOPs
// per token plus its attention, runs at TokensPerSec.
func (c Config) FLOPsPerSec() float64 {
	ref := float64(c.RefTokens)
	return c.TokensPerSec * (2*c.Params + AttentionFLOPs(c.Layers, c.Dim, 0, c.RefTokens)/ref)
}

// ComputeSeconds is the compute time of n new tokens after a cached prefix
// of p tokens, without the pass's fixed cost. It is additive: computing n
// tokens in pieces, each after the ones before it, costs the same as at
// once, so per-block costs sum to the request's.
func (c Config) ComputeSeconds(p, n int) float64 {
	if n <= 0 {
		return 0
	}
	p = max(p, 0)
	if !c.Attention {
		return float64(n) / c.TokensPerSec
	}
	flops := 2*c.Params*float64(n) + AttentionFLOPs(c.Layers, c.Dim, p, n)
	return flops / c.FLOPsPerSec()
}

// Seconds is the time of a prefill pass computing n tokens after a cached
// prefix of p tokens: PassSeconds plus ComputeSeconds(p, n).
func (c Config) Seconds(p, n int) float64 { return c.PassSeconds + c.ComputeSeconds(p, n) }

// Split returns how many leading blocks of the blocks a (inclusive) to b
// (exclusive), of blockTokens tokens each, are cheaper to recompute than
// alt seconds a block, recomputing block j after the blocks before it
// (ComputeSeconds(j·blockTokens, blockTokens)). A block's recompute cost
// never falls with its position, so the blocks worth recomputing are a
// leading run; the rest take alt. O(1).
func (c Config) Split(a, b, blockTokens int, alt float64) int {
	a = max(a, 0)
	if b <= a {
		return 0
	}
	bt := max(blockTokens, 1)
	at := func(j int) float64 { return c.ComputeSeconds(j*bt, bt) }
	switch {
	case at(b-1) < alt:
		return b - a
	case !c.Attention || at(a) >= alt:
		return 0
	}
	// at(j) = u + v·j with v > 0: the first j with at(j) >= alt.
	u, v := at(0), at(1)-at(0)
	k := min(max(a, int(math.Ceil((alt-u)/v))), b)
	for k > a && at(k-1) >= alt { // rounding
		k--
	}
	for k < b && at(k) < alt {
		k++
	}
	return k - a
}

// BlockSeconds sums, over the blocks a (inclusive) to b (exclusive), the
// cheaper of alt and recomputing the block (see Split).
func (c Config) BlockSeconds(a, b, blockTokens int, alt float64) float64 {
	a = max(a, 0)
	if b <= a {
		return 0
	}
	bt := max(blockTokens, 1)
	k := c.Split(a, b, bt, alt)
	return c.ComputeSeconds(a*bt, k*bt) + float64(b-a-k)*alt
}

// Parse reads a model from a comma-separated list of key=value settings
// over DefaultConfig, as ctxd's --route-model takes it: tokens_per_sec,
// pass_seconds, attention (true or false), layers, dim, params,
// ref_tokens. The empty string is DefaultConfig. The result is validated;
// errors wrap ErrConfig and name the setting.
func Parse(spec string) (Config, error) {
	c := DefaultConfig()
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return c, nil
	}
	for _, kv := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			return Config{}, fmt.Errorf("%w: %q is not key=value", ErrConfig, kv)
		}
		var err error
		switch k {
		case "tokens_per_sec":
			c.TokensPerSec, err = strconv.ParseFloat(v, 64)
		case "pass_seconds":
			c.PassSeconds, err = strconv.ParseFloat(v, 64)
		case "attention":
			c.Attention, err = strconv.ParseBool(v)
		case "layers":
			c.Layers, err = strconv.Atoi(v)
		case "dim":
			c.Dim, err = strconv.Atoi(v)
		case "params":
			c.Params, err = strconv.ParseFloat(v, 64)
		case "ref_tokens":
			c.RefTokens, err = strconv.Atoi(v)
		default:
			return Config{}, fmt.Errorf("%w: unknown setting %q (want tokens_per_sec, pass_seconds, attention, layers, dim, params or ref_tokens)", ErrConfig, k)
		}
		if err != nil {
			return Config{}, fmt.Errorf("%w: %s=%q: %w", ErrConfig, k, v, err)
		}
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}
