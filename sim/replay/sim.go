package replay

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"math"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/router"
	"github.com/ctxtier/ctxtier/internal/mix"
	"github.com/ctxtier/ctxtier/sim/trace"
)

// Deps are the replay's collaborators.
type Deps struct {
	// Tier is ctxtier's client; required when SharedTier runs.
	Tier TierClient
	// WorkerTiers are the prefill workers' own clients in a concurrent run
	// (Config.Concurrency > 1): lane i calls over WorkerTiers[i mod len].
	// Empty: every lane uses Tier. The router's lookups use Tier.
	WorkerTiers []TierClient
	// TierRouter routes the SharedTier policy; nil: a LocalRouter over Tier.
	TierRouter RouterClient
	// KVRouter routes the HBMKVAware policy; nil: a LocalRouter without tier.
	KVRouter RouterClient
	// Now measures the real calls (nil: time.Now). A clock that stands still
	// makes a run deterministic.
	Now func() time.Time
	// Sleep paces the replay (nil: a timer honouring ctx).
	Sleep func(ctx context.Context, d time.Duration) error
	// Progress is told, after every completed request of any policy, how
	// many of total are done.
	Progress func(done, total int)
}

// Slice returns the requests to replay: those within duration of the first
// timestamp (0: all), at most max of them (0: all).
func Slice(reqs []trace.Request, maxRequests int, duration time.Duration) []trace.Request {
	if len(reqs) == 0 {
		return reqs
	}
	out := reqs
	if duration > 0 {
		t0, lim := reqs[0].TimestampMs, duration.Milliseconds()
		n := 0
		for n < len(out) && out[n].TimestampMs-t0 < lim {
			n++
		}
		out = out[:n]
	}
	if maxRequests > 0 && len(out) > maxRequests {
		out = out[:maxRequests]
	}
	return out
}

// preq is a request prepared once for every policy.
type preq struct {
	arrival float64 // seconds since the first request
	hashes  []uint64
	tokens  []int   // per block
	full    []int64 // modelled bytes per block
	wire    []int64 // bytes on the wire per block
	prompt  int     // input tokens
	output  int
}

func prepare(cfg Config, reqs []trace.Request) ([]preq, error) {
	out := make([]preq, len(reqs))
	// A block's bytes are fixed by its first appearance, so every put of a
	// hash carries the same bytes even if a trace gave it different lengths.
	sizeOf := make(map[uint64]int)
	var t0 int64
	if len(reqs) > 0 {
		t0 = reqs[0].TimestampMs
	}
	mask := SaltMask(cfg.KeySalt)
	for i, r := range reqs {
		if r.TimestampMs < t0 {
			return nil, fmt.Errorf("replay: request %d: timestamp %d before the first (%d): the trace must be sorted", i, r.TimestampMs, t0)
		}
		t0 = r.TimestampMs
		n := len(r.HashIDs)
		p := preq{arrival: float64(r.TimestampMs-reqs[0].TimestampMs) / 1000, prompt: r.InputLength, output: r.OutputLength,
			hashes: make([]uint64, n), tokens: make([]int, n), full: make([]int64, n), wire: make([]int64, n)}
		for j, h := range r.HashIDs {
			p.hashes[j] = h ^ mask
			// The last block of a prompt is partial; a trace whose hash ids
			// outnumber its tokens still gets a token per block.
			p.tokens[j] = max(1, min(cfg.BlockTokens, r.InputLength-j*cfg.BlockTokens))
			tk, ok := sizeOf[p.hashes[j]]
			if !ok {
				tk = p.tokens[j]
				sizeOf[p.hashes[j]] = tk
			}
			p.full[j] = cfg.blockFullBytes(tk)
			p.wire[j] = cfg.blockWireBytes(p.full[j])
		}
		out[i] = p
	}
	return out, nil
}

type evKind uint8

const (
	evArrive evKind = iota
	evDone          // a prefill finished computing: put, then hand off
	evFree          // a worker finished its put and takes its next request
)

