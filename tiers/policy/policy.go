// Package policy holds the replacement policies that tiers use to choose
// eviction victims, and the admission filters that decide whether a block is
// worth writing to a lower tier. The same code runs inside the DRAM tier and
// inside `ctxbench sim`, so what the simulator measures is what the tier does.
//
// Blocks are named by Handle: a small dense integer the tier assigns (its
// slot number) and reuses after Remove. Policies keep their per-block state in
// arrays indexed by handle, a few bytes per block, with no per-block heap
// objects. Their recency lists are one type, handleLists (intrusive doubly
// linked lists over handle-indexed link arrays), which LRU and S3-FIFO use
// directly; Segmented and Window share segments, two such lists per
// priority class with each block's class, flags and chain fingerprints.
package policy

import "github.com/ctxtier/ctxtier/ctxstore/block"

// Handle is a tier-assigned slot number, dense from 0 and reused after Remove.
type Handle uint32

// Meta is what the tier knows about a block when it becomes resident.
type Meta struct {
	Hash      uint64 // sequence hash
	Parent    uint64 // parent's sequence hash when HasParent
	HasParent bool
	Size      int64
	// Priority is the eviction class: lower classes are evicted first.
	Priority uint8
	// Reuse and Retain are the agent hints of the put (block.PutOptions):
	// Retain is the retain window in the units of the owner's clock
	// (Clocked). Only hint-aware policies (Hinted) read them; the others
	// ignore them.
	Reuse  block.Reuse
	Retain int64
	// Session is the agent session that put the block (0: none), as the
	// owner names it (the DRAM tier folds in the namespace); Hinted's
	// ReleaseSession finds a session's blocks by it.
	Session uint64
}

// Clocked is implemented by policies whose order depends on time (Hinted's
// retain windows): the owner sets the current time, in the units of
// Meta.Retain, before Insert, Touch and Victim.
type Clocked interface {
	SetNow(now int64)
}

// Policy orders resident blocks for eviction.
//
// Concurrency: a Policy is not locked internally. Its owner (a tier) calls it
// under the lock that already guards the tier's index, so a policy update
// costs no extra synchronisation; wrap it with Locked to share one otherwise.
type Policy interface {
	// Insert starts tracking a newly resident block.
	Insert(h Handle, m Meta)
	// Touch records a hit on a resident block.
	Touch(h Handle)
	// Remove stops tracking h (deleted, expired or evicted by the tier).
	Remove(h Handle)
	// Victim proposes the next block to evict. Blocks for which evictable
	// returns false (pinned, leased) are skipped; the policy may reorder
	// them. ok is false when no evictable block is tracked. Victim does not
	// remove the block: the tier calls Remove once it has evicted it.
	Victim(evictable func(Handle) bool) (h Handle, ok bool)
	// Len is the number of tracked blocks.
	Len() int
}

// Factory builds a policy sized for an expected number of blocks (a hint).
type Factory func(expectedBlocks int) Policy
