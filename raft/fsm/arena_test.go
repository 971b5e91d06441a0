package fsm

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// The placements of a decoded index command share chunks, but each is its
// own: it decodes to what was encoded, and appending to or changing one
// leaves every other as it was, across chunk boundaries too.
func TestDecodedPlacementsAreIndependent(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ops        int
		shardsOf   func(i int) int
		withDelete bool
	}{
		{"one shard each", 64, func(int) int { return 1 }, false},
		{"three replicas each", 64, func(int) int { return 3 }, false},
		{"mixed, past one chunk", 700, func(i int) int { return i%4 + 1 }, true},
		{"a lone put", 1, func(int) int { return 2 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ops []Op
			for i := range tc.ops {
				place := make([]Shard, tc.shardsOf(i))
				for c := range place {
					place[c] = Shard{NodeID: fmt.Sprintf("node-%d", (i+c)%5), Index: uint16(c)}
				}
				k := block.NewKey(block.DefaultNamespace, uint64(i)+1)
				ops = append(ops, PutOp(k, Entry{Size: 10, Sum: uint32(i), Placement: place, Created: time.Unix(5, 0)}))
				if tc.withDelete && i%7 == 0 {
					ops = append(ops, DeleteOp(k, 0))
				}
			}
			c, err := DecodeCommand(EncodeIndex(ops))
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Ops) != len(ops) {
				t.Fatalf("%d ops decoded, %d encoded", len(c.Ops), len(ops))
			}
			for i := range c.Ops {
				if !slices.Equal(c.Ops[i].Placement, ops[i].Placement) {
					t.Fatalf("op %d: placement %v, encoded %v", i, c.Ops[i].Placement, ops[i].Placement)
				}
			}
			// Grow and overwrite every decoded placement; the others keep
			// their shards.
			for i := range c.Ops {
				if len(c.Ops[i].Placement) == 0 {
					continue
				}
				c.Ops[i].Placement = append(c.Ops[i].Placement, Shard{NodeID: "intruder", Index: 99})
				c.Ops[i].Placement[0].NodeID = "changed"
				for j := range c.Ops {
					if j == i || len(c.Ops[j].Placement) == 0 {
						continue
					}
					want := ops[j].Placement
					got := c.Ops[j].Placement
					if j < i { // already grown and changed by this loop
						got = got[1 : len(got)-1]
						want = want[1:]
					}
					if !slices.Equal(got, want) {
						t.Fatalf("changing op %d's placement changed op %d's: %v, want %v", i, j, c.Ops[j].Placement, ops[j].Placement)
					}
				}
			}
		})
	}
}

// BenchmarkDecodeIndexBatch decodes 64-put index commands (one copy per
// block, as ctxbench's index phase puts) with the shared placement chunks
// and, alternately in the same run, with one allocation per placement as
// before; it reports allocations and ns per command for both and the
// ratios.
//
//	go test -run '^$' -bench DecodeIndexBatch -benchtime 2000x ./raft/fsm/
func BenchmarkDecodeIndexBatch(b *testing.B) {
	cmds := sizeBatches(64*64, 64)
	var spent [2]time.Duration
	var allocs [2]uint64
	var ms runtime.MemStats
	n := 0
	for b.Loop() {
		for w, arena := range []bool{true, false} {
			runtime.ReadMemStats(&ms)
			before := ms.Mallocs
			start := time.Now()
			for _, cmd := range cmds {
				c, err := decodeCommand(cmd, arena)
				if err != nil || len(c.Ops) != 64 || len(c.Ops[63].Placement) != 1 {
					b.Fatalf("decode: %v, %d ops", err, len(c.Ops))
				}
			}
			spent[w] += time.Since(start)
			runtime.ReadMemStats(&ms)
			allocs[w] += ms.Mallocs - before
		}
		n += len(cmds)
	}
	per := func(v float64) float64 { return v / float64(n) }
	b.ReportMetric(per(float64(allocs[0])), "allocs/cmd-shared")
	b.ReportMetric(per(float64(allocs[1])), "allocs/cmd-each")
	b.ReportMetric(per(float64(spent[0].Nanoseconds())), "ns/cmd-shared")
	b.ReportMetric(per(float64(spent[1].Nanoseconds())), "ns/cmd-each")
	b.ReportMetric(float64(allocs[1])/float64(allocs[0]), "ratio_allocs_each_vs_shared")
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "ratio_ns_each_vs_shared")
}
