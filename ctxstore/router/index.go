package router

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// shardBits sets the number of position-map shards (1<<shardBits).
const shardBits = 8

// IndexConfig bounds one namespace's index.
type IndexConfig struct {
	// MaxBytes is the memory budget of the index (0: unbounded). When the
	// accounted size exceeds it, the stalest entries are evicted down to
	// LowWater of the budget.
	MaxBytes int64
	// LowWater is the fraction of MaxBytes eviction brings usage down to.
	LowWater float64
	// BytesPerKey and BytesPerResidency are what one (position, hash) entry of
	// the shared map and one (worker, hash, medium) residency are accounted
	// at. ctxbench router-bench measured 87-112 heap bytes per residency
	// (Go 1.26, amd64, Mooncake conversation trace, 100-1000 workers, flat
	// tables at 37-75% load); the defaults, 48 + 64, account 0.9-1.1x of it.
	BytesPerKey       int64
	BytesPerResidency int64
	// EvictBatch is how many entries eviction takes from one worker before it
	// looks again for the stalest worker.
	EvictBatch int
}

// DefaultIndexConfig is a 1 GiB budget with the measured per-entry costs.
func DefaultIndexConfig() IndexConfig {
	return IndexConfig{
		MaxBytes:          1 << 30,
		LowWater:          0.9,
		BytesPerKey:       48,
		BytesPerResidency: 64,
		EvictBatch:        256,
	}
}

// Validate checks the configuration.
func (c IndexConfig) Validate() error {
	switch {
	case c.MaxBytes < 0:
		return fmt.Errorf("%w: router index max_bytes %d is negative", block.ErrInvalidArgument, c.MaxBytes)
	case c.LowWater <= 0 || c.LowWater > 1:
		return fmt.Errorf("%w: router index low_water %v not in (0,1]", block.ErrInvalidArgument, c.LowWater)
	case c.BytesPerKey <= 0 || c.BytesPerResidency <= 0:
		return fmt.Errorf("%w: router index per-entry byte costs must be positive", block.ErrInvalidArgument)
	case c.EvictBatch <= 0:
		return fmt.Errorf("%w: router index evict_batch %d must be positive", block.ErrInvalidArgument, c.EvictBatch)
	}
	return nil
}

// holder packs a worker id and a medium: id<<2 | medium.
type holder = uint32

func mkHolder(id uint32, m Medium) holder { return id<<2 | uint32(m) }

type shard struct {
	mu sync.RWMutex
	t  ptable
	_  [64]byte // keep neighbouring shards' locks off one cache line
}

// qrec is one store in a worker's FIFO; it is live while the worker's entry
// for hash still carries seq.
type qrec struct { // qrecSize bytes
	hash uint64
	seq  uint32
	tick uint32 // index clock (ms since the index started) at the store
}

const qrecSize = 16

type workerState struct {
	id   uint32
	name string

	mu      sync.Mutex // the worker's single writer (and the evictor)
	blocks  wtable
	queue   []qrec
	qhead   int
	seq     uint32
	headTik atomic.Uint32 // tick of queue[qhead], for the evictor's choice
	resid   atomic.Int64  // residencies this worker holds
	dres    int64         // residency and key deltas not yet published (under mu)
	dkeys   int64

	stale atomic.Bool

	load        atomic.Pointer[Load]
	pendPrefill atomic.Int64 // router's own additions since the last load report
	pendDecode  atomic.Int64
	pendSince   atomic.Int64 // unix nanos of the first pending addition
}

// Index is one namespace's positional index. Its methods are safe for
// concurrent use; writes for one worker are serialized on that worker.
type Index struct {
	cfg    IndexConfig
	shards [1 << shardBits]shard
	start  time.Time

	wmu     sync.RWMutex
	byName  map[string]*workerState
	workers atomic.Pointer[[]*workerState] // by id; copy on write

	keys    atomic.Int64 // distinct (position, hash) entries
	resid   atomic.Int64 // (worker, hash, medium) residencies
	evicted atomic.Int64
	orphans atomic.Int64
	evictMu sync.Mutex

	pool sync.Pool // *scratch
}

