package policy

import "github.com/ctxtier/ctxtier/ctxstore/block"

// The two segments of a priority class in Segmented and Window, and the
// per-block flags they share.
const (
	segEntry = 0 // where new blocks enter: Segmented's probation, Window's window
	segMain  = 1 // where hit blocks live: Segmented's protected, Window's main

	flagMain      = 1 << 0 // in segMain (else segEntry)
	flagHasChild  = 1 << 1 // the next operation extended the block's chain
	flagHasParent = 1 << 2 // Meta.HasParent
	flagHit       = 1 << 3 // touched since insertion (Window)
)

// segments is the block state that Segmented and Window share: two recency
// lists (entry and main) per priority class over handles, and per block its
// class, flags and the fingerprints of its own and its parent's hash, by
// which a policy recognises a chain walk. Per block it costs 18 bytes (two
// 32-bit links, two 32-bit fingerprints, the class and the flags).
type segments struct {
	lists  handleLists // list of class c, segment g: 2c+g
	fp     []uint32    // fingerprint of the block's hash
	pfp    []uint32    // fingerprint of its parent's hash (0 without parent)
	class  []uint8
	flags  []uint8
	perSeg [2]int // blocks in each segment, over all classes
}

func newSegments(expectedBlocks int) segments {
	return segments{
		lists: newHandleLists(expectedBlocks),
		fp:    make([]uint32, 0, expectedBlocks),
		pfp:   make([]uint32, 0, expectedBlocks),
		class: make([]uint8, 0, expectedBlocks),
		flags: make([]uint8, 0, expectedBlocks),
	}
}

func (s *segments) grow(h Handle) {
	s.lists.grow(h)
	for int(h) >= len(s.fp) {
		s.fp = append(s.fp, 0)
		s.pfp = append(s.pfp, 0)
		s.class = append(s.class, 0)
		s.flags = append(s.flags, 0)
	}
}

// reset makes room for h and sets its class, fingerprints and the
// flagHasParent flag from m (its other flags cleared: segEntry, no child,
// no hit); h is not linked.
func (s *segments) reset(h Handle, m Meta) uint32 {
	s.grow(h)
	u := uint32(h)
	s.class[u] = min(m.Priority, block.MaxPriority)
	s.flags[u] = 0
	s.fp[u] = fingerprint(m.Hash)
	s.pfp[u] = 0
	if m.HasParent {
		s.flags[u] |= flagHasParent
		s.pfp[u] = fingerprint(m.Parent)
	}
	return u
}

// fingerprint is a 32-bit digest of a block hash; the policy compares a
// block's parent fingerprint with the previous block's own to recognise a
// chain walk, which survives eviction and handle reuse where a stored parent
// handle would go stale.
func fingerprint(hash uint64) uint32 {
	h := hash * 0x9E3779B97F4A7C15
	return uint32(h >> 32)
}

func (s *segments) seg(h uint32) int { return int(s.flags[h] & flagMain) }

func (s *segments) setSeg(h uint32, g int) {
	s.flags[h] = s.flags[h]&^flagMain | uint8(g)
}

// list is the list of class c, segment g.
func list(c uint8, g int) int { return 2*int(c) + g }

// extends reports whether h's parent is the block of last, the previous
// operation.
func (s *segments) extends(h, last uint32) bool {
	return last != nilHandle && last != h && s.flags[h]&flagHasParent != 0 && s.pfp[h] == s.fp[last]
}

func (s *segments) unlink(h uint32) {
	g := s.seg(h)
	s.lists.unlink(list(s.class[h], g), h)
	s.perSeg[g]--
}

// link adds h to its segment's list: at the front, at the back, or right
// after a.
func (s *segments) link(h uint32, after uint32, atBack bool) {
	g := s.seg(h)
	i := list(s.class[h], g)
	switch {
	case after != nilHandle:
		s.lists.insertAfter(i, h, after)
	case atBack:
		s.lists.pushBack(i, h)
	default:
		s.lists.pushFront(i, h)
	}
	s.perSeg[g]++
}

// count is the number of blocks of class c in segment g.
func (s *segments) count(c, g int) int { return s.lists.count[2*c+g] }

// tail is the least recent block of class c in segment g, or nilHandle.
func (s *segments) tail(c, g int) uint32 { return s.lists.tail[2*c+g] }

// scan returns the least recent block of class c, segment g, that
// evictable accepts; see handleLists.scan.
func (s *segments) scan(c, g int, evictable func(Handle) bool) (Handle, bool) {
	return s.lists.scan(2*c+g, evictable)
}
