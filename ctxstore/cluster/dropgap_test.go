package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
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

// TestDropGapBookkeeping: the set of blocks with a drop queued or
// committing. A flush takes a queued block (marking it committing) and
// keeps only the shards the tier still lacks; a block a put is rewriting
// now waits for the next batch; a block leaves the set once nothing is
// queued, rewriting or committing for it.
func TestDropGapBookkeeping(t *testing.T) {
	a, b := block.NewKey("default", 1), block.NewKey("default", 2)
	tests := []struct {
		name      string
		refilling bool // a put is rewriting a's shards during the flush
		has       bool // the tier holds a's shard again at the flush
		wantLeft  int  // a's shards left to drop
		wantDefer int
		wantAfter int64 // blocks still in the set after the flush
	}{
		{"queued and still gone: dropped", false, false, 1, 0, 0},
		{"rewritten before the flush: kept", false, true, 0, 0, 0},
		{"being rewritten: next batch", true, false, 0, 1, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var g dropGap
			g.queue(a)
			g.queue(b)
			g.unqueue(b) // the drop queue was full
			if n := g.n.Load(); n != 1 {
				t.Fatalf("%d blocks in the set, want 1", n)
			}
			if tc.refilling {
				g.keys[a].refilling++
			}
			left, deferred, done := g.takeForFlush([]block.Key{a}, func(block.Key) bool { return tc.has })
			if len(left) != tc.wantLeft || len(deferred) != tc.wantDefer {
				t.Fatalf("left %v deferred %v", left, deferred)
			}
			if st := g.keys[a]; !tc.refilling && st.flushing != done {
				t.Fatal("a taken block is not marked committing")
			}
			g.doneFlush([]block.Key{a}, done)
			select {
			case <-done:
			default:
				t.Fatal("doneFlush did not release the waiting puts")
			}
			if n := g.n.Load(); n != tc.wantAfter || int64(len(g.keys)) != n {
				t.Fatalf("%d blocks in the set (map %d), want %d", n, len(g.keys), tc.wantAfter)
			}
		})
	}
}

// TestBatchWithARefillKeepsItsOrder: a put batch [A, X, B] where X is held
// by the index but its local copy was dropped (its drop queued, not yet
// committed) reaches the local tier in the batch's order, A before X before
// B: a refill written while the batch is planned would land ahead of A,
// and a recency policy would take X, the middle of a prefix, for the
// oldest of the three.
func TestBatchWithARefillKeepsItsOrder(t *testing.T) {
	tc := newTestCluster(t, 1, func(c *Config) { c.DropLinger = time.Hour })
	tc.createNS("one", 1, 0)
	tn := tc.nodes[0]
	ctx := withTimeout(t, 30*time.Second)
	x := testBlock{block.NewKey("one", 2), payload(2, 64<<10)}
	if err := tn.store.Put(ctx, x.key, x.data, block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	// What an eviction leaves: the local copy gone, its drop queued, the
	// index entry still there.
	tn.backend.drops.gap.queue(x.key)
	defer tn.backend.drops.gap.unqueue(x.key)
	if err := tn.tiers.Delete(ctx, x.key); err != nil {
		t.Fatal(err)
	}
	a := testBlock{block.NewKey("one", 1), payload(1, 64<<10)}
	b := testBlock{block.NewKey("one", 3), payload(3, 64<<10)}
	var items []ctxstore.PutItem
	for _, tb := range []testBlock{a, x, b} {
		items = append(items, ctxstore.PutItem{Key: tb.key, Data: tb.data})
	}
	if err := errors.Join(tn.store.PutBatch(ctx, items)...); err != nil {
		t.Fatal(err)
	}
	var at []time.Time
	for _, tb := range []testBlock{a, x, b} {
		info, err := tn.tiers.Stat(ctx, tb.key)
		if err != nil {
			t.Fatalf("%s after the batch: %v", tb.key, err)
		}
		at = append(at, info.Created)
		mustGet(t, tn.store, tb.key, tb.data)
	}
	if !at[0].Before(at[1]) || !at[1].Before(at[2]) {
		t.Fatalf("local puts at A %v, X %v, B %v: want the batch's order", at[0].UnixNano(), at[1].UnixNano(), at[2].UnixNano())
	}
}