// NewIndex returns an empty index.
func NewIndex(cfg IndexConfig) (*Index, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	idx := &Index{cfg: cfg, start: time.Now(), byName: map[string]*workerState{}}
	empty := []*workerState{}
	idx.workers.Store(&empty)
	idx.pool.New = func() any { return new(scratch) }
	return idx, nil
}

func mix(h uint64, pos uint32) uint64 {
	x := h ^ (uint64(pos)+1)*0x9E3779B97F4A7C15
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	return x
}

func (idx *Index) shardFor(h uint64, pos uint32) *shard {
	return &idx.shards[mix(h, pos)>>(64-shardBits)]
}

// Shard locks are held for one slot's update or lookup, a few hundred
// nanoseconds. Blocking on one costs far more: the waker readies the
// sleeper on its own P, where it waits until the waker yields or another P
// steals it (tens of microseconds; this was a concurrent writer's whole
// effect on lookup p99). So readers and writers retry TryRLock/TryLock a
// bounded number of times before they block.
const lockSpins = 1000

func rlockSpin(mu *sync.RWMutex) {
	for range lockSpins {
		if mu.TryRLock() {
			return
		}
	}
	mu.RLock()
}

func lockSpin(mu *sync.RWMutex) {
	for range lockSpins {
		if mu.TryLock() {
			return
		}
	}
	mu.Lock()
}

func (idx *Index) tick() uint32 { return uint32(time.Since(idx.start) / time.Millisecond) }

// worker returns the state for name, creating it when create is set.
func (idx *Index) worker(name string, create bool) *workerState {
	idx.wmu.RLock()
	w := idx.byName[name]
	idx.wmu.RUnlock()
	if w != nil || !create {
		return w
	}
	idx.wmu.Lock()
	defer idx.wmu.Unlock()
	if w, ok := idx.byName[name]; ok {
		return w
	}
	old := *idx.workers.Load()
	w = &workerState{id: uint32(len(old)), name: name}
	w.headTik.Store(^uint32(0))
	next := make([]*workerState, len(old)+1)
	copy(next, old)
	next[len(old)] = w
	idx.workers.Store(&next)
	idx.byName[name] = w
	return w
}

// ApplyStats counts what Apply did.
type ApplyStats struct {
	Stored, Removed int // residencies added and dropped
	Orphans         int // stored blocks whose parent the worker was not known to hold
	Unknown         int // removals of blocks the index did not have
}

// Apply applies a worker's events in order. Stored blocks whose parent the
// index does not hold for that worker are dropped: with chained hashes they
// cannot extend any prefix the worker is known to hold.
func (idx *Index) Apply(worker string, evs []Event) (ApplyStats, error) {
	if worker == "" {
		return ApplyStats{}, fmt.Errorf("%w: empty worker name", block.ErrInvalidArgument)
	}
	for i := range evs {
		if evs[i].Medium >= NumMedia {
			return ApplyStats{}, fmt.Errorf("%w: event %d: medium %d", block.ErrInvalidArgument, i, evs[i].Medium)
		}
	}
	w := idx.worker(worker, true)
	var st ApplyStats
	w.mu.Lock()
	for i := range evs {
		idx.applyLocked(w, &evs[i], &st)
	}
	idx.publishLocked(w)
	w.mu.Unlock()
	idx.maybeEvict()
	return st, nil
}

func (idx *Index) applyLocked(w *workerState, ev *Event, st *ApplyStats) {
	switch ev.Kind {
	case Stored:
		var pos uint32
		if ev.HasParent {
			p, ok := w.blocks.get(ev.Parent)
			if !ok {
				st.Orphans += len(ev.Hashes)
				idx.orphans.Add(int64(len(ev.Hashes)))
				return
			}
			pos = p.pos + 1
		}
		tk := idx.tick()
		for i, h := range ev.Hashes {
			if idx.storeLocked(w, h, pos+uint32(i), ev.Medium, tk) {
				st.Stored++
			}
		}
	case Removed:
		for _, h := range ev.Hashes {
			if idx.removeLocked(w, h, ev.Medium) {
				st.Removed++
			} else {
				st.Unknown++
			}
		}
	case Cleared:
		st.Removed += idx.clearLocked(w)
	}
}

