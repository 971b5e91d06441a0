package dram

import (
	"math/rand/v2"
	"testing"
)

func TestAllocatorCoalesces(t *testing.T) {
	a := newAllocator(100)
	var starts []uint32
	for range 10 {
		s, ok := a.alloc(10)
		if !ok {
			t.Fatal("alloc failed")
		}
		starts = append(starts, s)
	}
	if _, ok := a.alloc(1); ok {
		t.Fatal("arena is full")
	}
	// Free every other run, then the rest: everything must merge back to one extent.
	for i := 0; i < 10; i += 2 {
		a.free(starts[i], 10)
	}
	if _, ok := a.alloc(11); ok {
		t.Fatal("no 11-page hole should exist")
	}
	for i := 1; i < 10; i += 2 {
		a.free(starts[i], 10)
	}
	if a.freePages != 100 || len(a.byStart) != 1 || a.largestFree() != 100 {
		t.Fatalf("not coalesced: free=%d extents=%d", a.freePages, len(a.byStart))
	}
}

func TestAllocatorRandomInvariant(t *testing.T) {
	const n = 4096
	a := newAllocator(n)
	owner := make([]int, n) // 0 free, else allocation id
	type run struct{ s, l uint32 }
	live := map[int]run{}
	r := rand.New(rand.NewPCG(3, 4))
	for id := 1; id < 20000; id++ {
		if r.IntN(2) == 0 && len(live) > 0 {
			for k, v := range live {
				a.free(v.s, v.l)
				for p := v.s; p < v.s+v.l; p++ {
					owner[p] = 0
				}
				delete(live, k)
				break
			}
			continue
		}
		l := uint32(1 + r.IntN(64))
		s, ok := a.alloc(l)
		if !ok {
			continue
		}
		for p := s; p < s+l; p++ {
			if owner[p] != 0 {
				t.Fatalf("page %d handed out twice", p)
			}
			owner[p] = id
		}
		live[id] = run{s, l}
	}
	var used uint32
	for _, v := range live {
		used += v.l
	}
	if used+a.freePages != n {
		t.Fatalf("accounting: used %d + free %d != %d", used, a.freePages, n)
	}
}
