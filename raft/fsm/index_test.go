package fsm

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// treeKeys lists t's keys in order, checking the order on the way.
func treeKeys(t *testing.T, tr *tree) []ikey {
	t.Helper()
	var out []ikey
	tr.ascend(ikey{}, func(sl *slot) bool {
		if len(out) > 0 && !out[len(out)-1].less(sl.key()) {
			t.Fatalf("ascend out of order: %v after %v", sl.key(), out[len(out)-1])
		}
		out = append(out, sl.key())
		return true
	})
	if len(out) != tr.n {
		t.Fatalf("tree counts %d entries, holds %d", tr.n, len(out))
	}
	return out
}

// TestTreeMatchesModel runs random sets and deletes, batched into
// transactions, against a sorted-set model; after every transaction the
// tree must hold exactly the model's keys, and every earlier version must
// still hold what it held (copy on write).
func TestTreeMatchesModel(t *testing.T) {
	cases := []struct {
		name     string
		keySpace uint64
		ops      int
		batch    int
		delFrac  float64
	}{
		{"dense with deletes", 3000, 10000, 64, 0.4},
		{"sparse inserts", 1 << 40, 10000, 100, 0.05},
		{"one op per txn", 500, 1500, 1, 0.5},
		{"delete everything", 200, 4000, 16, 0.7},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, uint64(tc.ops)))
			s := emptyState()
			model := map[ikey]uint64{}
			type version struct {
				tr   *tree
				keys []ikey
			}
			var versions []version
			for done := 0; done < tc.ops; {
				txn := s.indexTxn()
				for range tc.batch {
					k := ikey{hash: r.Uint64N(tc.keySpace)}
					if r.IntN(4) == 0 {
						k.part = 1<<16 | uint32(r.IntN(3))
					}
					tr := txn.tree("ns")
					if r.Float64() < tc.delFrac {
						_, want := model[k]
						if got := tr.delete(txn.gen, k); got != want {
							t.Fatalf("delete %v: %v, model says %v", k, got, want)
						}
						delete(model, k)
					} else {
						_, had := model[k]
						gen := uint64(done + 1)
						if added := tr.set(txn.gen, slot{hash: k.hash, part: k.part, gen: gen}); added == had {
							t.Fatalf("set %v: added %v, model had it: %v", k, added, had)
						}
						model[k] = gen
					}
					done++
				}
				txn.commit()
				tr := s.index["ns"]
				want := slices.SortedFunc(func(yield func(ikey) bool) {
					for k := range model {
						if !yield(k) {
							return
						}
					}
				}, func(a, b ikey) int {
					if a.less(b) {
						return -1
					}
					if b.less(a) {
						return 1
					}
					return 0
				})
				if len(want) == 0 {
					if tr != nil {
						t.Fatalf("an empty namespace keeps a tree of %d", tr.n)
					}
				} else {
					if got := treeKeys(t, tr); !slices.Equal(got, want) {
						t.Fatalf("tree holds %d keys, model %d (first difference within)", len(got), len(want))
					}
					for k, gen := range model {
						sl, ok := tr.get(k)
						if !ok || sl.gen != gen {
							t.Fatalf("get %v: %v %+v, want generation %d", k, ok, sl, gen)
						}
					}
				}
				versions = append(versions, version{tr, want})
			}
			for i, v := range versions {
				if v.tr == nil {
					continue
				}
				if got := treeKeys(t, v.tr); !slices.Equal(got, v.keys) {
					t.Fatalf("version %d changed after later transactions: %d keys, had %d", i, len(got), len(v.keys))
				}
			}
		})
	}
}