func (idx *Index) storeLocked(w *workerState, h uint64, pos uint32, m Medium, tk uint32) bool {
	e, ok := w.blocks.get(h)
	if ok && e.pos != pos {
		// The same hash at another position: only a hash collision or a
		// non-chained scheme does this. The newest store wins.
		idx.dropEntryLocked(w, h, e)
		ok, e = false, wentry{}
	}
	bit := uint8(1) << m
	added := false
	if !ok || e.media&bit == 0 {
		if idx.addHolder(h, pos, mkHolder(w.id, m)) {
			w.dkeys++
		}
		w.dres++
		added = true
	}
	w.seq = (w.seq + 1) & seqMask
	e.pos, e.seq, e.media = pos, w.seq, e.media|bit
	w.blocks.put(h, e)
	if w.qhead == len(w.queue) {
		w.headTik.Store(tk)
	}
	w.queue = append(w.queue, qrec{hash: h, seq: w.seq, tick: tk})
	if live := len(w.queue) - w.qhead; live > 64 && live > 2*w.blocks.n {
		w.compactLocked()
	}
	return added
}

// compactLocked drops dead records from the worker's FIFO.
func (w *workerState) compactLocked() {
	q := w.queue[:0]
	for _, r := range w.queue[w.qhead:] {
		if e, ok := w.blocks.get(r.hash); ok && e.seq == r.seq {
			q = append(q, r)
		}
	}
	clear(w.queue[len(q):])
	w.queue, w.qhead = q, 0
	if len(q) > 0 {
		w.headTik.Store(q[0].tick)
	} else {
		w.headTik.Store(^uint32(0))
	}
}

func (idx *Index) removeLocked(w *workerState, h uint64, m Medium) bool {
	e, ok := w.blocks.get(h)
	bit := uint8(1) << m
	if !ok || e.media&bit == 0 {
		return false
	}
	if idx.delHolder(h, e.pos, mkHolder(w.id, m)) {
		w.dkeys--
	}
	w.dres--
	e.media &^= bit
	if e.media == 0 {
		w.blocks.del(h)
	} else {
		w.blocks.put(h, e)
	}
	return true
}

// dropEntryLocked removes every medium of one worker entry from the position map.
func (idx *Index) dropEntryLocked(w *workerState, h uint64, e wentry) int {
	n := 0
	for m := Medium(0); m < NumMedia; m++ {
		if e.media&(1<<m) != 0 {
			if idx.delHolder(h, e.pos, mkHolder(w.id, m)) {
				w.dkeys--
			}
			n++
		}
	}
	w.dres -= int64(n)
	return n
}

func (idx *Index) clearLocked(w *workerState) int {
	n := 0
	w.blocks.all(func(h uint64, e wentry) { n += idx.dropEntryLocked(w, h, e) })
	w.blocks = wtable{} // give the memory back
	w.queue, w.qhead = nil, 0
	w.headTik.Store(^uint32(0))
	return n
}

// addHolder adds x to (h, pos)'s holder set and reports whether the key is new.
func (idx *Index) addHolder(h uint64, pos uint32, x holder) bool {
	s := idx.shardFor(h, pos)
	lockSpin(&s.mu)
	isNew := s.t.add(h, pos, x)
	s.mu.Unlock()
	return isNew
}

// delHolder removes x from (h, pos)'s holder set and reports whether the key is gone.
func (idx *Index) delHolder(h uint64, pos uint32, x holder) bool {
	s := idx.shardFor(h, pos)
	lockSpin(&s.mu)
	gone := s.t.del(h, pos, x)
	s.mu.Unlock()
	return gone
}

