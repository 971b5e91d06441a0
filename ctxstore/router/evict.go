package router

// maybeEvict brings the index under its budget when it is over, evicting the
// stalest entries first: every entry of a worker marked stale, then the
// entries stored longest ago, whichever worker holds them. One evictor runs at
// a time; a writer that finds another evicting goes on.
func (idx *Index) maybeEvict() {
	if idx.cfg.MaxBytes <= 0 || idx.used() <= idx.cfg.MaxBytes {
		return
	}
	if !idx.evictMu.TryLock() {
		return
	}
	defer idx.evictMu.Unlock()
	target := int64(float64(idx.cfg.MaxBytes) * idx.cfg.LowWater)
	idle := 0
	for idx.used() > target {
		w := idx.stalestWorker()
		if w == nil {
			return
		}
		w.mu.Lock()
		n := idx.evictLocked(w, idx.cfg.EvictBatch)
		idx.publishLocked(w)
		w.mu.Unlock()
		if n > 0 {
			idle = 0
		} else if idle++; idle > 2*len(*idx.workers.Load())+2 {
			return // nothing left that eviction can take
		}
	}
}

// stalestWorker picks the worker whose oldest live store is oldest, preferring
// stale workers; nil when no worker holds anything.
func (idx *Index) stalestWorker() *workerState {
	var best *workerState
	bestTik := ^uint32(0)
	for _, w := range *idx.workers.Load() {
		if w.resid.Load() == 0 {
			continue
		}
		if w.stale.Load() {
			return w
		}
		if t := w.headTik.Load(); best == nil || t < bestTik {
			best, bestTik = w, t
		}
	}
	return best
}

// evictLocked drops up to n of the worker's oldest live entries (all media of
// each). A stale worker is cleared at once. It returns residencies dropped.
func (idx *Index) evictLocked(w *workerState, n int) int {
	if w.stale.Load() {
		d := idx.clearLocked(w)
		idx.evicted.Add(int64(d))
		return d
	}
	dropped := 0
	for n > 0 && w.qhead < len(w.queue) {
		r := w.queue[w.qhead]
		w.queue[w.qhead] = qrec{}
		w.qhead++
		e, ok := w.blocks.get(r.hash)
		if !ok || e.seq != r.seq {
			continue // refreshed or removed since
		}
		dropped += idx.dropEntryLocked(w, r.hash, e)
		w.blocks.del(r.hash)
		n--
	}
	if w.qhead == len(w.queue) {
		w.queue, w.qhead = w.queue[:0], 0
		w.headTik.Store(^uint32(0))
		if w.blocks.n > 0 {
			// Cannot happen: every live entry has a live record. Be safe.
			dropped += idx.clearLocked(w)
		}
	} else {
		w.headTik.Store(w.queue[w.qhead].tick)
		if w.qhead > len(w.queue)/2 {
			w.compactLocked()
		}
	}
	idx.evicted.Add(int64(dropped))
	return dropped
}
