package fsm

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TestScanReusing: the reusing scan gives the entries of Scan, in the same
// order, with placements of one, two and five shards (and parts) read
// correctly from its one buffer, stops when fn says so, and allocates
// nothing per entry.
func TestScanReusing(t *testing.T) {
	f := New(nil)
	var ops []Op
	for i := range 300 {
		e := testEntry(uint32(i))
		e.Placement = nil
		for s := range []int{1, 2, 5}[i%3] {
			e.Placement = append(e.Placement, Shard{NodeID: fmt.Sprintf("n%d", (i+s)%7), Index: uint16(s)})
		}
		k := key(uint64(i*7919) + 1)
		if i%4 == 0 {
			k = k.WithPart(uint16(i % 5))
		}
		ops = append(ops, PutOp(k, e))
	}
	if r := apply(t, f, 1, EncodeIndex(ops)); r.Err != nil {
		t.Fatal(r.Err)
	}
	type item struct {
		k block.Key
		e Entry
	}
	var want, got []item
	if err := f.Scan(block.DefaultNamespace, "", func(k block.Key, e Entry) bool {
		want = append(want, item{k, e})
		return true
	}); err != nil {
		t.Fatal(err)
	}
	f.ScanReusing(block.DefaultNamespace, func(k block.Key, e Entry) bool {
		e.Placement = slices.Clone(e.Placement)
		got = append(got, item{k, e})
		return true
	})
	if len(want) != len(ops) || len(got) != len(want) {
		t.Fatalf("Scan %d entries, ScanReusing %d, put %d", len(want), len(got), len(ops))
	}
	for i := range want {
		if got[i].k != want[i].k || !slices.Equal(got[i].e.Placement, want[i].e.Placement) ||
			got[i].e.Sum != want[i].e.Sum || got[i].e.Generation != want[i].e.Generation {
			t.Fatalf("entry %d: ScanReusing %v %+v, Scan %v %+v", i, got[i].k, got[i].e, want[i].k, want[i].e)
		}
	}
	n := 0
	f.ScanReusing(block.DefaultNamespace, func(block.Key, Entry) bool { n++; return n < 10 })
	if n != 10 {
		t.Fatalf("the scan went on for %d entries after fn returned false at 10", n)
	}
	// ScanReusingFrom any entry's key (a whole block or a part) yields the
	// same entries as the full scan from that entry on; from a key between
	// entries, from the next entry.
	for _, at := range []int{0, 1, 2, 3, 4, 5, 8, 150, len(want) - 1} {
		from := want[at].k
		var from2 []block.Key
		f.ScanReusingFrom(block.DefaultNamespace, from, func(k block.Key, _ Entry) bool { from2 = append(from2, k); return true })
		if len(from2) != len(want)-at || from2[0] != from || from2[len(from2)-1] != want[len(want)-1].k {
			t.Fatalf("ScanReusingFrom(%v): %d entries from %v, want %d from %v", from, len(from2), from2[0], len(want)-at, from)
		}
	}
	between := want[10].k
	between.Hash++ // not an entry: hashes are i*7919+1
	var first block.Key
	f.ScanReusingFrom(block.DefaultNamespace, between, func(k block.Key, _ Entry) bool { first = k; return false })
	if first != want[11].k {
		t.Fatalf("ScanReusingFrom(%v) began at %v, want the next entry %v", between, first, want[11].k)
	}
	f.ScanReusing("no-such-namespace", func(block.Key, Entry) bool { t.Fatal("an entry in an unknown namespace"); return false })
	allocs := testing.AllocsPerRun(5, func() {
		f.ScanReusing(block.DefaultNamespace, func(block.Key, Entry) bool { return true })
	})
	if allocs > 8 {
		t.Fatalf("%.0f allocations for a scan of %d entries", allocs, len(ops))
	}
}
