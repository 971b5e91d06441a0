package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TestPutBatchSendsOneRequestPerMember: a batch put's shards bound for one
// remote member travel as one PutShards request carrying all of them (a
// member that gets a single shard gets one PutShard), for replicas and
// erasure codes, and every block reads back through every node.
func TestPutBatchSendsOneRequestPerMember(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	tests := []struct {
		name string
		k, m int
		n    int // blocks in the batch
	}{
		{"one copy", 1, 0, 32},
		{"three replicas", 1, 2, 32},
		{"RS(2,1)", 2, 1, 32},
		{"RS(4,2), two shards per member", 4, 2, 16},
		{"one block, three replicas", 1, 2, 1},
	}
	for ti, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := fmt.Sprintf("req%d", ti)
			tc.createNS(ns, tt.k, tt.m)
			ctx := withTimeout(t, 30*time.Second)
			w := tc.leader()
			items := make([]ctxstore.PutItem, tt.n)
			for i := range items {
				items[i] = ctxstore.PutItem{Key: block.NewKey(ns, uint64(i)), Data: payload(ti*100+i, 2000+i)}
			}
			puts0, batches0, batched0 := tc.peers.requests()
			for i, err := range w.store.PutBatch(ctx, items) {
				if err != nil {
					t.Fatalf("item %d: %v", i, err)
				}
			}
			puts, batches, batched := tc.peers.requests()
			want := map[string]int{} // shards per remote member
			for _, it := range items {
				e, ok := w.node.FSM().Lookup(it.Key)
				if !ok {
					t.Fatalf("%v not in the writer's index", it.Key)
				}
				if len(e.Placement) != min(tt.k+tt.m, 3) && tt.k == 1 || tt.k > 1 && len(e.Placement) != tt.k+tt.m {
					t.Fatalf("%v: placement %v is short", it.Key, e.Placement)
				}
				for _, s := range e.Placement {
					if s.NodeID != w.id {
						want[s.NodeID]++
					}
				}
			}
			for _, n := range tc.nodes {
				if n == w {
					continue
				}
				gotPuts, gotBatches, gotBatched := puts[n.id]-puts0[n.id], batches[n.id]-batches0[n.id], batched[n.id]-batched0[n.id]
				switch want[n.id] {
				case 0:
					if gotPuts+gotBatches != 0 {
						t.Fatalf("%s holds none of the batch, yet got %d puts and %d batches", n.id, gotPuts, gotBatches)
					}
				case 1:
					if gotPuts != 1 || gotBatches != 0 {
						t.Fatalf("%s holds one shard: got %d puts and %d batches, want 1 and 0", n.id, gotPuts, gotBatches)
					}
				default:
					if gotPuts != 0 || gotBatches != 1 || gotBatched != want[n.id] {
						t.Fatalf("%s holds %d shards: got %d puts, %d batches of %d shards; want one batch of them all",
							n.id, want[n.id], gotPuts, gotBatches, gotBatched)
					}
				}
			}
			for _, it := range items {
				tc.waitEntry(it.Key)
				for _, r := range tc.nodes {
					mustGet(t, r.store, it.Key, it.Data)
				}
			}
		})
	}
}

