package dram

import "math/bits"

// allocator hands out contiguous runs of pages from the arena. Free space is
// kept as extents, coalesced with their neighbours on free, and indexed by
// size class (floor(log2(pages))) for good-fit allocation in O(1) for all but
// the smallest fitting class, which is scanned a bounded number of entries
// (the TLSF idea). Blocks of one size, the usual case since a namespace fixes
// its KV layout, never fragment: a freed block leaves a hole of exactly the
// size the next one needs.
type allocator struct {
	npages    uint32
	freePages uint32
	byStart   map[uint32]uint32 // start page → length in pages
	byEnd     map[uint32]uint32 // end page (exclusive) → start page
	classes   [33][]uint32      // size class → starts of free extents
	pos       map[uint32]int    // start → index in its class slice
}

// scanLimit bounds the search of the first class, whose extents may be too small.
const scanLimit = 32

func newAllocator(npages uint32) *allocator {
	a := &allocator{
		npages:  npages,
		byStart: make(map[uint32]uint32),
		byEnd:   make(map[uint32]uint32),
		pos:     make(map[uint32]int),
	}
	if npages > 0 {
		a.insert(0, npages)
	}
	return a
}

func class(n uint32) int { return bits.Len32(n) - 1 }

func (a *allocator) insert(start, n uint32) {
	a.byStart[start] = n
	a.byEnd[start+n] = start
	c := class(n)
	a.pos[start] = len(a.classes[c])
	a.classes[c] = append(a.classes[c], start)
	a.freePages += n
}

func (a *allocator) remove(start, n uint32) {
	delete(a.byStart, start)
	delete(a.byEnd, start+n)
	c := class(n)
	i := a.pos[start]
	last := len(a.classes[c]) - 1
	moved := a.classes[c][last]
	a.classes[c][i] = moved
	a.pos[moved] = i
	a.classes[c] = a.classes[c][:last]
	delete(a.pos, start)
	a.freePages -= n
}

// alloc returns the first page of a free run of n pages, or false.
func (a *allocator) alloc(n uint32) (uint32, bool) {
	if n == 0 || n > a.freePages {
		return 0, false
	}
	c := class(n)
	// Smallest class may hold extents shorter than n: scan a few, best fit.
	best, bestLen := uint32(0), uint32(0)
	for i, s := range a.classes[c] {
		if i >= scanLimit {
			break
		}
		if l := a.byStart[s]; l >= n && (bestLen == 0 || l < bestLen) {
			best, bestLen = s, l
			if l == n {
				break
			}
		}
	}
	if bestLen == 0 {
		for k := c + 1; k < len(a.classes); k++ {
			if m := len(a.classes[k]); m > 0 {
				best = a.classes[k][m-1]
				bestLen = a.byStart[best]
				break
			}
		}
	}
	if bestLen == 0 {
		return 0, false
	}
	a.remove(best, bestLen)
	if bestLen > n {
		a.insert(best+n, bestLen-n)
	}
	return best, true
}

// free returns a run to the free space, merging it with free neighbours.
func (a *allocator) free(start, n uint32) {
	if ls, ok := a.byEnd[start]; ok {
		ln := a.byStart[ls]
		a.remove(ls, ln)
		start, n = ls, n+ln
	}
	if rn, ok := a.byStart[start+n]; ok {
		a.remove(start+n, rn)
		n += rn
	}
	a.insert(start, n)
}

// largestFree is the longest free run, in pages (for stats and tests).
func (a *allocator) largestFree() uint32 {
	for k := len(a.classes) - 1; k >= 0; k-- {
		var m uint32
		for _, s := range a.classes[k] {
			m = max(m, a.byStart[s])
		}
		if m > 0 {
			return m
		}
	}
	return 0
}
