package router

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TierIndex reports how many leading keys ctxtier itself holds; the
// router passes a query's read hint as opts.Retain. ctxstore.Store
// satisfies it.
type TierIndex interface {
	Lookup(ctx context.Context, keys []block.Key, opts ctxstore.ReadOptions) (int, error)
}

// Pinner pins blocks in the tier for a while (agent cache_control).
// ctxstore.Store satisfies it.
type Pinner interface {
	PinBatch(ctx context.Context, keys []block.Key, ttl time.Duration) []error
}

// Namespaces resolves a namespace's configuration (block size, hash scheme).
// ctxstore.Store satisfies it.
type Namespaces interface {
	Namespace(name string) (block.Namespace, error)
}

// HashFunc computes a namespace's chained block hashes from token ids (whole
// blocks only), as the namespace's hash scheme does.
type HashFunc func(ns block.Namespace, tokens []uint32) ([]uint64, error)

// Config configures a Router.
type Config struct {
	Index IndexConfig
	Cost  CostConfig
	// Temperature is the default sampling temperature (0: take the cheapest).
	Temperature float64
	// MaxQueryBlocks bounds the blocks of one query.
	MaxQueryBlocks int
	// MaxWorkers bounds the workers listed in a result (the cheapest first).
	MaxWorkers int
	// PendingTTL is how long load the router itself predicted for a worker
	// (requests it recommended) counts when the worker sends no load report.
	PendingTTL time.Duration
	// FetchEWMA is the weight of a new ObserveFetch sample in the bandwidth average.
	FetchEWMA float64
	// Seed seeds the sampling generator (0: random).
	Seed uint64
	// DefaultBlockTokens is the block size used when no Namespaces resolver
	// is wired or it does not know the namespace.
	DefaultBlockTokens int
}

