package router

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPtableAgainstMap drives a position table and a map of holder sets with
// the same random adds and removes over a small key space (long probe runs,
// wrap-around, growth and shrinking, inline and ext sets in both forms).
func TestPtableAgainstMap(t *testing.T) {
	type key struct {
		h   uint64
		pos uint32
	}
	for _, tc := range []struct {
		name           string
		keys, holders  int
		steps, addPerc int
	}{
		{"few holders", 300, 4, 20000, 60},
		{"many holders", 40, 60, 20000, 60},
		{"drain", 200, 20, 20000, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(tc.keys)))
			var pt ptable
			ref := map[key]map[holder]bool{}
			for step := range tc.steps {
				k := key{uint64(rng.IntN(tc.keys)) * 0x10001, uint32(rng.IntN(3))}
				x := mkHolder(uint32(rng.IntN(tc.holders)), Medium(rng.IntN(int(NumMedia))))
				if rng.IntN(100) < tc.addPerc {
					if ref[k][x] {
						continue
					}
					isNew := pt.add(k.h, k.pos, x)
					if isNew != (ref[k] == nil) {
						t.Fatalf("step %d: add new=%v, ref has key=%v", step, isNew, ref[k] != nil)
					}
					if ref[k] == nil {
						ref[k] = map[holder]bool{}
					}
					ref[k][x] = true
				} else {
					gone := pt.del(k.h, k.pos, x)
					if ref[k] != nil {
						delete(ref[k], x)
						if len(ref[k]) == 0 {
							delete(ref, k)
						}
					}
					if gone != (ref[k] == nil) {
						t.Fatalf("step %d: del gone=%v, ref has key=%v", step, gone, ref[k] != nil)
					}
				}
				if step%97 != 0 {
					continue
				}
				if pt.n != len(ref) {
					t.Fatalf("step %d: %d keys, want %d", step, pt.n, len(ref))
				}
				for k, want := range ref {
					i := pt.find(k.h, k.pos)
					if i < 0 {
						t.Fatalf("step %d: key %v lost", step, k)
					}
					var buf [inlineSlots]uint32
					got := holderList(pt.holders(&pt.slots[i], &buf))
					if !slices.Equal(got, sortedKeys(want)) {
						t.Fatalf("step %d key %v: holders %v want %v", step, k, got, sortedKeys(want))
					}
				}
			}
			if len(ref) == 0 && (pt.n != 0 || len(pt.slots) > ptMinSlots*8) {
				t.Fatalf("drained table kept %d keys, %d slots", pt.n, len(pt.slots))
			}
		})
	}
}

// holderList lists a holder set (either form) sorted.
func holderList(hs []uint32) []uint32 {
	var out []uint32
	if !isBits(hs) {
		out = slices.Clone(hs)
	} else {
		nw := bitsWords(hs)
		for m := range int(NumMedia) {
			for k, w := range hs[2+m*nw : 2+(m+1)*nw] {
				for b := range 32 {
					if w&(1<<b) != 0 {
						out = append(out, mkHolder(uint32(k*32+b), Medium(m)))
					}
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func sortedKeys(m map[holder]bool) []uint32 {
	out := make([]uint32, 0, len(m))
	for x := range m {
		out = append(out, x)
	}
	slices.Sort(out)
	return out
}

// TestWtableAgainstMap drives a worker table and a map with the same random
// puts and deletes.
func TestWtableAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var wt wtable
	ref := map[uint64]wentry{}
	for step := range 30000 {
		// Growing then shrinking key space: exercises resize both ways.
		space := 50 + (step/3000%5)*200
		h := uint64(rng.IntN(space)) << 40
		switch rng.IntN(3) {
		case 0, 1:
			e := wentry{pos: rng.Uint32(), seq: uint32(step) & seqMask, media: uint8(1 + rng.IntN(7))}
			wt.put(h, e)
			ref[h] = e
		case 2:
			wt.del(h)
			delete(ref, h)
		}
		if step%101 != 0 {
			continue
		}
		if wt.n != len(ref) {
			t.Fatalf("step %d: %d entries, want %d", step, wt.n, len(ref))
		}
		seen := 0
		wt.all(func(h uint64, e wentry) {
			seen++
			if ref[h] != e {
				t.Fatalf("step %d: %x = %+v, want %+v", step, h, e, ref[h])
			}
		})
		for h, want := range ref {
			if got, ok := wt.get(h); !ok || got != want {
				t.Fatalf("step %d: get %x = %+v %v, want %+v", step, h, got, ok, want)
			}
		}
		if seen != len(ref) {
			t.Fatalf("step %d: all saw %d, want %d", step, seen, len(ref))
		}
	}
	if _, ok := wt.get(^uint64(0)); ok {
		t.Fatal("absent key found")
	}
}

// TestMatchNSharedPrefix: a block every worker holds yields n answers, the
// deepest ones, not one per worker.
func TestMatchNSharedPrefix(t *testing.T) {
	idx := newIdx(t, DefaultIndexConfig())
	const workers = 200
	for w := range workers {
		// Everyone holds block 1 on the device; worker w also holds w%7
		// more private-but-shared blocks 2, 3, ... on the host.
		evs := []Event{stored(Device, nil, 1)}
		if k := w % 7; k > 0 {
			hs := make([]uint64, k)
			for i := range hs {
				hs[i] = uint64(2 + i)
			}
			evs = append(evs, stored(Host, p(1), hs...))
		}
		apply(t, idx, "w"+string(rune('A'+w/26))+string(rune('a'+w%26)), evs...)
	}
	q := []uint64{1, 2, 3, 4, 5, 6, 7, 8}
	for _, tc := range []struct {
		n    int
		want int // answers
		min  int // smallest Disk depth among them
	}{
		{1, 1, 7}, {16, 16, 7}, {28, 28, 7}, {29, 29, 6}, {500, workers, 1}, {0, workers, 1},
	} {
		ms := idx.MatchN(q, tc.n, nil)
		if len(ms) != tc.want {
			t.Fatalf("n=%d: %d answers, want %d", tc.n, len(ms), tc.want)
		}
		lo := 1 << 30
		for _, m := range ms {
			lo = min(lo, m.Depth[Disk])
			if m.Depth[Device] != 1 || m.Depth[Host] != m.Depth[Disk] {
				t.Fatalf("n=%d: %+v", tc.n, m)
			}
		}
		if lo != tc.min {
			t.Fatalf("n=%d: shallowest answer %d, want %d", tc.n, lo, tc.min)
		}
	}
	// Only the shared block asked: everyone ties; the first n registered.
	ms := idx.MatchN(q[:1], 3, nil)
	if len(ms) != 3 || ms[0].Worker != "wAa" || ms[2].Worker != "wAc" || ms[0].Depth != [NumMedia]int{1, 1, 1} {
		t.Fatalf("tie: %+v", ms)
	}
}
