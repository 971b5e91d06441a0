package policy

import "github.com/ctxtier/ctxtier/ctxstore/block"

const nilHandle = ^uint32(0)

// LRU evicts the least recently used block of the lowest priority class.
// Per block it keeps 9 bytes (two 32-bit links and the class); every
// operation is O(1) except Victim, which is O(skipped) when it meets blocks
// that are not evictable (they are moved to the front of their class, as if
// used, so a pinned block is not rescanned on every eviction).
type LRU struct {
	prev, next []uint32
	class      []uint8
	head, tail [block.MaxPriority + 1]uint32 // head = most recent
	count      [block.MaxPriority + 1]int
	n          int
}

// NewLRU returns an empty LRU policy.
func NewLRU(expectedBlocks int) Policy {
	l := &LRU{
		prev:  make([]uint32, 0, expectedBlocks),
		next:  make([]uint32, 0, expectedBlocks),
		class: make([]uint8, 0, expectedBlocks),
	}
	for i := range l.head {
		l.head[i], l.tail[i] = nilHandle, nilHandle
	}
	return l
}

func (l *LRU) grow(h Handle) {
	for int(h) >= len(l.prev) {
		l.prev = append(l.prev, nilHandle)
		l.next = append(l.next, nilHandle)
		l.class = append(l.class, 0)
	}
}

func (l *LRU) pushFront(h uint32) {
	c := l.class[h]
	l.prev[h] = nilHandle
	l.next[h] = l.head[c]
	if l.head[c] != nilHandle {
		l.prev[l.head[c]] = h
	}
	l.head[c] = h
	if l.tail[c] == nilHandle {
		l.tail[c] = h
	}
}

func (l *LRU) unlink(h uint32) {
	c := l.class[h]
	p, n := l.prev[h], l.next[h]
	if p != nilHandle {
		l.next[p] = n
	} else {
		l.head[c] = n
	}
	if n != nilHandle {
		l.prev[n] = p
	} else {
		l.tail[c] = p
	}
	l.prev[h], l.next[h] = nilHandle, nilHandle
}

// Insert implements Policy.
func (l *LRU) Insert(h Handle, m Meta) {
	l.grow(h)
	l.class[h] = min(m.Priority, block.MaxPriority)
	l.pushFront(uint32(h))
	l.count[l.class[h]]++
	l.n++
}

// Touch implements Policy.
func (l *LRU) Touch(h Handle) {
	if l.head[l.class[h]] == uint32(h) {
		return
	}
	l.unlink(uint32(h))
	l.pushFront(uint32(h))
}

// Remove implements Policy.
func (l *LRU) Remove(h Handle) {
	l.unlink(uint32(h))
	l.count[l.class[h]]--
	l.n--
}

// Victim implements Policy.
func (l *LRU) Victim(evictable func(Handle) bool) (Handle, bool) {
	for c := range l.tail {
		// Look at each block of the class at most once: a skipped tail is
		// moved to the front, so the next tail is the next candidate.
		for range l.count[c] {
			h := l.tail[c]
			if evictable == nil || evictable(Handle(h)) {
				return Handle(h), true
			}
			l.unlink(h)
			l.pushFront(h)
		}
	}
	return 0, false
}

// Len implements Policy.
func (l *LRU) Len() int { return l.n }
