package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/erasure"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// A member that restarts on another data address (ctxd's peer port is
// ephemeral unless --peer-listen names one) is unreachable for shard writes
// until its new record commits: a put meanwhile is acknowledged with k
// shards of RS(k,m) and no redundancy. These tests pin the two rules that
// keep a rolling restart from losing such a block: the member is not
// restored (so not ready) before its record carries the new address, and
// a shard write that failed at an old address tries the new one.

// followerOf returns a node that is not the leader.
func (tc *testCluster) followerOf() *testNode {
	tc.t.Helper()
	ld := tc.leader()
	for _, tn := range tc.nodes {
		if tn != ld {
			return tn
		}
	}
	tc.t.Fatal("no follower")
	return nil
}

// TestNotRestoredBeforeNewAddressRegistered: a member restarted on a new
// data address, whose record cannot be updated yet, stays not restored;
// puts meanwhile miss its shard. Once the record commits it is restored,
// and puts reach it again.
func TestNotRestoredBeforeNewAddressRegistered(t *testing.T) {
	// No member is marked dead for failing probes at its old address.
	tc := newTestCluster(t, 3, func(c *Config) { c.DeadAfter = time.Hour })
	tc.createNS("rs", 2, 1)
	tn := tc.followerOf()
	// Hold every member-record change that goes through the leader.
	var mu sync.Mutex
	held := true
	tc.fwd.mu.Lock()
	tc.fwd.refuse = func(req []byte) error {
		c, err := fsm.DecodeCommand(req)
		mu.Lock()
		defer mu.Unlock()
		if err == nil && c.Type == fsm.CmdMember && held {
			return fmt.Errorf("%w: leader unreachable for member records (test)", block.ErrUnavailable)
		}
		return nil
	}
	tc.fwd.mu.Unlock()
	newAddr := tn.id + ":20002"
	tc.peers.mu.Lock()
	tc.peers.addrs = map[string]string{tn.id: newAddr}
	tc.peers.mu.Unlock()
	self := tc.member(tn)
	self.DataAddr = newAddr
	tn.cfg.Self = self
	tc.restartEmpty(tn)

	// A put while the record is stale: the shard meant for tn fails at its
	// old address.
	ctx := withTimeout(t, 20*time.Second)
	k0 := block.NewKey("rs", 1)
	if err := tc.leader().store.Put(ctx, k0, payload(1, 30_000), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if e, _ := tc.leader().node.FSM().Lookup(k0); placedOnNode(e.Placement, tn.id) {
		t.Fatalf("a shard reached %s at its old address: %v", tn.id, e.Placement)
	}
	// The restore does not finish while the record is stale: sample for a
	// while (a restore of an empty member takes milliseconds here).
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if tn.backend.Restored() || tn.backend.SelfRegistered() {
			t.Fatalf("%s restored=%v registered=%v while its record still has the old address", tn.id, tn.backend.Restored(), tn.backend.SelfRegistered())
		}
	}
	mu.Lock()
	held = false
	mu.Unlock()
	tc.waitRestored(tn)
	if m, _ := tc.leader().node.FSM().Member(tn.id); m.DataAddr != newAddr {
		t.Fatalf("restored, but the leader's record of %s has data address %q, want %q", tn.id, m.DataAddr, newAddr)
	}
	k1 := block.NewKey("rs", 2)
	if err := tc.leader().store.Put(ctx, k1, payload(2, 30_000), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if e, _ := tc.leader().node.FSM().Lookup(k1); len(e.Placement) != 3 || !placedOnNode(e.Placement, tn.id) {
		t.Fatalf("after the record commits, a put is placed %v, want all 3 shards with one on %s", e.Placement, tn.id)
	}
	// Repair gives the first block its third shard back.
	tc.eventually("the short block repaired", func() bool {
		e, _ := tc.leader().node.FSM().Lookup(k0)
		return len(e.Placement) == 3
	})
}

// TestShardWriteFollowsNewAddress: shard writes refused at a member's old
// address, while the member's new record commits, are written again at the
// new one, so the puts keep every shard: a lone write (writeShard) and a
// batch's writes to one member (putShardsTo, one PutShards request).
func TestShardWriteFollowsNewAddress(t *testing.T) {
	for _, n := range []int{1, 8} {
		t.Run(fmt.Sprintf("%d blocks", n), func(t *testing.T) {
			tc := newTestCluster(t, 3, func(c *Config) { c.DeadAfter = time.Hour })
			tc.createNS("rs", 2, 1)
			ld := tc.leader()
			tn := tc.followerOf()
			newAddr := tn.id + ":20002"
			self := tc.member(tn)
			self.DataAddr = newAddr
			self.State = fsm.MemberAlive
			var once sync.Once
			var setErr error
			tc.peers.mu.Lock()
			tc.peers.addrs = map[string]string{tn.id: newAddr}
			tc.peers.onStale = func(id string) {
				once.Do(func() {
					// The new record commits while the write at the old
					// address fails.
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					setErr = ld.node.SetMember(ctx, self)
				})
			}
			tc.peers.mu.Unlock()
			ctx := withTimeout(t, 20*time.Second)
			items := make([]ctxstore.PutItem, n)
			for i := range items {
				items[i] = ctxstore.PutItem{Key: block.NewKey("rs", uint64(7+i)), Data: payload(7+i, 30_000)}
			}
			for i, err := range ld.store.PutBatch(ctx, items) {
				if err != nil {
					t.Fatalf("item %d: %v", i, err)
				}
			}
			if setErr != nil {
				t.Fatal(setErr)
			}
			for _, it := range items {
				e, _ := ld.node.FSM().Lookup(it.Key)
				if len(e.Placement) != 3 || !placedOnNode(e.Placement, tn.id) {
					t.Fatalf("%v: placement %v: want 3 shards, one on %s at its new address", it.Key, e.Placement, tn.id)
				}
				if !tn.tiers.Contains(shardKey(it.Key, mustCode(t, ld, "rs"), shardOn(e.Placement, tn.id))) {
					t.Fatalf("%s does not hold the shard of %v the index places on it", tn.id, it.Key)
				}
				mustGet(t, ld.store, it.Key, it.Data)
			}
		})
	}
}

func placedOnNode(place []fsm.Shard, id string) bool {
	for _, s := range place {
		if s.NodeID == id {
			return true
		}
	}
	return false
}

func shardOn(place []fsm.Shard, id string) int {
	for _, s := range place {
		if s.NodeID == id {
			return int(s.Index)
		}
	}
	return -1
}

func mustCode(t *testing.T, tn *testNode, ns string) *erasure.Code {
	t.Helper()
	c, err := tn.backend.code(ns)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
