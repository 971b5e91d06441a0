package policysim

import (
	"container/heap"

	"github.com/ctxtier/ctxtier/sim/trace"
	"github.com/ctxtier/ctxtier/tiers/policy"
)

const never = int(^uint(0) >> 1)

// belady is the offline optimum expressed as a policy.Policy, so that it
// runs through exactly the replay loop the online policies run through. The
// replay tells it the index of the access in progress; from the precomputed
// next-use table it knows when each resident block is needed next.
type belady struct {
	nextUse []int // access index -> index of the next access to the same block
	now     int
	next    []int // handle -> next use of the block it holds
	live    []bool
	n       int
	h       useHeap
	skipped []useEntry
}

func newBelady(reqs []trace.Request, capacity int) *belady {
	total := 0
	for _, r := range reqs {
		total += len(r.HashIDs)
	}
	nextUse := make([]int, total)
	last := make(map[uint64]int)
	i := total
	for ri := len(reqs) - 1; ri >= 0; ri-- {
		ids := reqs[ri].HashIDs
		for j := len(ids) - 1; j >= 0; j-- {
			i--
			if n, ok := last[ids[j]]; ok {
				nextUse[i] = n
			} else {
				nextUse[i] = never
			}
			last[ids[j]] = i
		}
	}
	return &belady{nextUse: nextUse, h: make(useHeap, 0, capacity)}
}

func (b *belady) at(access int) { b.now = access }

func (b *belady) set(h policy.Handle) {
	for int(h) >= len(b.next) {
		b.next = append(b.next, 0)
		b.live = append(b.live, false)
	}
	b.next[h] = b.nextUse[b.now]
	heap.Push(&b.h, useEntry{next: b.next[h], h: h})
}

func (b *belady) Insert(h policy.Handle, _ policy.Meta) {
	b.set(h)
	b.live[h] = true
	b.n++
}

func (b *belady) Touch(h policy.Handle) { b.set(h) }

func (b *belady) Remove(h policy.Handle) {
	b.live[h] = false
	b.n--
}

func (b *belady) Victim(evictable func(policy.Handle) bool) (policy.Handle, bool) {
	defer func() {
		for _, e := range b.skipped {
			heap.Push(&b.h, e)
		}
		b.skipped = b.skipped[:0]
	}()
	for b.h.Len() > 0 {
		e := b.h[0]
		if !b.live[e.h] || b.next[e.h] != e.next {
			heap.Pop(&b.h) // stale entry
			continue
		}
		if evictable != nil && !evictable(e.h) {
			b.skipped = append(b.skipped, heap.Pop(&b.h).(useEntry))
			continue
		}
		return e.h, true
	}
	return 0, false
}

func (b *belady) Len() int { return b.n }

type useEntry struct {
	next int
	h    policy.Handle
}

// useHeap is a max-heap on next use.
type useHeap []useEntry

func (u useHeap) Len() int           { return len(u) }
func (u useHeap) Less(i, j int) bool { return u[i].next > u[j].next }
func (u useHeap) Swap(i, j int)      { u[i], u[j] = u[j], u[i] }
func (u *useHeap) Push(x any)        { *u = append(*u, x.(useEntry)) }
func (u *useHeap) Pop() any {
	old := *u
	e := old[len(old)-1]
	*u = old[:len(old)-1]
	return e
}
