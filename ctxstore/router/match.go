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
//
// After a walk: first is the bitset of workers holding the first block
// (words [lo0, hi0), matched of them). Without a limit (or with fewer than
// n matched) depth holds every one of them's depths. With a limit, limited
// is set and cand[l] (words [clo, chi)) is live[l] after the last position
// where at least n workers still matched: every worker of the answer is in
// cand[Disk], at depth cut or more. over holds those deeper than cut (above
// of them, fewer than n): they are all in the answer, with their depths in
// depth. The others are at exactly cut on the levels where cand[l] has them,
// and at depth[l] on the others; they fill the remaining places in worker
// order. Workers that cannot make the answer get no depth written.
type scratch struct {
	live     [NumMedia][]uint32
	have     [NumMedia][]uint32
	first    []uint32
	cand     [NumMedia][]uint32
	over     []uint32
	depth    [][NumMedia]uint32
	lo0, hi0 int
	clo, chi int
	matched  int
	limited  bool
	cut      int
	above    int
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
		s.over = make([]uint32, n)
		for l := range NumMedia {
			s.cand[l] = make([]uint32, n)
		}
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
// hashes, with its matched depths, and returns dst. It is MatchN with no
// limit.
func (idx *Index) Match(hashes []uint64, dst []Match) []Match {
	return idx.MatchN(hashes, 0, dst)
}

// MatchN appends to dst the n workers (n <= 0: all) with the deepest match
// (Depth[Disk]) among those holding at least the first block of hashes, in
// worker order, and returns dst. Among workers tied at the cut-off depth the
// earliest registered are taken. A block shared by many workers (a system
// prompt) so costs O(n) answer entries, not O(workers), and the walk records
// depths only for workers that can still make the answer.
func (idx *Index) MatchN(hashes []uint64, n int, dst []Match) []Match {
	ws := *idx.workers.Load()
	sc := idx.walk(hashes, ws, n)
	if sc == nil {
		return dst
	}
	if !sc.limited {
		for k := sc.lo0; k < sc.hi0; k++ {
			for b := sc.first[k]; b != 0; b &= b - 1 {
				id := k<<5 | bits.TrailingZeros32(b)
				d := &sc.depth[id]
				dst = appendMatch(dst, ws, id, [NumMedia]int{int(d[0]), int(d[1]), int(d[2])})
			}
		}
		idx.pool.Put(sc)
		return dst
	}
	quota := n - sc.above
	for k := sc.clo; k < sc.chi; k++ {
		over := sc.over[k]
		for b := sc.cand[Disk][k]; b != 0; b &= b - 1 {
			bit := b & -b
			id := k<<5 | bits.TrailingZeros32(b)
			d := &sc.depth[id]
			if over&bit != 0 {
				dst = appendMatch(dst, ws, id, [NumMedia]int{int(d[0]), int(d[1]), int(d[2])})
				continue
			}
			if quota == 0 {
				continue
			}
			quota--
			var depth [NumMedia]int
			for l := range NumMedia {
				if sc.cand[l][k]&bit != 0 {
					depth[l] = sc.cut
				} else {
					depth[l] = int(d[l])
				}
			}
			dst = appendMatch(dst, ws, id, depth)
		}
	}
	idx.pool.Put(sc)
	return dst
}

func appendMatch(dst []Match, ws []*workerState, id int, depth [NumMedia]int) []Match {
	w := ws[id]
	return append(dst, Match{Worker: w.name, Depth: depth, Stale: w.stale.Load(), id: uint32(id)})
}

// depthOf is worker id's matched depths after a walk without a limit (zero
// if it does not hold the first block).
func (s *scratch) depthOf(id int) [NumMedia]int {
	if k := id >> 5; k < s.lo0 || k >= s.hi0 || s.first[k]&(1<<(id&31)) == 0 {
		return [NumMedia]int{}
	}
	d := &s.depth[id]
	return [NumMedia]int{int(d[0]), int(d[1]), int(d[2])}
}

// walk matches hashes against the index for workers ws and returns the
// scratch holding the result (the caller puts it back in idx.pool), or nil
// when nothing can match. It walks the positions in order under one shard
// read lock each, intersecting worker bitsets, and stops when no worker
// still matches. With n > 0, while at least n workers still match, the
// workers dropping out cannot be among the n deepest: their depths are not
// recorded, and the survivors are kept as the candidate set instead.
func (idx *Index) walk(hashes []uint64, ws []*workerState, n int) *scratch {
	if len(hashes) == 0 || len(ws) == 0 {
		return nil
	}
	nw := (len(ws) + 31) / 32
	sc := idx.pool.Get().(*scratch)
	sc.grow(len(ws))
	W := uint32(len(ws))
	walked := len(hashes)
	// [lo, hi) is the word range that can still hold live workers; it is
	// set at position 0 and only shrinks, so sparse matches among many
	// workers touch few words.
	lo, hi := 0, nw
	sc.lo0, sc.hi0, sc.matched = 0, 0, 0
	sc.cut, sc.above, sc.limited = 0, 0, false
	var inline [inlineSlots]uint32
	alive := 0 // workers matching so far (an upper bound once below n)

	for i, h := range hashes {
		pos := uint32(i)
		s := idx.shardFor(h, pos)
		rlockSpin(&s.mu)
		var hs []uint32
		if j := s.t.find(h, pos); j >= 0 {
			hs = s.t.holders(&s.t.slots[j], &inline)
		}
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
		// How many still match after this position decides whether the
		// workers dropping here can be in the answer. Once fewer than n
		// match, fewer always will: no need to count again.
		if i == 0 || (n > 0 && alive >= n) {
			alive = 0
			for k := lo; k < hi; k++ {
				lvd := word(hv[Device], k) | word(hv[Host], k) | word(hv[Disk], k)
				if i > 0 {
					lvd &= sc.live[Disk][k]
				} else if k == nw-1 && W&31 != 0 {
					lvd &= 1<<(W&31) - 1 // workers registered after ws was loaded
				}
				alive += bits.OnesCount32(lvd)
			}
		}
		record := n <= 0 || alive < n
		// Just after the snapshot, the workers dropping out are at depth cut:
		// MatchN reads that from cand, so only the others need writes.
		transition := sc.limited && sc.cut == i
		full := record && !transition
		nlo, nhi := hi, lo
		for k := lo; k < hi; k++ {
			d, hh, dk := word(hv[Device], k), word(hv[Host], k), word(hv[Disk], k)
			lv := [NumMedia]uint32{d, d | hh, d | hh | dk}
			if i == 0 {
				if k == nw-1 && W&31 != 0 {
					for l := range lv {
						lv[l] &= 1<<(W&31) - 1
					}
				}
				for l := range NumMedia {
					sc.live[l][k] = lv[l]
					// Not on this level at all: depth 0 there.
					for b := lv[Disk] &^ lv[l]; b != 0; b &= b - 1 {
						sc.depth[k<<5|bits.TrailingZeros32(b)][l] = 0
					}
				}
			} else {
				keep := sc.live[Disk][k] & lv[Disk] // still matching on some medium
				for l := range NumMedia {
					old := sc.live[l][k]
					cur := old & lv[l]
					gone := old &^ cur
					if !full {
						gone &= keep
					}
					for ; gone != 0; gone &= gone - 1 {
						sc.depth[k<<5|bits.TrailingZeros32(gone)][l] = pos
					}
					sc.live[l][k] = cur
				}
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
			sc.lo0, sc.hi0, sc.matched = lo, hi, alive
			if lo < hi {
				copy(sc.first[lo:hi], sc.live[Disk][lo:hi])
			}
		}
		if !record {
			// At least n match beyond this position: they are the candidates.
			sc.limited = true
			sc.clo, sc.chi, sc.cut = nlo, nhi, i+1
			for l := range NumMedia {
				copy(sc.cand[l][nlo:nhi], sc.live[l][nlo:nhi])
			}
			clear(sc.over[nlo:nhi])
		} else if transition {
			sc.above = alive
			copy(sc.over[sc.clo:sc.chi], sc.live[Disk][sc.clo:sc.chi])
		}
		if nlo >= nhi {
			walked = -1 // everyone's depth was set when they dropped
			break
		}
		lo, hi = nlo, nhi
	}
	if walked > 0 && !(sc.limited && sc.cut == walked) {
		// The workers matching every position: depth walked where still
		// live. (When n or more did, they are the candidates at depth cut.)
		for l := range NumMedia {
			for k := lo; k < hi; k++ {
				for b := sc.live[l][k]; b != 0; b &= b - 1 {
					sc.depth[k<<5|bits.TrailingZeros32(b)][l] = uint32(walked)
				}
			}
		}
	}
	return sc
}
