package fsm

import (
	"sync"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Recent puts: a bounded record of the shards that OpPut created on one
// member, kept only while someone asked for it (TrackPuts). A node that has
// just started checks, for a while, every shard placed on it by an entry
// created since its last check (a put that wrote its shard to the node's
// previous process may commit only now); a scan of the whole index per
// check costs O(index) each time, the record O(new shards on the node).

// recentPuts is a ring of the newest shards created on node: their block's
// key, generation and shard index.
type recentPuts struct {
	node  string
	mu    sync.Mutex
	since uint64 // the applied index when tracking started: complete after it
	lost  uint64 // the highest generation overwritten or discarded
	keys  []block.Key
	gens  []uint64
	index []uint16
	n     int // shards recorded in all (the ring's next slot is n % len(keys))
}

// TrackPuts starts recording, from now on, every shard that an entry OpPut
// creates places on member node (as the op proposed it), keeping the newest
// limit of them, or (limit 0) stops and frees the record. Starting again
// restarts the record.
func (f *FSM) TrackPuts(node string, limit int) {
	f.wmu.Lock() // no apply in progress: since is exact
	defer f.wmu.Unlock()
	if limit <= 0 {
		f.recent.Store(nil)
		return
	}
	f.recent.Store(&recentPuts{
		node:  node,
		since: f.cur.Load().applied,
		keys:  make([]block.Key, limit),
		gens:  make([]uint64, limit),
		index: make([]uint16, limit),
	})
}

// PutsSince calls fn with the block key and shard index of every shard on
// the tracked member that an entry created at a generation above gen
// placed there, as far as the record goes, and reports whether it went far
// enough: false when tracking is off, started after gen, or has dropped
// such a shard (the ring overflowed, or a snapshot replaced the index).
// With false the caller must scan the index instead. A shard may be
// reported although its entry was deleted, replaced or moved since; fn must
// look it up before acting on it. fn runs under the record's lock: it must
// not call TrackPuts.
func (f *FSM) PutsSince(gen uint64, fn func(key block.Key, index int)) bool {
	r := f.recent.Load()
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if gen < r.since || gen < r.lost {
		return false
	}
	size := len(r.keys)
	first := max(r.n-size, 0)
	for i := first; i < r.n; i++ {
		if j := i % size; r.gens[j] > gen {
			fn(r.keys[j], int(r.index[j]))
		}
	}
	return true
}

// notePuts records the shards on the tracked member of the entries ops
// created (out[i].Status StatusCreated) at generation idx. The caller holds
// wmu.
func (f *FSM) notePuts(idx uint64, ops []Op, out []OpResult) {
	r := f.recent.Load()
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	size := len(r.keys)
	for i := range ops {
		if out[i].Status != StatusCreated {
			continue
		}
		for _, sh := range ops[i].Placement {
			if sh.NodeID != r.node {
				continue
			}
			j := r.n % size
			if r.n >= size {
				r.lost = max(r.lost, r.gens[j])
			}
			r.keys[j], r.gens[j], r.index[j] = ops[i].Key, idx, sh.Index
			r.n++
		}
	}
}

// forgetPuts marks everything recorded so far as incomplete: a snapshot
// replaced the index, so entries may have been created that no apply saw.
// The caller holds wmu.
func (f *FSM) forgetPuts() {
	r := f.recent.Load()
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lost = max(r.lost, f.cur.Load().applied)
	clear(r.keys) // drop the namespace strings
	r.n = 0
}