// TestSlotRoundTrip packs entries into slots and back.
func TestSlotRoundTrip(t *testing.T) {
	now := time.Unix(1_700_000_000, 123).UTC()
	cases := []struct {
		name string
		e    Entry
	}{
		{"one copy", Entry{Size: 4096, Sum: 7, Placement: []Shard{{NodeID: "n1"}}, Generation: 9, Created: now}},
		{"three replicas, pinned, hints", Entry{Size: 1, Sum: 1, Placement: []Shard{{NodeID: "n2"}, {NodeID: "n3", Index: 1}, {NodeID: "n1", Index: 2}}, TierHints: HintDRAM | HintNVMe, PinUntil: now.Add(time.Hour), Generation: 1, Created: now}},
		{"no placement, zero times", Entry{Size: 8, Sum: 0xffffffff}},
		{"repeated node", Entry{Size: 8, Placement: []Shard{{NodeID: "a", Index: 65535}, {NodeID: "a", Index: 0}}}},
		{"the most shards a placement takes", Entry{Size: 8, Placement: manyShards(256)}},
	}
	s := emptyState()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, part := range []uint32{0, 1<<16 | 5} {
				k := ikey{hash: 42, part: part}
				sl := s.toSlot(k, tc.e)
				if sl.key() != k {
					t.Fatalf("key %v, want %v", sl.key(), k)
				}
				got := sl.entry(s)
				if got.Size != tc.e.Size || got.Sum != tc.e.Sum || got.TierHints != tc.e.TierHints || got.Generation != tc.e.Generation ||
					!got.Created.Equal(tc.e.Created) || !got.PinUntil.Equal(tc.e.PinUntil) || !slices.Equal(got.Placement, tc.e.Placement) {
					t.Fatalf("round trip: %+v, want %+v", got, tc.e)
				}
			}
		})
	}
	if k := keyOf(block.NewKey("ns", 3).WithPart(0)); k.part != 1<<16 {
		t.Fatalf("part 0 of a block packs as %v, not apart from the whole block", k)
	}
}

// manyShards is a placement of n shards over 9 nodes.
func manyShards(n int) []Shard {
	p := make([]Shard, n)
	for i := range p {
		p[i] = Shard{NodeID: fmt.Sprintf("n%d", i%9), Index: uint16(i)}
	}
	return p
}

// TestInsertSlot checks a leaf's insert: slots stay in order, a full
// array grows (doubling, at least 8, at most a leaf's split size; an
// insert at the end of a full array straight to that size), and an array
// with room is used in place.
func TestInsertSlot(t *testing.T) {
	mk := func(n, c int) []slot {
		s := make([]slot, n, c)
		for i := range s {
			s[i].hash = uint64(2 * (i + 1))
		}
		return s
	}
	tests := []struct {
		name      string
		slots     []slot
		hash      uint64
		wantCap   int
		wantFresh bool // a new array
	}{
		{"room: in place", mk(3, 10), 3, 10, false},
		{"empty: an insert at its end", mk(0, 0), 1, leafMax + 1, true},
		{"small full array doubles to at least 8", mk(2, 2), 3, 8, true},
		{"full array doubles", mk(20, 20), 3, 40, true},
		{"doubling stops at the split size", mk(40, 40), 3, leafMax + 1, true},
		{"at the end of a full array: a whole leaf", mk(10, 10), 100, leafMax + 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := len(tc.slots)
			i, found := slotIndex(tc.slots, ikey{hash: tc.hash})
			if found {
				t.Fatal("test key already present")
			}
			got := insertSlot(tc.slots, i, slot{hash: tc.hash})
			if len(got) != n+1 || cap(got) != tc.wantCap {
				t.Fatalf("len %d cap %d, want %d and %d", len(got), cap(got), n+1, tc.wantCap)
			}
			fresh := cap(tc.slots) == 0 || &got[0] != &tc.slots[:1][0]
			if fresh != tc.wantFresh {
				t.Fatalf("new array %v, want %v", fresh, tc.wantFresh)
			}
			for j := 1; j < len(got); j++ {
				if got[j-1].hash >= got[j].hash {
					t.Fatalf("slots out of order at %d: %d then %d", j, got[j-1].hash, got[j].hash)
				}
			}
		})
	}
}
