package cluster

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// TestDrainAcrossLeaderFlip: leadership moves to another node while two
// drains run, and back once that node has moved something. The node that
// stepped down may be in the middle of a block: it finishes it as a
// follower, forwarding its placement change, while the other leader moves
// the same blocks. In the end no member keeps a copy the index does not
// name (one on a drained member stayed there for good), every copy the
// index names is really stored, and every block keeps its redundancy off
// the drained members.
func TestDrainAcrossLeaderFlip(t *testing.T) {
	tc := newTestCluster(t, 5, nil)
	blocks := tc.putEachCode(12)
	leader := tc.leader()
	var victims, others []*testNode
	for _, tn := range tc.nodes {
		if tn != leader && len(victims) < 2 {
			victims = append(victims, tn)
		} else if tn != leader {
			others = append(others, tn)
		}
	}
	ctx := withTimeout(t, 60*time.Second)
	for _, v := range victims {
		if _, err := leader.backend.Drain(ctx, v.id); err != nil {
			t.Fatal(err)
		}
	}
	interim := others[0]
	if err := leader.node.TransferLeadership(ctx, interim.id); err != nil {
		t.Fatal(err)
	}
	tc.eventually("the interim leader moved something", func() bool {
		l := tc.leader()
		return l != leader && tc.drainOf(victims[0].id).MovedShards+tc.drainOf(victims[1].id).MovedShards > 0
	})
	if l := tc.leader(); l != leader {
		if err := l.node.TransferLeadership(ctx, leader.id); err != nil {
			t.Fatal(err)
		}
	}
	tc.eventually("both drains done", func() bool {
		return tc.drainOf(victims[0].id).Done && tc.drainOf(victims[1].id).Done
	})
	tc.waitPlacedAsStored(leader, blocks)
	for _, b := range blocks {
		mustGet(t, others[1].store, b.key, b.data)
	}
}

// TestRebalanceAcrossLeaderFlip: the leader's rebalancing page is
// copying shards to a member that joined when leadership moves away. The
// old leader finishes the page as a follower (its placement changes
// forwarded) while the new leader plans the same moves. In the end every
// copy stored is one the index names, and every copy named is stored.
func TestRebalanceAcrossLeaderFlip(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	blocks := tc.putEachCode(12)
	tc.waitFull(blocks)
	leader := tc.leader()
	open := tc.peers.gate("n4")
	defer open()
	tc.addNode()
	tc.eventually("the page's copies held at n4's gate", func() bool {
		tc.peers.mu.Lock()
		defer tc.peers.mu.Unlock()
		return tc.peers.gated > 0
	})
	next := tc.nodes[0]
	if next == leader {
		next = tc.nodes[1]
	}
	ctx := withTimeout(t, 60*time.Second)
	if err := leader.node.TransferLeadership(ctx, next.id); err != nil {
		t.Fatal(err)
	}
	tc.eventually("a new leader", func() bool { return tc.leader() != leader })
	open()
	opened := time.Now()
	tc.eventually("rebalancing done", func() bool {
		st := tc.rebalanceOf()
		return st.Active && st.LastScan.After(opened) && st.Pending == 0 && !st.Running
	})
	tc.waitPlacedAsStored(tc.leader(), blocks)
	for _, b := range blocks {
		mustGet(t, next.store, b.key, b.data)
	}
}

// putEachCode creates namespaces of a single copy ("one"), three replicas
// ("rep") and RS(2,1) ("rs"), and puts n blocks into each.
func (tc *testCluster) putEachCode(n int) []testBlock {
	tc.t.Helper()
	tc.createNS("one", 1, 0)
	tc.createNS("rep", 1, 2)
	tc.createNS("rs", 2, 1)
	return tc.putBlocks(n, 0, "one", "rep", "rs")
}

// waitPlacedAsStored waits until misplaced finds nothing, as read on node
// at: a copy still being deleted may linger a moment, one left behind
// stays. It waits generously (-race beside other tests on 2 cores) and
// reports what is still wrong at the end.
func (tc *testCluster) waitPlacedAsStored(at *testNode, blocks []testBlock) {
	tc.t.Helper()
	var wrong []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		wrong = tc.misplaced(at, blocks)
		if len(wrong) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, w := range wrong {
		tc.t.Error(w)
	}
}

// misplaced lists, as read on node at, the copies that members store but
// the index does not name (a drained member's included), the copies the
// index names that their member does not store, and the blocks whose
// placement is not n shards on distinct alive members.
func (tc *testCluster) misplaced(at *testNode, blocks []testBlock) []string {
	var out []string
	f := at.node.FSM()
	for _, b := range blocks {
		ns, _ := f.Namespace(b.key.Namespace)
		k, n := max(ns.DataShards, 1), max(ns.DataShards, 1)+ns.ParityShards
		shardKeyOf := func(i uint16) block.Key {
			if k == 1 {
				return b.key
			}
			return b.key.WithShard(int(i))
		}
		e, ok := f.Lookup(b.key)
		if !ok {
			out = append(out, fmt.Sprintf("%v: no index entry", b.key))
			continue
		}
		named := func(id string, i uint16) bool {
			return slices.ContainsFunc(e.Placement, func(s fsm.Shard) bool { return s.NodeID == id && (k == 1 || s.Index == i) })
		}
		copies := n // the shard keys of the block: one for replicas
		if k == 1 {
			copies = 1
		}
		for _, tn := range tc.nodes {
			for i := range copies {
				if sk := shardKeyOf(uint16(i)); tn.tiers.Contains(sk) && !named(tn.id, uint16(i)) {
					out = append(out, fmt.Sprintf("%s stores %v, which placement %v does not name", tn.id, sk, e.Placement))
				}
			}
		}
		nodes := map[string]bool{}
		for _, s := range e.Placement {
			nodes[s.NodeID] = true
			if m, _ := f.Member(s.NodeID); m.State != fsm.MemberAlive {
				out = append(out, fmt.Sprintf("%v: placement %v names %s, which is %s", b.key, e.Placement, s.NodeID, m.State))
			}
			if !tc.byID(s.NodeID).tiers.Contains(shardKeyOf(s.Index)) {
				out = append(out, fmt.Sprintf("%v: placement %v names %s, which does not store %v", b.key, e.Placement, s.NodeID, shardKeyOf(s.Index)))
			}
		}
		if len(e.Placement) != n || len(nodes) != n {
			out = append(out, fmt.Sprintf("%v: placement %v, want %d shards on distinct members", b.key, e.Placement, n))
		}
	}
	return out
}
