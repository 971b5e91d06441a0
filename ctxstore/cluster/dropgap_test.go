package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TestRePutInTheDropGapStores: DRAM evicts a block; its index entry is
// deleted a moment later by the drop batch. A put of the same block in
// between (an LMCache re-put) must store it again, so it reads back after
// the drop batch committed. Blocks evicted and not put again are gone from
// the index (the drop batch did run), and a re-put of a block still held
// stays a no-op.
func TestRePutInTheDropGapStores(t *testing.T) {
	tests := []struct {
		name string
		k, m int
	}{
		{"single", 1, 0},
		{"rs21", 2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A wide gap: drops commit 2 s after the first one queued.
			tc := newTestCluster(t, 1, func(c *Config) { c.DropLinger = 2 * time.Second })
			tc.createNS(tt.name, tt.k, tt.m)
			tn := tc.nodes[0]
			ctx := withTimeout(t, 60*time.Second)
			// 24 blocks of 512 KiB through an 8 MiB DRAM tier: the first
			// ones are evicted.
			var blocks []testBlock
			for i := range 24 {
				b := testBlock{block.NewKey(tt.name, uint64(1000+i)), payload(1000+i, 512<<10)}
				if err := tn.store.Put(ctx, b.key, b.data, block.PutOptions{}); err != nil {
					t.Fatal(err)
				}
				blocks = append(blocks, b)
			}
			c, err := tn.backend.code(tt.name)
			if err != nil {
				t.Fatal(err)
			}
			held := func(b testBlock) bool {
				for i := range c.N() {
					if !tn.tiers.Contains(shardKey(b.key, c, i)) {
						return false
					}
				}
				return true
			}
			first := blocks[0]
			if held(first) {
				t.Fatal("the first block was not evicted")
			}
			if _, ok := tn.node.FSM().Lookup(first.key); !ok {
				t.Fatal("the drop committed before the re-put: no gap to test")
			}
			last := blocks[len(blocks)-1]
			if !held(last) {
				t.Fatal("the last block was evicted")
			}
			// The re-put in the gap, and one of a block still held.
			for _, b := range []testBlock{first, last} {
				if err := tn.store.Put(ctx, b.key, b.data, block.PutOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if !held(first) {
				t.Fatal("the re-put in the drop gap stored nothing")
			}
			// Wait for the drop batch: the other evicted blocks' entries lose
			// their shards (or, too few left, are deleted).
			other := blocks[1]
			if held(other) {
				t.Fatal("the second block was not evicted")
			}
			tc.eventually("the drop batch committed", func() bool {
				e, ok := tn.node.FSM().Lookup(other.key)
				return !ok || len(e.Placement) < c.N()
			})
			if _, ok := tn.node.FSM().Lookup(other.key); !ok {
				if _, err := tn.store.Get(ctx, other.key); !errors.Is(err, block.ErrNotFound) {
					t.Fatalf("an evicted block reads: %v", err)
				}
			}
			mustGet(t, tn.store, first.key, first.data)
			mustGet(t, tn.store, last.key, last.data)
			if e, ok := tn.node.FSM().Lookup(first.key); !ok || len(e.Placement) != c.N() {
				t.Fatalf("re-put block's entry: %+v (found %v), want %d shards", e, ok, c.N())
			}
		})
	}
}
