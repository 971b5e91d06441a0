package fsm

import (
	"bytes"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// compatCommands is a log written with this package's encoders: puts of
// one copy, three replicas and a tensor-parallel part, in two namespaces,
// then a pin, a placement change and a delete.
func compatCommands() [][]byte {
	t0 := time.Unix(1_700_000_000, 5).UTC()
	ns := block.Namespace{Name: "tenant-a", BlockTokens: 16}
	a := func(h uint64) block.Key { return block.NewKey("tenant-a", h) }
	return [][]byte{
		EncodeNamespace(NamespaceCommand{NamespaceCreate, ns}),
		EncodeMember(MemberCommand{MemberUpsert, Member{ID: "n1", RaftAddr: "r1", State: MemberAlive}}),
		EncodeIndex([]Op{
			PutOp(key(1), Entry{Size: 4096, Sum: 11, Placement: []Shard{{NodeID: "n1"}}, Created: t0}),
			PutOp(key(2), Entry{Size: 100, Sum: 22, Placement: []Shard{{NodeID: "n2"}, {NodeID: "n3", Index: 1}, {NodeID: "n1", Index: 2}}, TierHints: HintDRAM, Created: t0}),
			PutOp(key(3).WithPart(7), Entry{Size: 8, Sum: 33, Placement: []Shard{{NodeID: "n3"}}, PinUntil: t0.Add(time.Hour), Created: t0}),
			PutOp(a(1), Entry{Size: 64, Sum: 44, Placement: []Shard{{NodeID: "n2"}}, Created: t0}),
			PutOp(a(2), Entry{Size: 64, Sum: 55, Placement: []Shard{{NodeID: "n1"}}}),
		}),
		EncodeIndex([]Op{PinOp(key(1), t0.Add(2*time.Hour)), PlaceOp(a(1), 44, []Shard{{NodeID: "n3"}}), DeleteOp(a(2), 0)}),
	}
}

// TestSnapshotOfThePreviousIndexRestores: testdata/snapshot-radix.bin was
// written by the previous build of this package (the radix-tree index, at
// commit 59164cd) from compatCommands' log. The current FSM restores it to
// the state it builds by applying the same log itself, and the restored
// state snapshots and restores again to the same state.
func TestSnapshotOfThePreviousIndexRestores(t *testing.T) {
	old, err := os.ReadFile("testdata/snapshot-radix.bin")
	if err != nil {
		t.Fatal(err)
	}
	restored, err := readSnapshot(bytes.NewReader(old))
	if err != nil {
		t.Fatalf("restoring the previous build's snapshot: %v", err)
	}
	f := New(nil)
	for i, c := range compatCommands() {
		if r := apply(t, f, uint64(i+1), c); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	want := f.cur.Load()
	if !sameState(restored, want) {
		t.Fatalf("restored state differs from the replayed log:\n%+v\nwant\n%+v", indexEntries(restored), indexEntries(want))
	}
	if restored.indexLen() != 4 {
		t.Fatalf("%d entries restored, want 4", restored.indexLen())
	}
	// And against the log's values written out, not only the same code's
	// reading of them.
	t0 := time.Unix(1_700_000_000, 5).UTC()
	rf := New(nil)
	rf.publish(restored)
	for _, tc := range []struct {
		key  block.Key
		want Entry
	}{
		{key(1), Entry{Size: 4096, Sum: 11, Placement: []Shard{{NodeID: "n1"}}, PinUntil: t0.Add(2 * time.Hour), Generation: 3, Created: t0}},
		{key(2), Entry{Size: 100, Sum: 22, Placement: []Shard{{NodeID: "n2"}, {NodeID: "n3", Index: 1}, {NodeID: "n1", Index: 2}}, TierHints: HintDRAM, Generation: 3, Created: t0}},
		{key(3).WithPart(7), Entry{Size: 8, Sum: 33, Placement: []Shard{{NodeID: "n3"}}, PinUntil: t0.Add(time.Hour), Generation: 3, Created: t0}},
		{block.NewKey("tenant-a", 1), Entry{Size: 64, Sum: 44, Placement: []Shard{{NodeID: "n3"}}, Generation: 3, Created: t0}},
	} {
		got, ok := rf.Lookup(tc.key)
		if !ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v (found %v), want %+v", tc.key, got, ok, tc.want)
		}
	}
	if _, ok := rf.Lookup(block.NewKey("tenant-a", 2)); ok {
		t.Error("the deleted entry was restored")
	}
	var buf bytes.Buffer
	if err := writeSnapshot(&buf, restored); err != nil {
		t.Fatal(err)
	}
	again, err := readSnapshot(&buf)
	if err != nil || !sameState(again, want) {
		t.Fatalf("re-snapshot of the restored state: %v", err)
	}
}