type event struct {
	t    float64
	seq  uint64
	kind evKind
	c    *cluster
	w    int // worker (evDone, evFree)
	req  int // request (evArrive)
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// pworker is a simulated prefill worker.
type pworker struct {
	name      string
	cache     *hbm // nil under NoCache
	queue     []int
	qest      []float64 // estimated service seconds of each queued request
	queued    float64
	busy      bool
	busyUntil float64 // (estimated) end of the running request
	cur       int
	putFrom   int // the running request's blocks from here on are put
}

type dseq struct {
	start, end float64
	tokens     int
}

// dworker is a simulated decode worker: sequences hold KV memory while they decode.
type dworker struct{ seqs []dseq }

// used returns the tokens held at time t.
func (d *dworker) used(t float64) int {
	n := 0
	for _, s := range d.seqs {
		if s.start <= t && t < s.end {
			n += s.tokens
		}
	}
	return n
}

// cluster is one policy's workers and results.
type cluster struct {
	policy  Policy
	rc      RouterClient // nil: round-robin
	rr      int
	index   map[string]int
	tio     *tierIO
	workers []*pworker
	dec     []*dworker
	recs    []Record
	res     *PolicyResult
	lanes   *lanes // the shared tier's lanes in a concurrent run; nil otherwise
}

// sim is one run.
type sim struct {
	cfg      Config
	deps     Deps
	pre      []preq
	h        eventHeap
	seq      uint64
	done     int
	total    int
	wall0    time.Time
	clusters []*cluster
}

func (s *sim) push(e event) {
	s.seq++
	e.seq = s.seq
	heap.Push(&s.h, e)
}

// Run replays reqs under every policy of cfg and returns the report.
func Run(ctx context.Context, cfg Config, deps Deps, reqs []trace.Request) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Sleep == nil {
		deps.Sleep = sleepCtx
	}
	pre, err := prepare(cfg, reqs)
	if err != nil {
		return nil, err
	}
	s := &sim{cfg: cfg, deps: deps, pre: pre}
	// On an early return the lanes' puts are cancelled, then waited for;
	// after the loop's own closeLanes this is a no-op.
	defer s.closeLanes() //nolint:errcheck // the run's own error is returned
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, p := range cfg.Policies {
		c, err := s.newCluster(ctx, p)
		if err != nil {
			return nil, err
		}
		s.clusters = append(s.clusters, c)
	}
	s.total = len(pre) * len(s.clusters)
	for i := range pre {
		for _, c := range s.clusters {
			s.push(event{t: pre[i].arrival, kind: evArrive, c: c, req: i})
		}
	}
	s.wall0 = deps.Now()
	for s.h.Len() > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := s.lanesFailed(); err != nil {
			return nil, err
		}
		e := heap.Pop(&s.h).(event)
		if err := s.pace(ctx, e.t); err != nil {
			return nil, err
		}
		var err error
		switch e.kind {
		case evArrive:
			err = s.arrive(ctx, e.c, e.req, e.t)
		case evDone:
			err = s.finish(ctx, e.c, e.w, e.t)
		case evFree:
			w := e.c.workers[e.w]
			w.busy = false
			if len(w.queue) > 0 {
				err = s.start(ctx, e.c, e.w, e.t)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.c.policy, err)
		}
	}
	if err := s.closeLanes(); err != nil {
		return nil, err
	}
	return s.report(reqs), nil
}

// closeLanes waits for the concurrent puts of every cluster, then settles
// its records; it returns the first failed put.
func (s *sim) closeLanes() error {
	var first error
	for _, c := range s.clusters {
		if c.lanes == nil {
			continue
		}
		l := c.lanes
		c.lanes = nil
		if err := l.close(); err != nil {
			first = cmp.Or(first, fmt.Errorf("%s: %w", c.policy, err))
			continue
		}
		l.settle(c)
	}
	return first
}

// lanesFailed returns the first failed put of a concurrent run so far.
func (s *sim) lanesFailed() error {
	for _, c := range s.clusters {
		if c.lanes != nil {
			if err := c.lanes.failed(); err != nil {
				return fmt.Errorf("%s: %w", c.policy, err)
			}
		}
	}
	return nil
}

// sched is the virtual time a measured call of d seconds takes: d in the
// sequential mode, none in a concurrent one (the schedule must not depend
// on measurements there; own adds them to the request's TTFT instead).
func (s *sim) sched(d float64) float64 {
	if s.cfg.Concurrency > 1 {
		return 0
	}
	return d
}