// DefaultConfig returns the router's defaults.
func DefaultConfig() Config {
	return Config{
		Index:              DefaultIndexConfig(),
		Cost:               DefaultCostConfig(),
		MaxQueryBlocks:     1 << 16,
		MaxWorkers:         16,
		PendingTTL:         10 * time.Second,
		FetchEWMA:          0.2,
		DefaultBlockTokens: 16,
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if err := c.Index.Validate(); err != nil {
		return err
	}
	if err := c.Cost.Validate(); err != nil {
		return err
	}
	switch {
	case c.Temperature < 0 || math.IsNaN(c.Temperature) || math.IsInf(c.Temperature, 0):
		return fmt.Errorf("%w: router temperature %v", block.ErrInvalidArgument, c.Temperature)
	case c.MaxQueryBlocks <= 0:
		return fmt.Errorf("%w: router max_query_blocks must be positive", block.ErrInvalidArgument)
	case c.MaxWorkers <= 0:
		return fmt.Errorf("%w: router max_workers must be positive", block.ErrInvalidArgument)
	case c.PendingTTL < 0:
		return fmt.Errorf("%w: router pending_ttl is negative", block.ErrInvalidArgument)
	case !(c.FetchEWMA > 0 && c.FetchEWMA <= 1):
		return fmt.Errorf("%w: router fetch_ewma %v not in (0,1]", block.ErrInvalidArgument, c.FetchEWMA)
	case c.DefaultBlockTokens <= 0:
		return fmt.Errorf("%w: router default_block_tokens must be positive", block.ErrInvalidArgument)
	}
	return nil
}

// Deps are the router's optional collaborators.
type Deps struct {
	Tier       TierIndex  // ctxtier's own prefix depth; nil: 0
	Pinner     Pinner     // cache_control pins; nil: pins are refused
	Namespaces Namespaces // block size and hash scheme per namespace
	Hash       HashFunc   // token ids to hashes; nil: token-id queries are refused
	Log        *slog.Logger
}

// Router holds one Index per namespace and answers routing queries.
type Router struct {
	cfg  Config
	deps Deps
	log  *slog.Logger

	mu      sync.RWMutex
	indexes map[string]*Index

	fetchBps atomic.Uint64 // float64 bits
	rngMu    sync.Mutex
	rng      *rand.Rand
	pool     sync.Pool // *priceScratch
}

// New returns a Router.
func New(cfg Config, deps Deps) (*Router, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	r := &Router{
		cfg: cfg, deps: deps, log: deps.Log,
		indexes: map[string]*Index{},
		rng:     rand.New(rand.NewPCG(seed, seed^0x5bd1e995)),
	}
	r.pool.New = func() any { return new(priceScratch) }
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.fetchBps.Store(math.Float64bits(cfg.Cost.FetchBytesPerSec))
	return r, nil
}

// Index returns the namespace's index, creating it when create is set.
func (r *Router) Index(ns string, create bool) (*Index, error) {
	r.mu.RLock()
	idx := r.indexes[ns]
	r.mu.RUnlock()
	if idx != nil || !create {
		return idx, nil
	}
	if err := block.ValidNamespaceName(ns); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if idx = r.indexes[ns]; idx != nil {
		return idx, nil
	}
	idx, err := NewIndex(r.cfg.Index)
	if err != nil {
		return nil, err
	}
	r.indexes[ns] = idx
	return idx, nil
}

// Apply applies a worker's events to the namespace's index.
func (r *Router) Apply(ns, worker string, evs []Event) (ApplyStats, error) {
	idx, err := r.Index(ns, true)
	if err != nil {
		return ApplyStats{}, err
	}
	return idx.Apply(worker, evs)
}

// ReplaceWorker replaces a worker's entries with a full dump and clears its stale mark.
func (r *Router) ReplaceWorker(ns, worker string, dump []Event) (ApplyStats, error) {
	idx, err := r.Index(ns, true)
	if err != nil {
		return ApplyStats{}, err
	}
	return idx.ReplaceWorker(worker, dump)
}

// ClearWorker drops a worker's entries and its stale mark.
func (r *Router) ClearWorker(ns, worker string) int {
	idx, _ := r.Index(ns, false)
	if idx == nil {
		return 0
	}
	return idx.ClearWorker(worker)
}

// MarkStale marks a worker's entries untrusted until a dump or a clear.
func (r *Router) MarkStale(ns, worker string) {
	if idx, err := r.Index(ns, true); err == nil {
		idx.MarkStale(worker)
	}
}

// ReportLoad records a worker's load report, replacing what the router had
// predicted for it.
func (r *Router) ReportLoad(ns, worker string, l Load) error {
	if worker == "" {
		return fmt.Errorf("%w: empty worker name", block.ErrInvalidArgument)
	}
	if l.PrefillBlocks < 0 || l.DecodeBlocks < 0 {
		return fmt.Errorf("%w: negative load", block.ErrInvalidArgument)
	}
	idx, err := r.Index(ns, true)
	if err != nil {
		return err
	}
	w := idx.worker(worker, true)
	w.load.Store(&l)
	w.pendPrefill.Store(0)
	w.pendDecode.Store(0)
	w.pendSince.Store(0)
	return nil
}

// ObserveFetch folds a measured tier fetch (bytes in d) into the bandwidth
// the cost uses.
func (r *Router) ObserveFetch(bytes int64, d time.Duration) {
	if bytes <= 0 || d <= 0 {
		return
	}
	sample := float64(bytes) / d.Seconds()
	for {
		old := r.fetchBps.Load()
		v := math.Float64frombits(old)
		nv := v + r.cfg.FetchEWMA*(sample-v)
		if r.fetchBps.CompareAndSwap(old, math.Float64bits(nv)) {
			return
		}
	}
}

// FetchBytesPerSec is the tier fetch bandwidth the cost uses now.
func (r *Router) FetchBytesPerSec() float64 { return math.Float64frombits(r.fetchBps.Load()) }

// Route answers a routing query.
func (r *Router) Route(ctx context.Context, q Query) (Result, error) {
	if err := block.ValidNamespaceName(q.Namespace); err != nil {
		return Result{}, err
	}
	if q.Hints.Priority > block.MaxPriority {
		return Result{}, fmt.Errorf("%w: priority %d above %d", block.ErrInvalidArgument, q.Hints.Priority, block.MaxPriority)
	}
	if q.Hints.PinTTL < 0 || q.Hints.ExpectedOutputTokens < 0 {
		return Result{}, fmt.Errorf("%w: negative hint", block.ErrInvalidArgument)
	}
	if q.Hints.Retain != 0 {
		if err := block.ValidateRetain(q.Hints.Retain); err != nil {
			return Result{}, err
		}
	}
	temp := r.cfg.Temperature
	if q.Temperature != nil {
		temp = *q.Temperature
		if temp < 0 || math.IsNaN(temp) || math.IsInf(temp, 0) {
			return Result{}, fmt.Errorf("%w: temperature %v", block.ErrInvalidArgument, temp)
		}
	}
	ns, nsKnown := r.namespace(q.Namespace)
	hashes := q.BlockHashes
	if len(hashes) == 0 && len(q.TokenIDs) > 0 {
		if r.deps.Hash == nil || !nsKnown {
			return Result{}, fmt.Errorf("%w: token-id queries need the namespace's hash scheme, which is not available", block.ErrInvalidArgument)
		}
		if len(q.TokenIDs)/ns.BlockTokens > r.cfg.MaxQueryBlocks {
			return Result{}, fmt.Errorf("%w: query has more than %d blocks", block.ErrTooLarge, r.cfg.MaxQueryBlocks)
		}
		h, err := r.deps.Hash(ns, q.TokenIDs)
		if err != nil {
			return Result{}, err
		}
		hashes = h
	}
	if len(hashes) > r.cfg.MaxQueryBlocks {
		return Result{}, fmt.Errorf("%w: query has %d blocks, more than %d", block.ErrTooLarge, len(hashes), r.cfg.MaxQueryBlocks)
	}
	res := Result{Namespace: q.Namespace, Blocks: len(hashes), BlockTokens: ns.BlockTokens, Hashes: hashes, Workers: []WorkerResult{}}

	var keys []block.Key
	if (r.deps.Tier != nil || (q.Hints.PinTTL > 0 && r.deps.Pinner != nil)) && len(hashes) > 0 {
		keys = make([]block.Key, len(hashes))
		for i, h := range hashes {
			keys[i] = block.NewKey(q.Namespace, h)
		}
	}
	if r.deps.Tier != nil && len(keys) > 0 {
		// The read hint re-arms the prefix the lookup finds.
		d, err := r.deps.Tier.Lookup(ctx, keys, ctxstore.ReadOptions{Retain: q.Hints.Retain})
		if err != nil {
			// The tier is one source among several: route without it.
			res.TierError = err.Error()
			r.log.Warn("router: tier lookup failed", "namespace", q.Namespace, "err", err)
		} else {
			res.TierDepth = min(max(d, 0), len(hashes))
		}
	}

	idx, _ := r.Index(q.Namespace, false)
	if idx != nil {
		r.score(idx, &res, hashes, temp, q)
	}

	if q.Hints.PinTTL > 0 {
		switch {
		case r.deps.Pinner == nil:
			res.PinError = "pinning is not available on this server"
		case res.TierDepth > 0:
			errs := r.deps.Pinner.PinBatch(ctx, keys[:res.TierDepth], q.Hints.PinTTL)
			for _, e := range errs {
				if e == nil {
					res.Pinned++
				} else if res.PinError == "" {
					res.PinError = e.Error()
				}
			}
		}
	}
	return res, nil
}

func (r *Router) namespace(name string) (block.Namespace, bool) {
	if r.deps.Namespaces != nil {
		if ns, err := r.deps.Namespaces.Namespace(name); err == nil && ns.BlockTokens > 0 {
			return ns, true
		}
	}
	ns := block.DefaultNamespaceConfig()
	ns.Name, ns.BlockTokens = name, r.cfg.DefaultBlockTokens
	return ns, false
}

// score prices every worker of idx and fills res's workers and recommendation.
// It prices from the walk's dense per-worker depths (no per-worker answer
// entries, no map) and builds result lines only for the listed workers.
func (r *Router) score(idx *Index, res *Result, hashes []uint64, temp float64, q Query) {
	ws := *idx.workers.Load()
	if len(ws) == 0 {
		return
	}
	limit := r.cfg.MaxWorkers
	if q.MaxWorkers > 0 {
		limit = q.MaxWorkers
	}
	limit = min(limit, len(ws))
	ps := r.pool.Get().(*priceScratch)
	defer r.pool.Put(ps)
	if cap(ps.costs) < len(ws) {
		ps.costs = make([]float64, len(ws))
		ps.loads = make([]Load, len(ws))
	}
	costs, loads := ps.costs[:len(ws)], ps.loads[:len(ws)]
	top := ps.top[:0]

	sc := idx.walk(hashes, ws, 0)
	depthOf := func(i int) [NumMedia]int {
		if sc == nil {
			return [NumMedia]int{}
		}
		return sc.depthOf(i)
	}
	now := time.Now().UnixNano()
	fetchBps := r.FetchBytesPerSec()
	in := CostInput{Blocks: len(hashes), BlockTokens: res.BlockTokens, Tier: res.TierDepth, FetchBps: fetchBps}
	// Workers with the same depths (most often none, or the same shared
	// prefix) differ only by their queue: price the rest once per distinct
	// depths, in the order Price adds them, so the result is the same.
	recompute := float64(max(res.BlockTokens, 1)) / r.cfg.Cost.Prefill.TokensPerSec
	type memo struct {
		depth [NumMedia]int
		stale bool
		base  float64
	}
	var memos [8]memo
	nm := 0
	for i, w := range ws {
		in.Depth, in.Stale, in.Load = depthOf(i), w.stale.Load(), r.loadOf(w, now)
		if in.Depth[Disk] == 0 || r.cfg.Cost.TrustStale {
			in.Stale = false // no different price
		}
		base, ok := 0.0, false
		for _, m := range memos[:nm] {
			if m.depth == in.Depth && m.stale == in.Stale {
				base, ok = m.base, true
				break
			}
		}
		if !ok {
			pc := r.cfg.Cost.Price(CostInput{Blocks: in.Blocks, BlockTokens: in.BlockTokens, Depth: in.Depth,
				Stale: in.Stale, Tier: in.Tier, FetchBps: in.FetchBps})
			base = pc.RecomputeSec + pc.LoadSec + pc.FetchSec
			memos[nm%len(memos)] = memo{in.Depth, in.Stale, base}
			nm = min(nm+1, len(memos))
		}
		c := base + r.cfg.Cost.queueSec(in.Load, recompute)
		costs[i], loads[i] = c, in.Load
		// Keep the limit cheapest in top, sorted, ties in worker order.
		if len(top) == limit && c >= costs[top[len(top)-1]] {
			continue
		}
		at := len(top)
		for at > 0 && costs[top[at-1]] > c {
			at--
		}
		if len(top) < limit {
			top = append(top, 0)
		}
		copy(top[at+1:], top[at:len(top)-1])
		top[at] = int32(i)
	}
	if q.Hints.Priority > 0 {
		temp *= 1 - float64(q.Hints.Priority)/float64(block.MaxPriority)
	}
	r.rngMu.Lock()
	pick := Choose(costs, temp, r.rng)
	r.rngMu.Unlock()
	line := func(i int) WorkerResult {
		w := ws[i]
		in.Depth, in.Stale, in.Load = depthOf(i), w.stale.Load(), loads[i]
		return WorkerResult{Worker: w.name, Device: in.Depth[Device], Host: in.Depth[Host], Disk: in.Depth[Disk],
			Stale: in.Stale, Load: in.Load, Cost: r.cfg.Cost.Price(in)}
	}
	chosen := line(pick)
	res.Workers = make([]WorkerResult, len(top))
	for k, i := range top {
		res.Workers[k] = line(int(i))
	}
	if sc != nil {
		idx.pool.Put(sc)
	}
	ps.top = top
	res.Recommended = chosen.Worker
	res.Cost = &chosen.Cost
	if q.Commit {
		w := ws[pick]
		bt := max(res.BlockTokens, 1)
		w.pendPrefill.Add(int64(chosen.Cost.RecomputeBlocks + chosen.Cost.FetchBlocks + chosen.Cost.LocalBlocks))
		w.pendDecode.Add(int64(len(hashes) + (q.Hints.ExpectedOutputTokens+bt-1)/bt))
		w.pendSince.CompareAndSwap(0, now)
	}
}

// priceScratch is score's per-query working memory, pooled.
type priceScratch struct {
	costs []float64
	loads []Load
	top   []int32
}

// loadOf is a worker's reported load plus what the router predicted since.
func (r *Router) loadOf(w *workerState, now int64) Load {
	var l Load
	if p := w.load.Load(); p != nil {
		l = *p
	}
	if since := w.pendSince.Load(); since != 0 {
		if r.cfg.PendingTTL > 0 && now-since > int64(r.cfg.PendingTTL) {
			if w.pendSince.CompareAndSwap(since, 0) {
				w.pendPrefill.Store(0)
				w.pendDecode.Store(0)
			}
		} else {
			l.PrefillBlocks += w.pendPrefill.Load()
			l.DecodeBlocks += w.pendDecode.Load()
		}
	}
	return l
}

// WorkerInfo describes one worker of a namespace.
type WorkerInfo struct {
	Worker      string `json:"worker"`
	Residencies int64  `json:"residencies"`
	Stale       bool   `json:"stale,omitempty"`
	Load        Load   `json:"load"`
}

// Workers lists a namespace's workers.
func (r *Router) Workers(ns string) []WorkerInfo {
	idx, _ := r.Index(ns, false)
	if idx == nil {
		return []WorkerInfo{}
	}
	now := time.Now().UnixNano()
	ws := *idx.workers.Load()
	out := make([]WorkerInfo, len(ws))
	for i, w := range ws {
		out[i] = WorkerInfo{Worker: w.name, Residencies: w.resid.Load(), Stale: w.stale.Load(), Load: r.loadOf(w, now)}
	}
	return out
}

// Stats returns every namespace's index stats.
func (r *Router) Stats() map[string]IndexStats {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make(map[string]IndexStats, len(r.indexes))
	for ns, idx := range r.indexes {
		out[ns] = idx.Stats()
	}
	return out
}
