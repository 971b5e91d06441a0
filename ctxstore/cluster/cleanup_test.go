package cluster

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/erasure"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// TestCleanupSparesANewVersion reproduces the slot-reuse hazard of shard
// cleanup: version A of a key is deleted while one holder's copy of A is
// already gone (evicted, its index correction not yet committed); before
// the delete's cleanup reaches that holder, version B of the same key is
// put and lands a shard there. A cleanup by key deleted B's shard (lost
// until repair); a cleanup conditioned on A's checksum leaves it, so every
// shard the index names for B is on its holder with B's bytes, and every
// node reads B.
func TestCleanupSparesANewVersion(t *testing.T) {
	for _, tt := range []struct {
		name        string
		k, m, nodes int
	}{
		{"replicas", 1, 1, 3},
		{"erasure", 2, 1, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestCluster(t, tt.nodes, nil)
			tc.createNS("reuse", tt.k, tt.m)
			ctx := withTimeout(t, 60*time.Second)
			key := block.NewKey("reuse", 42)
			a, b := payload(1, 6000), payload(2, 6000)
			if err := tc.nodes[0].store.Put(ctx, key, a, block.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			tc.waitSpread(key, tt.k+tt.m)
			e, _ := tc.nodes[0].node.FSM().Lookup(key)
			holds := func(id string) bool {
				return slices.ContainsFunc(e.Placement, func(s fsm.Shard) bool { return s.NodeID == id })
			}
			var deleter *testNode
			for _, n := range tc.nodes {
				if !holds(n.id) {
					deleter = n // every shard delete of its cleanup goes through the peers
				}
			}
			c, err := erasure.New(tt.k, tt.m)
			if err != nil {
				t.Fatal(err)
			}
			victim := e.Placement[0]
			// The victim's copy of A is gone before the delete (an eviction
			// whose index correction has not committed yet).
			if err := tc.byID(victim.NodeID).tiers.Delete(ctx, shardKey(key, c, int(victim.Index))); err != nil {
				t.Fatal(err)
			}

			var once sync.Once
			var putErr error
			putB := func() error {
				// Wait for the other holders' deletes of A (they run
				// alongside) and for the writer's index to apply the
				// delete, then put B through the deleter.
				deadline := time.Now().Add(20 * time.Second)
				for {
					busy := false
					for _, s := range e.Placement[1:] {
						busy = busy || tc.byID(s.NodeID).tiers.Contains(shardKey(key, c, int(s.Index)))
					}
					if _, ok := deleter.node.FSM().Lookup(key); !ok && !busy {
						break
					}
					if time.Now().After(deadline) {
						return errors.New("A's other copies or its index entry were never deleted")
					}
					time.Sleep(5 * time.Millisecond)
				}
				return deleter.store.Put(ctx, key, b, block.PutOptions{})
			}
			tc.peers.mu.Lock()
			tc.peers.beforeDelete = func(id string, sk block.Key) {
				if id == victim.NodeID && sk.Block() == key {
					once.Do(func() { putErr = putB() })
				}
			}
			tc.peers.mu.Unlock()

			if err := deleter.store.Delete(ctx, key); err != nil {
				t.Fatal(err)
			}
			tc.peers.mu.Lock()
			tc.peers.beforeDelete = nil
			tc.peers.mu.Unlock()
			hookRan := true
			once.Do(func() { hookRan = false })
			if !hookRan {
				t.Fatal("the cleanup never sent a delete to the victim")
			}
			if putErr != nil {
				t.Fatalf("putting B during A's cleanup: %v", putErr)
			}
			tc.waitSpread(key, tt.k+tt.m)
			nb, _ := tc.nodes[0].node.FSM().Lookup(key)
			if nb.Sum != block.Checksum(b) {
				t.Fatalf("index holds crc32c %08x, want B's %08x", nb.Sum, block.Checksum(b))
			}
			shards, err := c.Encode(b)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range nb.Placement {
				sk := shardKey(key, c, int(s.Index))
				info, err := tc.byID(s.NodeID).tiers.Stat(ctx, sk)
				if err != nil {
					t.Errorf("B's shard %d on %s: %v (deleted by A's cleanup)", s.Index, s.NodeID, err)
					continue
				}
				if want := block.Checksum(shards[s.Index]); info.Sum != want {
					t.Errorf("B's shard %d on %s holds crc32c %08x, want %08x", s.Index, s.NodeID, info.Sum, want)
				}
			}
			for _, n := range tc.nodes {
				mustGet(t, n.store, key, b)
			}
			if t.Failed() {
				t.Logf("placement of B: %v", nb.Placement)
			}
		})
	}
}

// TestDeleteShardIfOnlyDeletesThatVersion: a node's own conditional shard
// delete (the path its cleanups take for local copies) refuses a copy with
// other bytes and deletes the one it names.
func TestDeleteShardIfOnlyDeletesThatVersion(t *testing.T) {
	tc := newTestCluster(t, 1, nil)
	tc.createNS("cond1", 1, 0)
	n := tc.nodes[0]
	ctx := withTimeout(t, 10*time.Second)
	key := block.NewKey("cond1", 5)
	data := payload(3, 1000)
	if err := n.tiers.Put(ctx, key, data, block.Checksum(data), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, st := range []struct {
		name string
		sum  uint32
		want error
		kept bool
	}{
		{"other bytes", block.Checksum(data) ^ 1, block.ErrNotFound, true},
		{"this version", block.Checksum(data), nil, false},
		{"gone", block.Checksum(data), block.ErrNotFound, false},
	} {
		err := n.backend.deleteShard(context.Background(), n.id, key, st.sum, true)
		if !errors.Is(err, st.want) && (st.want != nil || err != nil) {
			t.Fatalf("%s: %v, want %v", st.name, err, st.want)
		}
		if got := n.tiers.Contains(key); got != st.kept {
			t.Fatalf("%s: block present %v, want %v", st.name, got, st.kept)
		}
	}
}