// own is the part of a measured call of d seconds that a concurrent run
// adds to its request's TTFT outside the schedule.
func (s *sim) own(d float64) float64 { return d - s.sched(d) }

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// pace holds an event back until its virtual time, scaled by Speed, has
// passed on the wall clock.
func (s *sim) pace(ctx context.Context, t float64) error {
	if s.cfg.Speed <= 0 {
		return nil
	}
	target := s.wall0.Add(time.Duration(t / s.cfg.Speed * float64(time.Second)))
	if d := target.Sub(s.deps.Now()); d > 0 {
		return s.deps.Sleep(ctx, d)
	}
	return nil
}

func (s *sim) newCluster(ctx context.Context, p Policy) (*cluster, error) {
	cfg := s.cfg
	c := &cluster{policy: p, index: map[string]int{}, recs: make([]Record, len(s.pre)),
		res: &PolicyResult{Policy: p}}
	for i := range cfg.PrefillWorkers {
		w := &pworker{name: fmt.Sprintf("prefill-%d", i)}
		if p.usesHBM() {
			w.cache = newHBM(cfg.HBMBlocks)
		}
		c.workers = append(c.workers, w)
		c.index[w.name] = i
	}
	for range cfg.DecodeWorkers {
		c.dec = append(c.dec, &dworker{})
	}
	var err error
	switch p {
	case NoCache:
		c.rc, err = NewLocalRouter(cfg, cfg.Namespace, nil)
	case HBMKVAware:
		c.rc = s.deps.KVRouter
		if c.rc == nil {
			c.rc, err = NewLocalRouter(cfg, cfg.Namespace, nil)
		}
	case SharedTier:
		if s.deps.Tier == nil {
			return nil, fmt.Errorf("replay: policy %s needs a tier client", p)
		}
		c.tio = &tierIO{cfg: cfg, client: s.deps.Tier, now: s.deps.Now}
		if cfg.Concurrency > 1 {
			c.lanes = newLanes(ctx, cfg, s.deps.Now, s.deps.Tier, s.deps.WorkerTiers,
				min(cfg.Concurrency, cfg.PrefillWorkers), len(s.pre))
		}
		c.rc = s.deps.TierRouter
		if c.rc == nil {
			c.rc, err = NewLocalRouter(cfg, cfg.Namespace, s.deps.Tier)
		}
	}
	if err != nil {
		return nil, err
	}
	if c.rc != nil {
		// The router learns of every worker before the first query.
		for _, w := range c.workers {
			if err := c.rc.ReportLoad(ctx, w.name, router.Load{}); err != nil {
				return nil, fmt.Errorf("replay: %s: report load: %w", p, err)
			}
		}
	}
	return c, nil
}

// backlog is the estimated seconds of work a worker has at time t.
func (w *pworker) backlog(t float64) float64 {
	b := w.queued
	if w.busy {
		b += max(0, w.busyUntil-t)
	}
	return b
}

func (s *sim) arrive(ctx context.Context, c *cluster, i int, t float64) error {
	p := &s.pre[i]
	rec := &c.recs[i]
	*rec = Record{ID: i, Arrival: p.arrival, Blocks: len(p.hashes), Tokens: p.prompt, OutputTokens: p.output}
	wi, tierDepth := 0, 0
	if c.rc == nil {
		wi = c.rr
		c.rr = (c.rr + 1) % len(c.workers)
	} else {
		// Exact loads as of now, in the router's units (blocks of prefill).
		for _, w := range c.workers {
			l := router.Load{PrefillBlocks: int64(math.Round(w.backlog(t) * s.cfg.Prefill.TokensPerSec / float64(s.cfg.BlockTokens)))}
			if err := c.rc.ReportLoad(ctx, w.name, l); err != nil {
				return fmt.Errorf("report load: %w", err)
			}
		}
		if c.lanes != nil { // the router may look the prefix up in the tier
			if err := c.lanes.await(ctx, p.hashes); err != nil {
				return err
			}
		}
		start := s.deps.Now()
		ans, err := c.rc.Route(ctx, p.hashes)
		rec.Route = s.deps.Now().Sub(start).Seconds()
		if err != nil {
			return fmt.Errorf("route: %w", err)
		}
		var ok bool
		if wi, ok = c.index[ans.Worker]; !ok {
			return fmt.Errorf("route: router recommended %q, not a prefill worker of this run", ans.Worker)
		}
		tierDepth = ans.TierDepth
	}
	rec.Worker = wi
	w := c.workers[wi]
	est := s.estimate(w, p, tierDepth)
	w.queue = append(w.queue, i)
	w.qest = append(w.qest, est)
	w.queued += est
	if !w.busy {
		return s.start(ctx, c, wi, t)
	}
	return nil
}

