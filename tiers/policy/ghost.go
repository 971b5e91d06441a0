package policy

import "math/bits"

// ghostSet remembers the fingerprints of roughly the last `span` blocks
// added to it, without storing keys: two Bloom filters used as
// generations. Adds go to the current generation; when it holds span/2
// entries the previous generation is cleared and the two swap, so a
// fingerprint is remembered for between span/2 and span later adds. With 8
// bits per remembered entry and 3 probes the false-positive rate is about 3%,
// which costs 2 bytes per span entry in all.
//
// Policies use it as the ghost list of ARC / S3-FIFO: "was this block
// evicted recently?" is answered in O(1) for a few bits per block.
type ghostSet struct {
	gen   [2][]uint64
	mask  uint64 // bits per generation - 1
	cur   int
	adds  int
	limit int // adds per generation
}

func newGhostSet(span int) *ghostSet {
	limit := max(span/2, 16)
	nbits := 1 << bits.Len(uint(limit*8-1))
	g := &ghostSet{mask: uint64(nbits - 1), limit: limit}
	for i := range g.gen {
		g.gen[i] = make([]uint64, nbits/64)
	}
	return g
}

// probes derives the three bit positions of a fingerprint (double hashing
// of a 64-bit mix).
func (g *ghostSet) probes(fp uint32) [3]uint64 {
	h := uint64(fp) * 0x9E3779B97F4A7C15
	h ^= h >> 29
	h *= 0xBF58476D1CE4E5B9
	a, b := h, h>>32|1
	return [3]uint64{a & g.mask, (a + b) & g.mask, (a + 2*b) & g.mask}
}

func (g *ghostSet) add(fp uint32) {
	if g.adds >= g.limit {
		g.cur ^= 1
		clear(g.gen[g.cur])
		g.adds = 0
	}
	bs := g.gen[g.cur]
	for _, p := range g.probes(fp) {
		bs[p>>6] |= 1 << (p & 63)
	}
	g.adds++
}

func (g *ghostSet) contains(fp uint32) bool {
	ps := g.probes(fp)
	for _, bs := range g.gen {
		if bs[ps[0]>>6]&(1<<(ps[0]&63)) != 0 && bs[ps[1]>>6]&(1<<(ps[1]&63)) != 0 && bs[ps[2]>>6]&(1<<(ps[2]&63)) != 0 {
			return true
		}
	}
	return false
}
