package replay

import (
	"math"
	"slices"

	"github.com/ctxtier/ctxtier/sim/trace"
)

// Record is one request under one policy. Times are seconds; Route, Lookup,
// Fetch and Put are measured real calls, FetchModeled and PutModeled the
// modelled transfer of the bytes a scaled run did not send, Compute the
// modelled prefill of the tokens not found cached, Queue the simulated wait
// for the worker. TTFT is Route + Queue + Lookup + Fetch + FetchModeled +
// Compute + Put + PutModeled (with Config.PutOverlap, only the part of
// PutModeled beyond Compute). In a concurrent run (Config.Concurrency > 1)
// the measured calls are not in the schedule, so Queue and the virtual
// times exclude them, and TTFT adds the request's own Route, Lookup, Fetch
// and Put to its modelled path; E2E includes them the same way.
type Record struct {
	ID           int     `json:"id"`
	Arrival      float64 `json:"arrival_s"`
	Worker       int     `json:"worker"`
	Decoder      int     `json:"decoder"`
	Blocks       int     `json:"blocks"`
	Tokens       int     `json:"tokens"`
	OutputTokens int     `json:"output_tokens"`
	HBMBlocks    int     `json:"hbm_blocks"`
	TierBlocks   int     `json:"tier_blocks"`
	HBMTokens    int     `json:"hbm_tokens"`
	TierTokens   int     `json:"tier_tokens"`
	// ComputeTokens are the tokens prefilled (block-rounded prompt tokens not found).
	ComputeTokens  int     `json:"compute_tokens"`
	FetchBytes     int64   `json:"fetch_bytes,omitempty"`
	FetchWireBytes int64   `json:"fetch_wire_bytes,omitempty"`
	PutBytes       int64   `json:"put_bytes,omitempty"`
	PutWireBytes   int64   `json:"put_wire_bytes,omitempty"`
	Route          float64 `json:"route_s"`
	Queue          float64 `json:"queue_s"`
	Lookup         float64 `json:"lookup_s,omitempty"`
	Fetch          float64 `json:"fetch_s,omitempty"`
	FetchModeled   float64 `json:"fetch_modeled_s,omitempty"`
	Compute        float64 `json:"compute_s"`
	Put            float64 `json:"put_s,omitempty"`
	PutModeled     float64 `json:"put_modeled_s,omitempty"`
	TTFT           float64 `json:"ttft_s"`
	Handoff        float64 `json:"handoff_s"`
	DecodeWait     float64 `json:"decode_wait_s"`
	E2E            float64 `json:"e2e_s"`
	calls          callSet // the real calls made (latency summaries)
}

// callSet marks which real calls a request made.
type callSet uint8

const (
	callLookup callSet = 1 << iota
	callFetch
	callPut
)

// Summary describes a distribution of seconds.
type Summary struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