// estimate is the service time a worker expects for p when it is routed:
// its HBM prefix is free, the tier's prefix beyond it comes at the tier's
// bandwidth, the rest is computed.
func (s *sim) estimate(w *pworker, p *preq, tierDepth int) float64 {
	hd := 0
	if w.cache != nil {
		hd = w.cache.prefix(p.hashes)
	}
	var sec float64
	prefix, tokens := 0, 0
	for j := range p.hashes {
		switch {
		case j < hd:
			prefix += p.tokens[j]
		case j < tierDepth:
			sec += float64(p.full[j]) / s.cfg.TierBytesPerSec
			prefix += p.tokens[j]
		default:
			tokens += p.tokens[j]
		}
	}
	return sec + s.cfg.Prefill.Seconds(prefix, tokens)
}

// start begins w's next queued request at time t: HBM prefix, tier lookup
// and fetch (real calls, measured), then compute (modelled).
func (s *sim) start(ctx context.Context, c *cluster, wi int, t float64) error {
	w := c.workers[wi]
	i := w.queue[0]
	w.queued -= w.qest[0]
	w.queue, w.qest = w.queue[1:], w.qest[1:]
	if len(w.queue) == 0 {
		w.queued = 0 // no float drift
	}
	p := &s.pre[i]
	rec := &c.recs[i]
	rec.Queue = t - p.arrival
	n := len(p.hashes)
	hd := 0
	if w.cache != nil {
		hd = w.cache.prefix(p.hashes)
	}
	hit, fetched, putFrom := hd, 0, n
	if tio := c.tio; tio != nil {
		if c.lanes != nil {
			if err := c.lanes.await(ctx, p.hashes); err != nil {
				return err
			}
			tio = c.lanes.of(wi).read
		}
		td, el, err := tio.lookup(ctx, p.hashes)
		rec.Lookup = el.Seconds()
		if len(p.hashes) > 0 {
			rec.calls |= callLookup
		}
		if err != nil {
			return err
		}
		putFrom = td
		if td > hd {
			got, wire, el, err := tio.fetch(ctx, p.hashes[hd:td], p.wire[hd:td])
			rec.Fetch = el.Seconds()
			rec.calls |= callFetch
			if err != nil {
				return err
			}
			fetched = got
			hit = hd + got
			putFrom = hit
			rec.FetchWireBytes = wire
			if got < td-hd {
				c.res.FetchMisses++
			}
			for j := hd; j < hit; j++ {
				rec.FetchBytes += p.full[j]
				rec.FetchModeled += float64(p.full[j]-p.wire[j]) / s.cfg.TierBytesPerSec
			}
		}
	}
	rec.HBMBlocks, rec.TierBlocks = hd, fetched
	computeTokens := 0
	for j := range n {
		switch {
		case j < hd:
			rec.HBMTokens += p.tokens[j]
		case j < hit:
			rec.TierTokens += p.tokens[j]
		default:
			computeTokens += p.tokens[j]
		}
	}
	rec.ComputeTokens = computeTokens
	rec.Compute = s.cfg.Prefill.Seconds(rec.HBMTokens+rec.TierTokens, computeTokens)
	dur := s.sched(rec.Lookup+rec.Fetch) + rec.FetchModeled + rec.Compute
	w.busy, w.busyUntil, w.cur, w.putFrom = true, t+dur, i, putFrom
	s.push(event{t: t + dur, kind: evDone, c: c, w: wi})
	return nil
}

