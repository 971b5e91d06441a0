package policy

// shadow is a metadata-only cache: it replays an access stream through its
// own policy at a fixed capacity in blocks, holding block hashes and no
// data, and counts the prefix hits it would have had. Duel runs one per
// candidate policy to measure which of them the real cache should follow.
//
// Per block of capacity it keeps its policy's state, a map entry and the
// block's hash (about 60 bytes with a Go map). Access is O(1) amortised.
type shadow struct {
	p        Policy
	slot     map[uint64]Handle
	hash     []uint64 // handle -> block hash
	free     []Handle
	capacity int
	// lastHit is whether the previous access counted as a prefix hit.
	lastHit bool
}

func newShadow(f Factory, capacity int) *shadow {
	return &shadow{
		p:        f(capacity),
		slot:     make(map[uint64]Handle, capacity),
		hash:     make([]uint64, 0, capacity),
		capacity: max(capacity, 1),
	}
}

// resize sets the capacity, evicting down to it when it shrinks.
func (s *shadow) resize(capacity int) {
	s.capacity = max(capacity, 1)
	for len(s.slot) > s.capacity {
		if !s.evict() {
			return
		}
	}
}

func (s *shadow) evict() bool {
	v, ok := s.p.Victim(nil)
	if !ok {
		return false
	}
	s.p.Remove(v)
	delete(s.slot, s.hash[v])
	s.free = append(s.free, v)
	return true
}

// access replays one access of the block m names and reports whether it is
// a prefix hit: resident, and either the head of a chain walk or the child
// of the previous access, which was a prefix hit too (chained reports that
// the previous access was m's parent).
func (s *shadow) access(m Meta, chained bool) bool {
	h, resident := s.slot[m.Hash]
	hit := resident && (!m.HasParent || chained && s.lastHit)
	s.lastHit = hit
	if resident {
		s.p.Touch(h)
		return hit
	}
	if len(s.slot) >= s.capacity && !s.evict() {
		return false
	}
	if n := len(s.free); n > 0 {
		h = s.free[n-1]
		s.free = s.free[:n-1]
	} else {
		h = Handle(len(s.hash))
		s.hash = append(s.hash, 0)
	}
	s.hash[h] = m.Hash
	s.slot[m.Hash] = h
	s.p.Insert(h, m)
	return false
}