func summarize(v []float64) Summary {
	if len(v) == 0 {
		return Summary{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	return Summary{Mean: sum / float64(len(s)), P50: quantile(s, 0.5), P90: quantile(s, 0.9), P99: quantile(s, 0.99), Max: s[len(s)-1]}
}

// quantile of sorted values, nearest rank.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// CDFPoints returns up to n points (value, fraction of requests at or below
// it) of the distribution of v.
func CDFPoints(v []float64, n int) [][2]float64 {
	if len(v) == 0 || n < 2 {
		return nil
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n = min(n, len(s))
	if n == 1 {
		return [][2]float64{{s[0], 1}}
	}
	out := make([][2]float64, 0, n)
	for k := range n {
		i := int(math.Round(float64(k) / float64(n-1) * float64(len(s)-1)))
		out = append(out, [2]float64{s[i], float64(i+1) / float64(len(s))})
	}
	return out
}

// PolicyResult is one policy's outcome.
type PolicyResult struct {
	Policy   Policy `json:"policy"`
	Requests int    `json:"requests"`
	// Blocks and tokens of all prompts, and those found cached: in the
	// worker's HBM or fetched from ctxtier.
	Blocks        int     `json:"blocks"`
	HBMHitBlocks  int     `json:"hbm_hit_blocks"`
	TierHitBlocks int     `json:"tier_hit_blocks"`
	Tokens        int64   `json:"tokens"`
	HBMHitTokens  int64   `json:"hbm_hit_tokens"`
	TierHitTokens int64   `json:"tier_hit_tokens"`
	BlockHitRatio float64 `json:"block_hit_ratio"`
	TokenHitRatio float64 `json:"token_hit_ratio"`
	// Bytes: modelled (full-size) and on the wire.
	FetchBytes     int64 `json:"fetch_bytes"`
	FetchWireBytes int64 `json:"fetch_wire_bytes"`
	PutBytes       int64 `json:"put_bytes"`
	PutWireBytes   int64 `json:"put_wire_bytes"`
	// Measured seconds of real calls, summed over requests.
	RouteSeconds  float64 `json:"route_seconds"`
	LookupSeconds float64 `json:"lookup_seconds"`
	FetchSeconds  float64 `json:"fetch_seconds"`
	PutSeconds    float64 `json:"put_seconds"`
	// LookupLatency, FetchLatency and PutLatency are the measured times of
	// the requests' lookups, fetches (all batches of one request) and puts,
	// over the requests that made them.
	LookupLatency Summary `json:"lookup_latency"`
	FetchLatency  Summary `json:"fetch_latency"`
	PutLatency    Summary `json:"put_latency"`
	// FetchMisses counts requests whose fetch found fewer blocks than the lookup promised.
	FetchMisses int `json:"fetch_misses"`
	// ComputeSeconds is the modelled prefill time, summed.
	ComputeSeconds float64 `json:"compute_seconds"`
	TTFT           Summary `json:"ttft"`
	Queue          Summary `json:"queue"`
	E2E            Summary `json:"e2e"`
	// TTFTReduction is 1 - this policy's mean (p50, p90) TTFT over the
	// no-cache policy's, when that ran.
	TTFTReduction   *Summary     `json:"ttft_reduction,omitempty"`
	TTFTCDF         [][2]float64 `json:"ttft_cdf"`
	Records         []Record     `json:"records,omitempty"`
	ttfts, qs, e2es []float64
	lookups         []float64
	fetches         []float64
	puts            []float64
}

func (r *PolicyResult) add(rec *Record) {
	r.Requests++
	r.Blocks += rec.Blocks
	r.HBMHitBlocks += rec.HBMBlocks
	r.TierHitBlocks += rec.TierBlocks
	r.Tokens += int64(rec.HBMTokens + rec.TierTokens + rec.ComputeTokens)
	r.HBMHitTokens += int64(rec.HBMTokens)
	r.TierHitTokens += int64(rec.TierTokens)
	r.FetchBytes += rec.FetchBytes
	r.FetchWireBytes += rec.FetchWireBytes
	r.PutBytes += rec.PutBytes
	r.PutWireBytes += rec.PutWireBytes
	r.RouteSeconds += rec.Route
	r.LookupSeconds += rec.Lookup
	r.FetchSeconds += rec.Fetch
	r.PutSeconds += rec.Put
	r.ComputeSeconds += rec.Compute
	r.ttfts = append(r.ttfts, rec.TTFT)
	r.qs = append(r.qs, rec.Queue)
	r.e2es = append(r.e2es, rec.E2E)
	if rec.calls&callLookup != 0 {
		r.lookups = append(r.lookups, rec.Lookup)
	}
	if rec.calls&callFetch != 0 {
		r.fetches = append(r.fetches, rec.Fetch)
	}
	if rec.calls&callPut != 0 {
		r.puts = append(r.puts, rec.Put)
	}
}

// HitBlocks is the blocks found cached anywhere.
func (r *PolicyResult) HitBlocks() int { return r.HBMHitBlocks + r.TierHitBlocks }

// TTFTs returns every request's TTFT in completion order.
func (r *PolicyResult) TTFTs() []float64 { return r.ttfts }

// Report is the outcome of a run.
type Report struct {
	Config   Config `json:"config"`
	Requests int    `json:"requests"`
	// TraceSeconds is the span of the replayed arrivals.
	TraceSeconds float64 `json:"trace_seconds"`
	// InfiniteBlockHitRatio is trace.InfiniteCacheHitRatio: the hit ratio of
	// a cache that never evicts and sees every block as soon as its request
	// arrives; InfiniteTokenHitRatio is the same in tokens.
	InfiniteBlockHitRatio float64        `json:"infinite_block_hit_ratio"`
	InfiniteTokenHitRatio float64        `json:"infinite_token_hit_ratio"`
	Policies              []PolicyResult `json:"policies"`
}

// Policy returns the result of p, or nil.
func (r *Report) Policy(p Policy) *PolicyResult {
	for i := range r.Policies {
		if r.Policies[i].Policy == p {
			return &r.Policies[i]
		}
	}
	return nil
}

func (s *sim) report(reqs []trace.Request) *Report {
	rep := &Report{Config: s.cfg, Requests: len(s.pre)}
	if n := len(s.pre); n > 0 {
		rep.TraceSeconds = s.pre[n-1].arrival
	}
	rep.InfiniteBlockHitRatio = trace.InfiniteCacheHitRatio(reqs)
	rep.InfiniteTokenHitRatio = infiniteTokenHitRatio(s.pre)
	for _, c := range s.clusters {
		r := c.res
		if r.Blocks > 0 {
			r.BlockHitRatio = float64(r.HitBlocks()) / float64(r.Blocks)
		}
		if r.Tokens > 0 {
			r.TokenHitRatio = float64(r.HBMHitTokens+r.TierHitTokens) / float64(r.Tokens)
		}
		r.TTFT, r.Queue, r.E2E = summarize(r.ttfts), summarize(r.qs), summarize(r.e2es)
		r.LookupLatency, r.FetchLatency, r.PutLatency = summarize(r.lookups), summarize(r.fetches), summarize(r.puts)
		r.TTFTCDF = CDFPoints(r.ttfts, 400)
		if s.cfg.KeepRecords {
			r.Records = c.recs
		}
		rep.Policies = append(rep.Policies, *r)
	}
	if nc := rep.Policy(NoCache); nc != nil {
		for i := range rep.Policies {
			p := &rep.Policies[i]
			p.TTFTReduction = &Summary{
				Mean: reduction(p.TTFT.Mean, nc.TTFT.Mean), P50: reduction(p.TTFT.P50, nc.TTFT.P50),
				P90: reduction(p.TTFT.P90, nc.TTFT.P90), P99: reduction(p.TTFT.P99, nc.TTFT.P99),
				Max: reduction(p.TTFT.Max, nc.TTFT.Max),
			}
		}
	}
	return rep
}

func reduction(v, base float64) float64 {
	if base <= 0 {
		return 0
	}
	return 1 - v/base
}

// infiniteTokenHitRatio is trace.InfiniteCacheHitRatio weighted by tokens.
func infiniteTokenHitRatio(pre []preq) float64 {
	seen := make(map[uint64]struct{})
	var hit, total int64
	for _, p := range pre {
		miss := false
		for j, h := range p.hashes {
			total += int64(p.tokens[j])
			if _, ok := seen[h]; ok && !miss {
				hit += int64(p.tokens[j])
			} else {
				miss = true
			}
			seen[h] = struct{}{}
		}
	}
	if total == 0 {
		return 0
	}
	return float64(hit) / float64(total)
}
