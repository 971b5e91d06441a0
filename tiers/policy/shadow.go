package policy

// shadow is a metadata-only cache: it replays an access stream through its
// own policy at a fixed capacity in blocks, holding block hashes and no
// data, and counts the prefix hits it would have had. Duel runs one per
// candidate policy to measure which of them the real cache should follow.
//
// Per block of capacity it keeps its policy's state, a map entry, the
// block's hash and a flag (about 60 bytes with a Go map). Access is O(1) amortised.
type shadow struct {
	p    Policy
	slot map[uint64]Handle
	hash []uint64 // handle -> block hash
	// prefix is, per handle, whether the block's latest access counted as
	// a prefix hit.
	prefix   []bool
	free     []Handle
	capacity int
}

// newShadow returns a shadow holding at most capacity blocks, its policy
// built for expectedBlocks.
func newShadow(f Factory, expectedBlocks, capacity int) *shadow {
	return &shadow{
		p:        f(expectedBlocks),
		slot:     make(map[uint64]Handle, expectedBlocks),
		hash:     make([]uint64, 0, expectedBlocks),
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
// of a resident block whose latest access was a prefix hit. The parent's
// latest access rather than the previous operation: a tier sees a
// request's hits (reads, in order) before its misses (puts), so a block
// the real cache misses reaches the shadow after its request's later
// hits; in the simulator, where the parent is always the previous access,
// the two rules agree. The rule is approximate in a tier's order: a parent
// that was a miss at its latest access does not count until it is hit.
func (s *shadow) access(m Meta) bool {
	h, resident := s.slot[m.Hash]
	hit := resident && !m.HasParent
	if resident && m.HasParent {
		p, ok := s.slot[m.Parent]
		hit = ok && s.prefix[p]
	}
	if resident {
		s.prefix[h] = hit
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
		s.prefix = append(s.prefix, false)
	}
	s.hash[h] = m.Hash
	s.prefix[h] = false
	s.slot[m.Hash] = h
	s.p.Insert(h, m)
	return false
}
