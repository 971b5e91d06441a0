package fsm

import (
	"bytes"
	"io"
	"slices"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// putsSince is PutsSince's shards as sorted hash*10+index, and its answer.
func putsSince(f *FSM, gen uint64) ([]uint64, bool) {
	var got []uint64
	ok := f.PutsSince(gen, func(k block.Key, i int) { got = append(got, k.Hash*10+uint64(i)) })
	slices.Sort(got)
	return got, ok
}

func TestTrackPuts(t *testing.T) {
	tests := []struct {
		name  string
		limit int
		// run applies commands after tracking started (at applied index 10).
		run     func(t *testing.T, f *FSM)
		gen     uint64
		want    []uint64
		wantOK  bool
		disable bool // stop tracking before asking
	}{
		{"created since the generation", 8, func(t *testing.T, f *FSM) {
			apply(t, f, 11, EncodeIndex([]Op{PutOp(key(1), testEntry(1)), PutOp(key(2), testEntry(2))}))
			apply(t, f, 12, EncodeIndex([]Op{PutOp(key(3), testEntry(3))}))
		}, 11, []uint64{31}, true, false},
		{"everything since tracking started", 8, func(t *testing.T, f *FSM) {
			apply(t, f, 11, EncodeIndex([]Op{PutOp(key(1), testEntry(1)), PutOp(key(2), testEntry(2))}))
		}, 10, []uint64{11, 21}, true, false},
		{"only creations: existed, conflicts, deletes, pins are not", 8, func(t *testing.T, f *FSM) {
			apply(t, f, 11, EncodeIndex([]Op{PutOp(key(100), testEntry(7)), PutOp(key(100), testEntry(8)), DeleteOp(key(100), 0), PinOp(key(100), testEntry(1).Created)}))
		}, 10, []uint64{1001}, true, false},
		{"only shards on the tracked member, each of them", 8, func(t *testing.T, f *FSM) {
			other := testEntry(1)
			other.Placement = []Shard{{NodeID: "n1", Index: 0}, {NodeID: "n3", Index: 1}}
			two := testEntry(2)
			two.Placement = []Shard{{NodeID: "n2", Index: 0}, {NodeID: "n2", Index: 2}, {NodeID: "n1", Index: 1}}
			apply(t, f, 11, EncodeIndex([]Op{PutOp(key(1), other), PutOp(key(2), two)}))
		}, 10, []uint64{20, 22}, true, false},
		{"before tracking started: unknown", 8, func(t *testing.T, f *FSM) {
			apply(t, f, 11, EncodeIndex([]Op{PutOp(key(1), testEntry(1))}))
		}, 9, nil, false, false},
		{"off", 8, func(t *testing.T, f *FSM) {
			apply(t, f, 11, EncodeIndex([]Op{PutOp(key(1), testEntry(1))}))
		}, 10, nil, false, true},
		{"overflowed past the generation", 2, func(t *testing.T, f *FSM) {
			for i := uint64(0); i < 4; i++ {
				apply(t, f, 11+i, EncodeIndex([]Op{PutOp(key(1+i), testEntry(1))}))
			}
		}, 11, nil, false, false},
		{"overflowed before the generation", 2, func(t *testing.T, f *FSM) {
			for i := uint64(0); i < 4; i++ {
				apply(t, f, 11+i, EncodeIndex([]Op{PutOp(key(1+i), testEntry(1))}))
			}
		}, 12, []uint64{31, 41}, true, false},
		{"a snapshot replaced the index", 8, func(t *testing.T, f *FSM) {
			apply(t, f, 11, EncodeIndex([]Op{PutOp(key(1), testEntry(1))}))
			g := New(nil)
			apply(t, g, 20, EncodeIndex([]Op{PutOp(key(9), testEntry(1))}))
			if err := f.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, g)))); err != nil {
				t.Fatal(err)
			}
		}, 11, nil, false, false},
		{"after a snapshot, puts past it", 8, func(t *testing.T, f *FSM) {
			g := New(nil)
			apply(t, g, 20, EncodeIndex([]Op{PutOp(key(9), testEntry(1))}))
			if err := f.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, g)))); err != nil {
				t.Fatal(err)
			}
			apply(t, f, 21, EncodeIndex([]Op{PutOp(key(5), testEntry(1))}))
		}, 20, []uint64{51}, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := New(nil)
			apply(t, f, 10, EncodeIndex([]Op{PutOp(key(50), testEntry(1))}))
			f.TrackPuts("n2", tc.limit)
			tc.run(t, f)
			if tc.disable {
				f.TrackPuts("", 0)
			}
			got, ok := putsSince(f, tc.gen)
			if ok != tc.wantOK || !slices.Equal(got, tc.want) {
				t.Fatalf("PutsSince(%d) = %v, %v; want %v, %v", tc.gen, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
