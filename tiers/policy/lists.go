package policy

import "github.com/ctxtier/ctxtier/ctxstore/block"

const nilHandle = ^uint32(0)

// maxLists is the most lists one handleLists holds: two segments for each
// priority class (Segmented and Window); LRU uses one per class, S3-FIFO two.
const maxLists = 2 * (block.MaxPriority + 1)

// handleLists is a set of intrusive doubly linked lists whose nodes are
// policy handles: two 32-bit links per handle in handle-indexed arrays, and
// per list its head (the most recent end), tail and length. A handle is in
// at most one list; the caller knows which (the lists do not store it), and
// every method that takes a list must be given the handle's own.
type handleLists struct {
	prev, next []uint32
	head, tail [maxLists]uint32
	count      [maxLists]int
}

// newHandleLists returns empty lists with room for expectedBlocks handles.
func newHandleLists(expectedBlocks int) handleLists {
	l := handleLists{
		prev: make([]uint32, 0, expectedBlocks),
		next: make([]uint32, 0, expectedBlocks),
	}
	for i := range l.head {
		l.head[i], l.tail[i] = nilHandle, nilHandle
	}
	return l
}

// grow makes room for handle h; the caller grows its own per-handle arrays.
func (l *handleLists) grow(h Handle) {
	for int(h) >= len(l.prev) {
		l.prev = append(l.prev, nilHandle)
		l.next = append(l.next, nilHandle)
	}
}

// pushFront links h at the head of list i.
func (l *handleLists) pushFront(i int, h uint32) {
	f := l.head[i]
	l.prev[h], l.next[h] = nilHandle, f
	if f != nilHandle {
		l.prev[f] = h
	} else {
		l.tail[i] = h
	}
	l.head[i] = h
	l.count[i]++
}

// pushBack links h at the tail of list i.
func (l *handleLists) pushBack(i int, h uint32) {
	t := l.tail[i]
	l.prev[h], l.next[h] = t, nilHandle
	if t != nilHandle {
		l.next[t] = h
	} else {
		l.head[i] = h
	}
	l.tail[i] = h
	l.count[i]++
}

// insertAfter links h right behind a, which is in list i.
func (l *handleLists) insertAfter(i int, h, a uint32) {
	n := l.next[a]
	l.prev[h], l.next[h] = a, n
	l.next[a] = h
	if n != nilHandle {
		l.prev[n] = h
	} else {
		l.tail[i] = h
	}
	l.count[i]++
}

// unlink takes h out of list i.
func (l *handleLists) unlink(i int, h uint32) {
	p, n := l.prev[h], l.next[h]
	if p != nilHandle {
		l.next[p] = n
	} else {
		l.head[i] = n
	}
	if n != nilHandle {
		l.prev[n] = p
	} else {
		l.tail[i] = p
	}
	l.prev[h], l.next[h] = nilHandle, nilHandle
	l.count[i]--
}

// scan looks at each block of list i at most once, from the tail, and
// returns the first that evictable accepts (any block when evictable is
// nil). A block refused is moved to the head, as if used, so a pinned block
// is not rescanned on every eviction and the next tail is the next
// candidate.
func (l *handleLists) scan(i int, evictable func(Handle) bool) (Handle, bool) {
	for range l.count[i] {
		h := l.tail[i]
		if evictable == nil || evictable(Handle(h)) {
			return Handle(h), true
		}
		l.unlink(i, h)
		l.pushFront(i, h)
	}
	return 0, false
}
