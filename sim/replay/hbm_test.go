package replay

import (
	"slices"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/router"
)

func TestHBMPrefixAndEviction(t *testing.T) {
	c := newHBM(4)
	added, evicted := c.insert([]uint64{1, 2, 3})
	if !slices.Equal(added, []int{0, 1, 2}) || len(evicted) != 0 {
		t.Fatalf("first insert: added %v evicted %v", added, evicted)
	}
	if got := c.prefix([]uint64{1, 2, 3, 4}); got != 3 {
		t.Fatalf("prefix = %d, want 3", got)
	}
	if got := c.prefix([]uint64{2, 3}); got != 2 {
		t.Fatalf("prefix of a non-head chain = %d, want 2 (hash lookup, any position)", got)
	}
	// 1,2 are reused; 5,6 are new: one block must go, the least recent. The
	// first insert touched 3, 2, 1 in that order, so 3 is the oldest.
	added, evicted = c.insert([]uint64{1, 2, 5, 6})
	if !slices.Equal(added, []int{2, 3}) || !slices.Equal(evicted, []uint64{3}) {
		t.Fatalf("second insert: added %v evicted %v, want [2 3] and [3]", added, evicted)
	}
	if c.len() != 4 {
		t.Fatalf("len %d, want 4", c.len())
	}
}

func TestHBMLongRequestKeepsItsHead(t *testing.T) {
	c := newHBM(3)
	_, evicted := c.insert([]uint64{10, 11, 12, 13, 14})
	// Touched tail first, so the tail is evicted and the head survives.
	if !slices.Equal(evicted, []uint64{14, 13}) {
		t.Fatalf("evicted %v, want [14 13]", evicted)
	}
	if got := c.prefix([]uint64{10, 11, 12, 13, 14}); got != 3 {
		t.Fatalf("prefix %d, want 3", got)
	}
}

func TestHBMZeroCapacityHoldsNothing(t *testing.T) {
	c := newHBM(0)
	added, evicted := c.insert([]uint64{1, 2})
	if added != nil || evicted != nil || c.prefix([]uint64{1}) != 0 {
		t.Fatalf("zero capacity cached something: %v %v", added, evicted)
	}
}

func TestStoredEvents(t *testing.T) {
	hashes := []uint64{100, 101, 102, 103, 104}
	evs := storedEvents(hashes, []int{0, 1, 3, 4}, []uint64{7}, 512)
	if len(evs) != 3 {
		t.Fatalf("%d events, want 3: %+v", len(evs), evs)
	}
	want := []router.Event{
		{Kind: router.Stored, Hashes: []uint64{100, 101}, Medium: router.Device, BlockSize: 512},
		{Kind: router.Stored, Hashes: []uint64{103, 104}, Parent: 102, HasParent: true, Medium: router.Device, BlockSize: 512},
		{Kind: router.Removed, Hashes: []uint64{7}, Medium: router.Device},
	}
	for i := range want {
		g, w := evs[i], want[i]
		if g.Kind != w.Kind || !slices.Equal(g.Hashes, w.Hashes) || g.Parent != w.Parent || g.HasParent != w.HasParent || g.Medium != w.Medium || g.BlockSize != w.BlockSize {
			t.Errorf("event %d = %+v, want %+v", i, g, w)
		}
	}
	if evs := storedEvents(hashes, nil, nil, 512); len(evs) != 0 {
		t.Fatalf("no change gave events %+v", evs)
	}
}