// publishLocked makes the worker's residency and key deltas visible to the
// index's totals: once per call, not per block, to keep writers off shared
// cache lines.
func (idx *Index) publishLocked(w *workerState) {
	if w.dres != 0 {
		w.resid.Add(w.dres)
		idx.resid.Add(w.dres)
		w.dres = 0
	}
	if w.dkeys != 0 {
		idx.keys.Add(w.dkeys)
		w.dkeys = 0
	}
}

// ClearWorker drops all of a worker's entries and its stale mark (the worker
// restarted, or sent AllBlocksCleared). It returns the residencies dropped.
func (idx *Index) ClearWorker(worker string) int {
	w := idx.worker(worker, false)
	if w == nil {
		return 0
	}
	w.mu.Lock()
	n := idx.clearLocked(w)
	w.stale.Store(false)
	idx.publishLocked(w)
	w.mu.Unlock()
	return n
}

// ReplaceWorker replaces a worker's entries with a full dump of its cache
// (Stored events) and clears its stale mark, atomically for readers of that
// worker's lock.
func (idx *Index) ReplaceWorker(worker string, dump []Event) (ApplyStats, error) {
	if worker == "" {
		return ApplyStats{}, fmt.Errorf("%w: empty worker name", block.ErrInvalidArgument)
	}
	for i := range dump {
		if dump[i].Medium >= NumMedia {
			return ApplyStats{}, fmt.Errorf("%w: event %d: medium %d", block.ErrInvalidArgument, i, dump[i].Medium)
		}
	}
	w := idx.worker(worker, true)
	var st ApplyStats
	w.mu.Lock()
	st.Removed += idx.clearLocked(w)
	for i := range dump {
		idx.applyLocked(w, &dump[i], &st)
	}
	w.stale.Store(false)
	idx.publishLocked(w)
	w.mu.Unlock()
	idx.maybeEvict()
	return st, nil
}

// MarkStale marks a worker's entries as not to be trusted (a sequence gap)
// until ClearWorker or ReplaceWorker. Stale entries are evicted first.
func (idx *Index) MarkStale(worker string) {
	if w := idx.worker(worker, true); w != nil {
		w.stale.Store(true)
	}
}

// Stale reports whether a worker is marked stale.
func (idx *Index) Stale(worker string) bool {
	w := idx.worker(worker, false)
	return w != nil && w.stale.Load()
}

// IndexStats is a snapshot of an index's size.
type IndexStats struct {
	Workers     int   `json:"workers"`
	Keys        int64 `json:"keys"`
	Residencies int64 `json:"residencies"`
	Bytes       int64 `json:"accounted_bytes"`
	Evicted     int64 `json:"evicted"`
	Orphans     int64 `json:"orphans"`
}

// Stats returns the index's current size.
func (idx *Index) Stats() IndexStats {
	return IndexStats{
		Workers:     len(*idx.workers.Load()),
		Keys:        idx.keys.Load(),
		Residencies: idx.resid.Load(),
		Bytes:       idx.used(),
		Evicted:     idx.evicted.Load(),
		Orphans:     idx.orphans.Load(),
	}
}

func (idx *Index) used() int64 {
	return idx.keys.Load()*idx.cfg.BytesPerKey + idx.resid.Load()*idx.cfg.BytesPerResidency
}

// Footprint is the heap the index's tables hold now (position tables and
// their holder sets, worker tables and FIFOs), counted from their capacities.
// It takes every lock in turn; use it for measurement, not per request.
func (idx *Index) Footprint() int64 {
	var b int64
	for i := range idx.shards {
		s := &idx.shards[i]
		s.mu.RLock()
		b += s.t.bytes()
		s.mu.RUnlock()
	}
	for _, w := range *idx.workers.Load() {
		w.mu.Lock()
		b += w.blocks.bytes() + int64(cap(w.queue))*qrecSize
		w.mu.Unlock()
	}
	return b
}
