package policysim

import (
	"container/heap"
	"fmt"

	"github.com/ctxtier/ctxtier/sim/trace"
	"github.com/ctxtier/ctxtier/tiers/policy"
)

// Knowledge is what a partial oracle knows about blocks that have already
// been used at least twice (reused blocks). It knows nothing about blocks
// seen once, which it holds in an LRU window.
type Knowledge int

const (
	// KnowsDeath: the oracle knows whether a reused block will ever be used
	// again; live reused blocks are ordered by recency (LRU).
	KnowsDeath Knowledge = iota + 1
	// KnowsFuture: the oracle knows when a reused block will next be used
	// (Belady's order among reused blocks).
	KnowsFuture
)

// String names the bound as ctxbench prints it.
func (k Knowledge) String() string {
	switch k {
	case KnowsDeath:
		return "oracle-reused-death"
	case KnowsFuture:
		return "oracle-reused-future"
	}
	return fmt.Sprintf("Knowledge(%d)", int(k))
}

// ReusedOracle replays reqs through a partial oracle: an offline bound for
// every policy that cannot tell, when a block is first stored, whether it
// will ever be used again. Blocks seen once are all alike to it: they sit in
// an LRU window that takes whatever space the reused blocks leave, except that
// a request's last block goes to the window's eviction end (Window's tail
// demotion: the one first-reuse signal an online policy has). For a
// block whose history already holds two uses (a hit, or a return after
// eviction) it knows k. Victim order: a reused block that is dead, then the
// least recent block of the window, then a live reused block (the least
// recent one under KnowsDeath, the one needed farthest ahead under
// KnowsFuture). The gap between this bound and Belady is what only a
// predictor of first reuse could win; the gap between it and an online policy
// is what a predictor of a reused block's death could win.
func ReusedOracle(reqs []trace.Request, capacityBlocks int, k Knowledge, opt Options) (Result, error) {
	if capacityBlocks < 1 {
		return Result{}, fmt.Errorf("%w: got %d", ErrCapacity, capacityBlocks)
	}
	if k != KnowsDeath && k != KnowsFuture {
		return Result{}, fmt.Errorf("sim: unknown oracle knowledge %d", int(k))
	}
	o := newReusedOracle(reqs, capacityBlocks, k)
	opt.PrefixTouchOnly = false // its next-use table needs every access
	return replay(reqs, capacityBlocks, k.String(), o, o, opt), nil
}

type reusedOracle struct {
	b      *belady
	k      Knowledge
	seen   []bool // access index -> the block had an earlier access
	last   []bool // access index -> the last block of its request
	reused []bool // handle -> in the reused set (else in the window)
	// Two LRU lists over handles (window, reused) as intrusive links;
	// index 0 and 1 are the sentinels, handle h lives at h+2.
	prev, next []int32
}

const (
	winHead    = 0
	reusedHead = 1
)

func newReusedOracle(reqs []trace.Request, capacity int, k Knowledge) *reusedOracle {
	b := newBelady(reqs, capacity)
	seen := make([]bool, len(b.nextUse))
	ever := make(map[uint64]struct{})
	last := make([]bool, len(b.nextUse))
	i := 0
	for _, r := range reqs {
		for j, id := range r.HashIDs {
			last[i] = j == len(r.HashIDs)-1
			_, seen[i] = ever[id]
			ever[id] = struct{}{}
			i++
		}
	}
	o := &reusedOracle{b: b, k: k, seen: seen, last: last, prev: []int32{winHead, reusedHead}, next: []int32{winHead, reusedHead}}
	return o
}

func (o *reusedOracle) at(access int) { o.b.at(access) }

func (o *reusedOracle) grow(h policy.Handle) {
	for int(h) >= len(o.reused) {
		o.reused = append(o.reused, false)
		o.prev = append(o.prev, -1)
		o.next = append(o.next, -1)
	}
}

func (o *reusedOracle) unlink(h policy.Handle) {
	n := int32(h) + 2
	o.next[o.prev[n]] = o.next[n]
	o.prev[o.next[n]] = o.prev[n]
}

// pushBack links h as the most recent entry of the list headed by head.
func (o *reusedOracle) pushBack(head int32, h policy.Handle) {
	n := int32(h) + 2
	last := o.prev[head]
	o.prev[n], o.next[n] = last, head
	o.next[last] = n
	o.prev[head] = n
}

func (o *reusedOracle) Insert(h policy.Handle, m policy.Meta) {
	o.grow(h)
	o.b.Insert(h, m)
	o.reused[h] = o.seen[o.b.now]
	switch {
	case o.reused[h]:
		o.pushBack(reusedHead, h)
	case o.last[o.b.now]:
		o.pushFront(winHead, h) // tail demotion, as Window does
	default:
		o.pushBack(winHead, h)
	}
}

func (o *reusedOracle) Touch(h policy.Handle) {
	o.b.Touch(h)
	o.unlink(h)
	o.reused[h] = true
	o.pushBack(reusedHead, h)
}

func (o *reusedOracle) Remove(h policy.Handle) {
	o.b.Remove(h)
	o.unlink(h)
}

func (o *reusedOracle) Len() int { return o.b.Len() }

// farthest is the reused block needed farthest ahead (dead ones first),
// dropping stale heap entries and entries of window blocks.
func (o *reusedOracle) farthest(evictable func(policy.Handle) bool) (policy.Handle, int, bool) {
	var skipped []useEntry
	defer func() {
		for _, e := range skipped {
			heap.Push(&o.b.h, e)
		}
	}()
	for o.b.h.Len() > 0 {
		e := o.b.h[0]
		if !o.b.live[e.h] || o.b.next[e.h] != e.next || !o.reused[e.h] {
			heap.Pop(&o.b.h)
			continue
		}
		if evictable != nil && !evictable(e.h) {
			skipped = append(skipped, heap.Pop(&o.b.h).(useEntry))
			continue
		}
		return e.h, e.next, true
	}
	return 0, 0, false
}

// firstEvictable walks a list from its least recent end.
// pushFront links h as the least recent entry of the list headed by head.
func (o *reusedOracle) pushFront(head int32, h policy.Handle) {
	n := int32(h) + 2
	first := o.next[head]
	o.prev[n], o.next[n] = head, first
	o.prev[first] = n
	o.next[head] = n
}

func (o *reusedOracle) firstEvictable(head int32, evictable func(policy.Handle) bool) (policy.Handle, bool) {
	for n := o.next[head]; n != head; n = o.next[n] {
		h := policy.Handle(n - 2)
		if evictable == nil || evictable(h) {
			return h, true
		}
	}
	return 0, false
}

func (o *reusedOracle) Victim(evictable func(policy.Handle) bool) (policy.Handle, bool) {
	h, next, ok := o.farthest(evictable)
	if ok && next == never {
		return h, true
	}
	if w, ok := o.firstEvictable(winHead, evictable); ok {
		return w, true
	}
	if o.k == KnowsDeath {
		return o.firstEvictable(reusedHead, evictable)
	}
	return h, ok
}