// TestPutBatchWithAFailingMember: one member refuses its shards (down, full
// disk, or other bytes already under one block's key) while the batch's
// other destinations take theirs: every put is acknowledged, the other
// members hold every shard, and only the refused shards are missing from
// the committed placements.
func TestPutBatchWithAFailingMember(t *testing.T) {
	tests := []struct {
		name string
		fail func(tc *testCluster, bad *testNode, items []ctxstore.PutItem)
		// refused reports whether bad refused item i's shard.
		refused func(i int) bool
	}{
		{"down", func(tc *testCluster, bad *testNode, _ []ctxstore.PutItem) { tc.peers.setDown(bad.id, true) },
			func(int) bool { return true }},
		{"full", func(tc *testCluster, bad *testNode, _ []ctxstore.PutItem) {
			tc.peers.mu.Lock()
			tc.peers.full = map[string]bool{bad.id: true}
			tc.peers.mu.Unlock()
		}, func(int) bool { return true }},
		{"other bytes under one key", func(tc *testCluster, bad *testNode, items []ctxstore.PutItem) {
			other := payload(999, 500)
			if err := bad.tiers.Put(withTimeout(tc.t, 5*time.Second), items[5].Key, other, block.Checksum(other), block.PutOptions{}); err != nil {
				tc.t.Fatal(err)
			}
		}, func(i int) bool { return i == 5 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestCluster(t, 3, func(c *Config) { c.DeadAfter = time.Hour })
			tc.createNS("rep", 1, 2)
			w := tc.leader()
			var bad *testNode
			for _, n := range tc.nodes {
				if n != w {
					bad = n
				}
			}
			items := make([]ctxstore.PutItem, 24)
			for i := range items {
				items[i] = ctxstore.PutItem{Key: block.NewKey("rep", uint64(i)), Data: payload(i, 3000+i)}
			}
			tt.fail(tc, bad, items)
			_, batches0, _ := tc.peers.requests()
			ctx := withTimeout(t, 30*time.Second)
			for i, err := range w.store.PutBatch(ctx, items) {
				if err != nil {
					t.Fatalf("item %d with %s failing: %v", i, bad.id, err)
				}
			}
			if _, batches, _ := tc.peers.requests(); batches[bad.id]-batches0[bad.id] != 1 {
				t.Fatalf("%d batch requests to %s, want 1", batches[bad.id]-batches0[bad.id], bad.id)
			}
			for i, it := range items {
				e, ok := w.node.FSM().Lookup(it.Key)
				if !ok {
					t.Fatalf("%v not committed", it.Key)
				}
				onBad := false
				holders := map[string]bool{}
				for _, s := range e.Placement {
					holders[s.NodeID] = true
					onBad = onBad || s.NodeID == bad.id
				}
				if onBad == tt.refused(i) {
					t.Fatalf("item %d: placement %v; %s refused it: %v", i, e.Placement, bad.id, tt.refused(i))
				}
				for _, n := range tc.nodes {
					if n != bad && (!holders[n.id] || !n.tiers.Contains(it.Key)) {
						t.Fatalf("item %d: %s does not hold its shard (placement %v)", i, n.id, e.Placement)
					}
				}
				mustGet(t, w.store, it.Key, it.Data)
			}
		})
	}
}

// TestSendShardsReportsEachWrite: sendShards reports every write once, with
// exactly the failures of the member that is down, while the shards for
// this node and for a live member are stored.
func TestSendShardsReportsEachWrite(t *testing.T) {
	tc := newTestCluster(t, 3, func(c *Config) { c.DeadAfter = time.Hour })
	w := tc.leader()
	var down, up *testNode
	for _, n := range tc.nodes {
		switch {
		case n == w:
		case down == nil:
			down = n
		default:
			up = n
		}
	}
	tc.peers.setDown(down.id, true)
	var writes []shardWrite
	for i := range 23 {
		to := []*testNode{w, down, up}[i%3]
		d := payload(i, 1000+i)
		writes = append(writes, shardWrite{blk: i, node: to.id, key: block.NewKey(block.DefaultNamespace, uint64(i)), data: d,
			opts: block.PutOptions{Sum: block.Checksum(d), HasSum: true}})
	}
	var mu sync.Mutex
	got := map[int][]error{}
	var wg sync.WaitGroup
	wg.Add(len(writes))
	w.backend.sendShards(withTimeout(t, 20*time.Second), writes, func(sw *shardWrite, err error) {
		mu.Lock()
		got[sw.blk] = append(got[sw.blk], err)
		mu.Unlock()
		wg.Done()
	})
	wg.Wait()
	for i, sw := range writes {
		errs := got[i]
		if len(errs) != 1 {
			t.Fatalf("write %d reported %d times", i, len(errs))
		}
		holder := tc.byID(sw.node)
		if sw.node == down.id {
			if !errors.Is(errs[0], block.ErrUnavailable) {
				t.Fatalf("write %d to the down member: %v", i, errs[0])
			}
			if holder.tiers.Contains(sw.key) {
				t.Fatalf("write %d landed on the down member", i)
			}
			continue
		}
		if errs[0] != nil {
			t.Fatalf("write %d to %s: %v", i, sw.node, errs[0])
		}
		if !holder.tiers.Contains(sw.key) {
			t.Fatalf("write %d reported written, not in %s's tiers", i, sw.node)
		}
	}
}

// putRecorder is a local tier that records the key and options of every
// put, in the order they reach it.
type putRecorder struct {
	ctxstore.Tier
	mu   sync.Mutex
	keys []block.Key
	opts []block.PutOptions
}

func (r *putRecorder) Put(ctx context.Context, key block.Key, data []byte, sum uint32, opts block.PutOptions) error {
	r.mu.Lock()
	r.keys = append(r.keys, key)
	r.opts = append(r.opts, opts)
	r.mu.Unlock()
	return r.Tier.Put(ctx, key, data, sum, opts)
}

