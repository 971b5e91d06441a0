package fsm

import (
	"math"
	"slices"
)

// refChunk is how many shard references one chunk of a refArena holds
// (32 KiB).
const refChunk = 4096

// compactMinDead is how many dead references a refArena holds before a
// compaction is considered: below it, rewriting the index costs more than
// the memory it frees.
const compactMinDead = 1 << 16

// refArena holds, for every index entry whose placement has more than one
// shard, the shards after the first, back to back in chunks that never
// move. A slot names its run by offset, not by pointer, so the index's
// leaves hold no pointer at all and the garbage collector does not scan
// them: with a pointer per replicated or erasure-coded entry, every
// collection walked every such entry (2 million of them cost 430 ms of
// CPU per collection).
//
// The writer (under FSM.wmu) only appends past the arena's length, and a
// reference below it never changes: a published state's slots name runs
// its own copy of the arena header covers, so readers take no lock, as
// with the name table. Runs of replaced or deleted entries stay in the
// arena as dead references; once they outnumber the live ones, compact
// copies the live runs into a fresh arena (the index's nodes are rewritten
// copy-on-write, so published states keep the old one).
type refArena struct {
	chunks []*[refChunk]shardRef
	n      uint32 // references handed out, including chunk tails skipped
	dead   uint32 // references no slot names any more, tails included
}

// alloc hands out a run of k references (1 <= k < refChunk) for the
// caller to fill and returns its offset. A run never crosses a chunk: one
// that would starts the next chunk, and the tail it skips counts as dead.
func (a *refArena) alloc(k int) (uint32, []shardRef) {
	at := a.n % refChunk
	if at+uint32(k) > refChunk {
		a.dead += refChunk - at
		a.n += refChunk - at
	}
	off := a.n
	if int(off/refChunk) == len(a.chunks) {
		a.chunks = append(a.chunks, new([refChunk]shardRef))
	}
	a.n += uint32(k)
	c, i := a.chunks[off/refChunk], off%refChunk
	return off, c[i : i+uint32(k) : i+uint32(k)]
}

// get returns the run of k references at off. The caller must not change it.
func (a *refArena) get(off uint32, k int) []shardRef {
	i := off % refChunk
	return a.chunks[off/refChunk][i : i+uint32(k) : i+uint32(k)]
}

// release marks the run sl names as dead, when it has one: sl is leaving
// the index, or taking another placement.
func (a *refArena) release(sl *slot) {
	if sl.shards > 1 {
		a.dead += uint32(sl.shards) - 1
	}
}

// needsCompact reports whether dead references are at least compactMinDead
// and outnumber the live ones, or the offsets are running out.
func (a *refArena) needsCompact() bool {
	return a.dead >= compactMinDead && a.dead > a.n-a.dead || a.n > math.MaxUint32-refChunk*256
}

// compactRefs moves the live runs of every namespace's index into a fresh
// arena, rewriting every node (copy-on-write, with the transaction's
// generation) so that states already published keep theirs.
func (x *indexTxn) compactRefs() {
	s := x.s
	old := s.refs
	s.refs = refArena{}
	names := make([]string, 0, len(s.index)+len(x.trees))
	for ns := range s.index {
		names = append(names, ns)
	}
	for ns := range x.trees {
		if _, ok := s.index[ns]; !ok {
			names = append(names, ns)
		}
	}
	slices.Sort(names) // the same arena on every node, for the same log
	for _, ns := range names {
		t := x.tree(ns)
		if t.root != nil {
			t.root = rewriteRefs(x.gen, t.root, &old, &s.refs)
		}
	}
}

// rewriteRefs returns n, owned by transaction gen, with every slot under
// it naming a copy of its run in to instead of from.
func rewriteRefs(gen uint64, n *node, from, to *refArena) *node {
	n = own(gen, n)
	if n.kids == nil {
		for i := range n.slots {
			sl := &n.slots[i]
			if sl.shards > 1 {
				run := from.get(sl.more, int(sl.shards)-1)
				off, dst := to.alloc(len(run))
				copy(dst, run)
				sl.more = off
			}
		}
		return n
	}
	for i, c := range n.kids {
		n.kids[i] = rewriteRefs(gen, c, from, to)
	}
	return n
}
