package policy

import "github.com/ctxtier/ctxtier/ctxstore/block"

// LRU evicts the least recently used block of the lowest priority class.
// Per block it keeps 9 bytes (two 32-bit links and the class); every
// operation is O(1) except Victim, which is O(skipped) when it meets blocks
// that are not evictable (they are moved to the front of their class, as if
// used, so a pinned block is not rescanned on every eviction).
type LRU struct {
	lists handleLists // one list per priority class, head = most recent
	class []uint8
	n     int
}

// NewLRU returns an empty LRU policy.
func NewLRU(expectedBlocks int) Policy {
	return &LRU{
		lists: newHandleLists(expectedBlocks),
		class: make([]uint8, 0, expectedBlocks),
	}
}

func (l *LRU) grow(h Handle) {
	l.lists.grow(h)
	for int(h) >= len(l.class) {
		l.class = append(l.class, 0)
	}
}

// Insert implements Policy.
func (l *LRU) Insert(h Handle, m Meta) {
	l.grow(h)
	c := min(m.Priority, block.MaxPriority)
	l.class[h] = c
	l.lists.pushFront(int(c), uint32(h))
	l.n++
}

// Touch implements Policy.
func (l *LRU) Touch(h Handle) {
	c := int(l.class[h])
	if l.lists.head[c] == uint32(h) {
		return
	}
	l.lists.unlink(c, uint32(h))
	l.lists.pushFront(c, uint32(h))
}

// Remove implements Policy.
func (l *LRU) Remove(h Handle) {
	l.lists.unlink(int(l.class[h]), uint32(h))
	l.n--
}

// Victim implements Policy.
func (l *LRU) Victim(evictable func(Handle) bool) (Handle, bool) {
	for c := range block.MaxPriority + 1 {
		if l.lists.count[c] == 0 {
			continue
		}
		if h, ok := l.lists.scan(c, evictable); ok {
			return h, true
		}
	}
	return 0, false
}

// Len implements Policy.
func (l *LRU) Len() int { return l.n }
