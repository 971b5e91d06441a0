package router

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// model is a plain reference implementation of the index's semantics.
type model map[string]map[uint64]wentry

func (md model) apply(w string, ev Event) {
	blocks := md[w]
	if blocks == nil {
		blocks = map[uint64]wentry{}
		md[w] = blocks
	}
	switch ev.Kind {
	case Stored:
		pos := uint32(0)
		if ev.HasParent {
			e, ok := blocks[ev.Parent]
			if !ok {
				return
			}
			pos = e.pos + 1
		}
		for i, h := range ev.Hashes {
			e, ok := blocks[h]
			if !ok || e.pos != pos+uint32(i) {
				e = wentry{pos: pos + uint32(i)}
			}
			e.media |= 1 << ev.Medium
			blocks[h] = e
		}
	case Removed:
		for _, h := range ev.Hashes {
			if e, ok := blocks[h]; ok {
				e.media &^= 1 << ev.Medium
				if e.media == 0 {
					delete(blocks, h)
				} else {
					blocks[h] = e
				}
			}
		}
	case Cleared:
		clear(blocks)
	}
}

func (md model) depths(q []uint64) map[string][NumMedia]int {
	out := map[string][NumMedia]int{}
	for w, blocks := range md {
		var d [NumMedia]int
		for l := range NumMedia {
			for i, h := range q {
				e, ok := blocks[h]
				if !ok || e.pos != uint32(i) || e.media&levelMask[l] == 0 {
					break
				}
				d[l] = i + 1
			}
		}
		if d[Disk] > 0 {
			out[w] = d
		}
	}
	return out
}

var levelMask = [NumMedia]uint8{1 << Device, 1<<Device | 1<<Host, 1<<Device | 1<<Host | 1<<Disk}

// TestMatchAgainstModel drives the index and the model with the same random
// events (enough workers that shared blocks switch to bitset form and back)
// and compares every query.
func TestMatchAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	idx := newIdx(t, DefaultIndexConfig())
	md := model{}
	const workers, depth = 70, 12
	// A small tree of chains: hash = branch*100 + position + 1.
	chain := func(branch, n int) []uint64 {
		hs := make([]uint64, n)
		for i := range hs {
			b := branch
			if i < 3 {
				b = 0 // shared system prompt
			}
			hs[i] = uint64(b*100 + i + 1)
		}
		return hs
	}
	for step := range 4000 {
		w := fmt.Sprintf("w%d", rng.IntN(workers))
		c := chain(rng.IntN(4), depth)
		var ev Event
		switch r := rng.IntN(10); {
		case r < 6:
			start := rng.IntN(depth)
			end := start + 1 + rng.IntN(depth-start)
			ev = Event{Kind: Stored, Hashes: c[start:end], Medium: Medium(rng.IntN(int(NumMedia)))}
			if start > 0 {
				ev.Parent, ev.HasParent = c[start-1], true
			}
		case r < 9:
			k := rng.IntN(depth)
			ev = Event{Kind: Removed, Hashes: c[k : k+1+rng.IntN(depth-k)], Medium: Medium(rng.IntN(int(NumMedia)))}
		default:
			ev = Event{Kind: Cleared}
		}
		apply(t, idx, w, ev)
		md.apply(w, ev)
		if step%20 == 0 {
			q := chain(rng.IntN(4), 1+rng.IntN(depth))
			got, want := depths(idx, q...), md.depths(q)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("step %d query %v:\n got %v\nwant %v", step, q, got, want)
			}
			for _, n := range []int{1, 2, 5, 16} {
				got, want := topDepths(idx, n, q), modelTop(idx, want, n)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("step %d query %v top %d:\n got %v\nwant %v", step, q, n, got, want)
				}
			}
		}
	}
	bitsets := 0
	for i := range idx.shards {
		for _, hs := range idx.shards[i].t.ext {
			if isBits(hs) {
				bitsets++
			}
		}
	}
	if bitsets == 0 {
		t.Fatal("no holder set reached bitset form; the test does not cover it")
	}
	var resid int64
	for _, blocks := range md {
		for _, e := range blocks {
			for m := range NumMedia {
				if e.media&(1<<m) != 0 {
					resid++
				}
			}
		}
	}
	if s := idx.Stats(); s.Residencies != resid {
		t.Fatalf("residencies %d, model %d", s.Residencies, resid)
	}
}

// topDepths is MatchN's answer as worker -> depths.
func topDepths(idx *Index, n int, hs []uint64) map[string][NumMedia]int {
	out := map[string][NumMedia]int{}
	for _, m := range idx.MatchN(hs, n, nil) {
		out[m.Worker] = m.Depth
	}
	return out
}

// modelTop is the n deepest (Disk) of all, ties to the earliest registered.
func modelTop(idx *Index, all map[string][NumMedia]int, n int) map[string][NumMedia]int {
	names := make([]string, 0, len(all))
	for w := range all {
		names = append(names, w)
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := cmp.Compare(all[b][Disk], all[a][Disk]); c != 0 {
			return c
		}
		return cmp.Compare(idx.worker(a, false).id, idx.worker(b, false).id)
	})
	out := map[string][NumMedia]int{}
	for _, w := range names[:min(n, len(names))] {
		out[w] = all[w]
	}
	return out
}