// finish completes w's running request at time t: put what the tier lacks
// (real, measured), update HBM and tell the router, hand off to decode.
func (s *sim) finish(ctx context.Context, c *cluster, wi int, t float64) error {
	w := c.workers[wi]
	i := w.cur
	p := &s.pre[i]
	rec := &c.recs[i]
	if c.tio != nil && w.putFrom < len(p.hashes) {
		var parent uint64
		if w.putFrom > 0 {
			parent = p.hashes[w.putFrom-1]
		}
		rec.calls |= callPut
		if c.lanes != nil {
			c.lanes.put(wi, i, &putJob{hashes: p.hashes[w.putFrom:], sizes: p.wire[w.putFrom:], parent: parent, hasParent: w.putFrom > 0})
		} else {
			wire, el, err := c.tio.put(ctx, p.hashes[w.putFrom:], p.wire[w.putFrom:], parent, w.putFrom > 0)
			rec.Put = el.Seconds()
			if err != nil {
				return err
			}
			rec.PutWireBytes = wire
		}
		for j := w.putFrom; j < len(p.hashes); j++ {
			rec.PutBytes += p.full[j]
			rec.PutModeled += float64(p.full[j]-p.wire[j]) / s.cfg.TierBytesPerSec
		}
	}
	putDelay := rec.PutModeled
	if s.cfg.PutOverlap {
		putDelay = max(0, rec.PutModeled-rec.Compute)
	}
	end := t + s.sched(rec.Put) + putDelay
	rec.TTFT = rec.Route + end - p.arrival + s.own(rec.Lookup+rec.Fetch)
	if w.cache != nil {
		added, evicted := w.cache.insert(p.hashes)
		if c.rc != nil {
			if evs := storedEvents(p.hashes, added, evicted, s.cfg.BlockTokens); len(evs) > 0 {
				if err := c.rc.Apply(ctx, w.name, evs); err != nil {
					return fmt.Errorf("kv events: %w", err)
				}
			}
		}
	}
	s.handoff(c, rec, p, t, end)
	if c.lanes != nil {
		c.lanes.order = append(c.lanes.order, i) // added once its put is done (settle)
	} else {
		c.res.add(rec)
	}
	w.busyUntil = end
	s.push(event{t: end, kind: evFree, c: c, w: wi})
	s.done++
	if s.deps.Progress != nil {
		s.deps.Progress(s.done, s.total)
	}
	return nil
}

// handoff moves the request's KV to a decode worker: the one that can take
// it first (the least loaded on ties), once its memory has room.
func (s *sim) handoff(c *cluster, rec *Record, p *preq, now, ttftEnd float64) {
	var kv int64
	for _, b := range p.full {
		kv += b
	}
	rec.Handoff = float64(kv) / s.cfg.HandoffBytesPerSec
	ready := ttftEnd + rec.Handoff
	need := min(p.prompt+p.output, s.cfg.DecodeKVTokens) // a sequence larger than a worker still runs, alone
	dur := float64(p.output) * s.cfg.DecodeSecondsPerToken
	best, bestStart, bestUsed := 0, math.Inf(1), 0
	for di, d := range c.dec {
		// Forget sequences that ended before anything still to come: later
		// handoffs are ready no earlier than now.
		live := d.seqs[:0]
		for _, sq := range d.seqs {
			if sq.end > now {
				live = append(live, sq)
			}
		}
		d.seqs = live
		start := ready
		for {
			u := d.used(start)
			if u+need <= s.cfg.DecodeKVTokens {
				if start < bestStart || (start == bestStart && u < bestUsed) {
					best, bestStart, bestUsed = di, start, u
				}
				break
			}
			next := math.Inf(1)
			for _, sq := range d.seqs {
				if sq.end > start && sq.end < next {
					next = sq.end
				}
			}
			if math.IsInf(next, 1) {
				break
			}
			start = next
		}
	}
	if math.IsInf(bestStart, 1) { // cannot happen: an empty worker always fits need
		bestStart = ready
	}
	c.dec[best].seqs = append(c.dec[best].seqs, dseq{start: bestStart, end: bestStart + dur, tokens: need})
	rec.Decoder = best
	rec.DecodeWait = bestStart - ready
	rec.E2E = rec.TTFT + rec.Handoff + rec.DecodeWait + dur
}

// SaltMask is what a run's KeySalt XORs into trace hash ids (`ctxbench sim
// --key-salt` XORs the same mask, so the simulator sees the same keys). A
// salt XORed in as it is would let small salts collide: under salts 7 and 11 the ids
// h and h^12 became one block hash, so two runs shared (and overwrote)
// blocks of different sizes. SplitMix64 spreads every salt over all 64
// bits, so two runs' hashes meet only if the masks' XOR equals the XOR of
// two trace ids (small numbers): odds of about n²/2⁶⁴. 0 stays 0.
func SaltMask(salt uint64) uint64 {
	if salt == 0 {
		return 0
	}
	return mix.SplitMix64(salt)
}
