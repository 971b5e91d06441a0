package router

import "math/bits"

// Match is one worker's matched prefix for a query. Depth is cumulative by
// medium: Depth[Device] leading blocks are on the device, Depth[Host] leading
// blocks are on the device or in host memory, Depth[Disk] leading blocks are
// anywhere on the worker. Device <= Host <= Disk always.
type Match struct {
	Worker string
	Depth  [NumMedia]int
	Stale  bool
	id     uint32
}

// scratch is a query's working state, reused through a pool so that a query
// allocates nothing. live[l] is the bitset of workers whose prefix still
// matches at cumulative level l; have is the per-medium bitset of one
// position's list-form holders, zero between uses.
type scratch struct {
	live  [NumMedia][]uint32
	have  [NumMedia][]uint32
	first []uint32
	depth [][NumMedia]uint32
}

func (s *scratch) grow(workers int) {
	nw := (workers + 31) / 32
	if len(s.first) < nw {
		n := max(nw, 2*len(s.first))
		for l := range NumMedia {
			s.live[l] = make([]uint32, n)
			s.have[l] = make([]uint32, n)
		}
		s.first = make([]uint32, n)
	}
	if len(s.depth) < workers {
		s.depth = make([][NumMedia]uint32, max(workers, 2*len(s.depth)))
	}
}

// word returns word k of a bitset slice, 0 past its end.
func word(b []uint32, k int) uint32 {
	if k < len(b) {
		return b[k]
	}
	return 0
}

// Match appends to dst every worker holding at least the first block of
// hashes, with its matched depths, and returns dst. It walks the positions in
// order under one shard read lock each, intersecting worker bitsets, and stops
// when no worker still matches.
func (idx *Index) Match(hashes []uint64, dst []Match) []Match {
	if len(hashes) == 0 {
		return dst
	}
	ws := *idx.workers.Load()
	nw := (len(ws) + 31) / 32
	if nw == 0 {
		return dst
	}
	sc := idx.pool.Get().(*scratch)
	sc.grow(len(ws))
	W := uint32(len(ws))
	walked := len(hashes)
	// [lo, hi) is the word range that can still hold live workers; it is
	// set at position 0 and only shrinks, so sparse matches among many
	// workers touch few words.
	lo, hi := 0, nw
	lo0, hi0 := 0, 0

	for i, h := range hashes {
		pos := uint32(i)
		s := idx.shardFor(h, pos)
		s.mu.RLock()
		hs := s.m[posKey{h, pos}]
		var hv [NumMedia][]uint32
		list := !isBits(hs)
		if list {
			if i == 0 {
				lo, hi = nw, 0
			}
			for _, x := range hs {
				if w := x >> 2; w < W {
					sc.have[x&3][w>>5] |= 1 << (w & 31)
					if i == 0 {
						lo, hi = min(lo, int(w>>5)), max(hi, int(w>>5)+1)
					}
				}
			}
			for m := range NumMedia {
				hv[m] = sc.have[m][:nw]
			}
		} else {
			hnw := bitsWords(hs)
			for m := range int(NumMedia) {
				hv[m] = hs[2+m*hnw : 2+m*hnw+min(hnw, nw)]
			}
		}
		nlo, nhi := hi, lo
		for k := lo; k < hi; k++ {
			d, hh, dk := word(hv[Device], k), word(hv[Host], k), word(hv[Disk], k)
			lv := [NumMedia]uint32{d, d | hh, d | hh | dk}
			if i == 0 {
				for b := lv[Disk]; b != 0; b &= b - 1 {
					sc.depth[k<<5|bits.TrailingZeros32(b)] = [NumMedia]uint32{}
				}
			}
			for l := range NumMedia {
				if i == 0 {
					sc.live[l][k] = lv[l]
					continue
				}
				old := sc.live[l][k]
				cur := old & lv[l]
				for gone := old &^ cur; gone != 0; gone &= gone - 1 {
					sc.depth[k<<5|bits.TrailingZeros32(gone)][l] = pos
				}
				sc.live[l][k] = cur
			}
			if sc.live[Disk][k] != 0 {
				nlo, nhi = min(nlo, k), max(nhi, k+1)
			}
		}
		if list {
			for _, x := range hs {
				if w := x >> 2; w < W {
					sc.have[x&3][w>>5] = 0
				}
			}
		}
		s.mu.RUnlock()
		if i == 0 {
			lo0, hi0 = lo, hi
			if lo < hi {
				copy(sc.first[lo:hi], sc.live[Disk][lo:hi])
			}
		}
		if nlo >= nhi {
			walked = -1 // everyone's depth was set when they dropped
			break
		}
		lo, hi = nlo, nhi
	}
	if walked > 0 {
		for l := range NumMedia {
			for k := lo; k < hi; k++ {
				for b := sc.live[l][k]; b != 0; b &= b - 1 {
					sc.depth[k<<5|bits.TrailingZeros32(b)][l] = uint32(walked)
				}
			}
		}
	}
	for k := lo0; k < hi0; k++ {
		for b := sc.first[k]; b != 0; b &= b - 1 {
			id := k<<5 | bits.TrailingZeros32(b)
			d := &sc.depth[id]
			w := ws[id]
			dst = append(dst, Match{
				Worker: w.name,
				Depth:  [NumMedia]int{int(d[0]), int(d[1]), int(d[2])},
				Stale:  w.stale.Load(),
				id:     uint32(id),
			})
		}
	}
	idx.pool.Put(sc)
	return dst
}