// TestPutBatchWritesLocalCopiesInOrder: the shards a batch put stores on
// the writing node reach its local tier in the batch's order, as a remote
// member applies its PutShards request, and a whole-block copy carries the
// put's parent link, so the tier's replacement policy sees a request's
// chain as the engine wrote it (chain order and tail demotion in
// tiers/policy Window). A shard of an erasure-coded block carries none.
// Before, every local write ran on a goroutine of its own and every parent
// was dropped: Window in ctxd then ran without its chain mechanisms (2.4
// points of the bound below the simulator on the synthetic trace, 3M
// tokens).
func TestPutBatchWritesLocalCopiesInOrder(t *testing.T) {
	tests := []struct {
		name   string
		nodes  int
		k, m   int
		parent bool // the local copies keep their parent
	}{
		{"one node, one copy", 1, 1, 0, true},
		{"three replicas", 3, 1, 2, true},
		{"RS(2,1)", 3, 2, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestCluster(t, tt.nodes, nil)
			tc.createNS("chain", tt.k, tt.m)
			w := tc.leader()
			rec := &putRecorder{Tier: w.backend.local}
			w.backend.local = rec
			const n = 64
			items := make([]ctxstore.PutItem, n)
			for i := range items {
				items[i] = ctxstore.PutItem{Key: block.NewKey("chain", uint64(1000+i)), Data: payload(i, 1500+i)}
				if i > 0 {
					items[i].Opts.Parent, items[i].Opts.HasParent = items[i-1].Key.Hash, true
				}
			}
			ctx := withTimeout(t, 30*time.Second)
			for i, err := range w.store.PutBatch(ctx, items) {
				if err != nil {
					t.Fatalf("item %d: %v", i, err)
				}
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.keys) == 0 {
				t.Fatal("no shard of the batch was written locally")
			}
			prev := -1
			for j, k := range rec.keys {
				i := int(k.Hash) - 1000
				if i < 0 || i >= n {
					t.Fatalf("local put %d: key %v is not the batch's", j, k)
				}
				if i < prev || i == prev && tt.k == 1 {
					t.Fatalf("local put %d is item %d, after item %d: not the batch's order", j, i, prev)
				}
				prev = i
				o := rec.opts[j]
				switch {
				case tt.parent && i > 0 && (!o.HasParent || o.Parent != items[i-1].Key.Hash):
					t.Fatalf("item %d's local copy has parent %x (%v), want %x", i, o.Parent, o.HasParent, items[i-1].Key.Hash)
				case tt.parent && i == 0 && o.HasParent:
					t.Fatalf("item 0's local copy has parent %x, want none", o.Parent)
				case !tt.parent && (o.HasParent || o.Parent != 0):
					t.Fatalf("shard %v of item %d has parent %x (%v), want none", k, i, o.Parent, o.HasParent)
				}
			}
			for _, it := range items {
				mustGet(t, w.store, it.Key, it.Data)
			}
		})
	}
}

// TestShardOpts: a whole-block copy keeps the put's parent and checksum; a
// shard gets its own checksum and no parent.
func TestShardOpts(t *testing.T) {
	data := payload(7, 3000)
	in := block.PutOptions{Sum: 0xdeadbeef, HasSum: true, Parent: 42, HasParent: true, Priority: 2, HasPriority: true}
	key := block.NewKey("ns", 9)
	tests := []struct {
		name       string
		key        block.Key
		wantSum    uint32
		wantParent bool
	}{
		{"whole block", key, 0xdeadbeef, true},
		{"shard 1", key.WithShard(0), block.Checksum(data), false},
		{"shard 3", key.WithShard(2), block.Checksum(data), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := shardOpts(tt.key, data, in)
			if o.Sum != tt.wantSum || !o.HasSum {
				t.Fatalf("sum %08x (%v), want %08x", o.Sum, o.HasSum, tt.wantSum)
			}
			if o.HasParent != tt.wantParent || tt.wantParent && o.Parent != 42 || !tt.wantParent && o.Parent != 0 {
				t.Fatalf("parent %d (%v), want kept: %v", o.Parent, o.HasParent, tt.wantParent)
			}
			if o.Priority != 2 || !o.HasPriority {
				t.Fatalf("priority %d (%v) not kept", o.Priority, o.HasPriority)
			}
		})
	}
}

// BenchmarkShardOpts is the options of a one-copy 4 KiB block's shard (the
// whole block, whose CRC the caller verified) and of an erasure shard
// (whose CRC is computed).
func BenchmarkShardOpts(b *testing.B) {
	data := payload(7, 4096)
	in := block.PutOptions{Sum: block.Checksum(data), HasSum: true}
	for _, bc := range []struct {
		name string
		key  block.Key
	}{{"whole block", block.NewKey("ns", 9)}, {"erasure shard", block.NewKey("ns", 9).WithShard(1)}} {
		b.Run(bc.name, func(b *testing.B) {
			for range b.N {
				if o := shardOpts(bc.key, data, in); !o.HasSum {
					b.Fatal("no sum")
				}
			}
		})
	}
}
