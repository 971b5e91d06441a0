package cluster

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

type testBlock struct {
	key  block.Key
	data []byte
}

// putBlocks puts n blocks into each namespace, through every node in turn.
func (tc *testCluster) putBlocks(n int, seed int, nss ...string) []testBlock {
	tc.t.Helper()
	ctx := withTimeout(tc.t, 20*time.Second)
	var out []testBlock
	for i := range n {
		for j, ns := range nss {
			s := seed + i*len(nss) + j
			b := testBlock{block.NewKey(ns, uint64(s)), payload(s, 20_000+s%7)}
			if err := tc.nodes[s%len(tc.nodes)].store.Put(ctx, b.key, b.data, block.PutOptions{}); err != nil {
				tc.t.Fatal(err)
			}
			out = append(out, b)
		}
	}
	return out
}

// drainOf is the leader's drain status of member id (zero while no leader
// is known).
func (tc *testCluster) drainOf(id string) DrainStatus {
	for _, tn := range tc.nodes {
		if !tn.node.IsLeader() {
			continue
		}
		for _, d := range tn.backend.Drains() {
			if d.ID == id && d.Active {
				return d
			}
		}
	}
	return DrainStatus{}
}

func TestDrainMovesEveryShard(t *testing.T) {
	tc := newTestCluster(t, 5, nil)
	tc.createNS("one", 1, 0)
	tc.createNS("rep", 1, 2)
	tc.createNS("rs", 2, 1)
	blocks := tc.putBlocks(10, 0, "one", "rep", "rs")
	leader := tc.leader()
	var victims, others []*testNode
	for _, tn := range tc.nodes {
		if tn != leader && len(victims) < 2 {
			victims = append(victims, tn)
		} else {
			others = append(others, tn)
		}
	}
	ctx := withTimeout(t, 30*time.Second)
	if _, err := leader.backend.Drain(ctx, "n9"); !errors.Is(err, block.ErrNotFound) {
		t.Fatalf("drain of an unknown member: %v", err)
	}
	if _, err := victims[0].backend.Drain(ctx, victims[0].id); !errors.Is(err, raft.ErrNotLeader) {
		t.Fatalf("drain on a follower: %v", err)
	}
	// One single copy on the first victim is lost behind the index's back
	// (as when a node restarts with an empty memory tier): the drain finds
	// it nowhere and deletes its entry instead of stalling on it.
	var lost block.Key
	for _, b := range blocks {
		e, _ := leader.node.FSM().Lookup(b.key)
		if b.key.Namespace == "one" && e.Placement[0].NodeID == victims[0].id {
			lost = b.key
			if err := victims[0].tiers.Delete(ctx, b.key); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if lost == (block.Key{}) {
		t.Fatalf("%s holds no single copy: the test needs one", victims[0].id)
	}
	// The moved counters are the leader's own: a leader that loses
	// leadership even briefly (a loaded machine) does not see the moves an
	// interim leader made, so they are compared only when its term, read
	// here before the first drain, is the same at the end.
	term := leader.node.Stats()["term"]
	held := map[string]int{}
	for _, v := range victims {
		shards, blocks := leader.backend.Holding(v.id)
		if shards == 0 || blocks == 0 {
			t.Fatalf("%s holds nothing: the test needs it to", v.id)
		}
		st, err := leader.backend.Drain(ctx, v.id)
		if err != nil {
			t.Fatal(err)
		}
		if st.ShardsLeft != shards || st.BlocksLeft != blocks || st.Done || st.Namespaces["rep"] == 0 {
			t.Fatalf("drain of %s started with %+v; it holds %d shards of %d blocks", v.id, st, shards, blocks)
		}
		held[v.id] = shards
	}
	// A third drain would leave two members for "rep" (three copies): refused.
	_, err := leader.backend.Drain(ctx, others[1].id)
	if !errors.Is(err, block.ErrInvalidArgument) || !strings.Contains(err.Error(), `namespace "rep"`) {
		t.Fatalf("third drain: %v", err)
	}
	// Draining again is a no-op; a re-join (as alive) keeps the drain.
	if _, err := leader.backend.Drain(ctx, victims[0].id); err != nil {
		t.Fatal(err)
	}
	m, _ := leader.node.FSM().Member(victims[0].id)
	m.State = fsm.MemberAlive
	if err := leader.node.Join(ctx, m); err != nil {
		t.Fatal(err)
	}
	// Once a node knows of the drains, its puts never land on a draining
	// member (one in flight before may: the next pass moves it).
	tc.eventually("every node knows of the drains", func() bool {
		for _, tn := range tc.nodes {
			for _, v := range victims {
				if m, _ := tn.node.FSM().Member(v.id); m.State != fsm.MemberDraining {
					return false
				}
			}
		}
		return true
	})
	later := tc.putBlocks(6, 1000, "one", "rep", "rs")
	for _, b := range later {
		e, _ := leader.node.FSM().Lookup(b.key)
		for _, s := range e.Placement {
			if s.NodeID == victims[0].id || s.NodeID == victims[1].id {
				t.Fatalf("%v placed on draining %s", b.key, s.NodeID)
			}
		}
	}
	tc.eventually("both drains done", func() bool {
		return tc.drainOf(victims[0].id).Done && tc.drainOf(victims[1].id).Done
	})
	sameLeader := leader.node.IsLeader() && leader.node.Stats()["term"] == term
	if !sameLeader {
		t.Logf("leadership changed during the drains (term %s, now %s): moved counters not compared", term, leader.node.Stats()["term"])
	}
	for _, v := range victims {
		d := tc.drainOf(v.id)
		lost := 0
		if v == victims[0] {
			lost = 1
		}
		if shards, _ := leader.backend.Holding(v.id); shards != 0 || sameLeader && (d.MovedShards != uint64(held[v.id]-lost) || d.LostBlocks != uint64(lost) || d.MovedBytes == 0) || d.Stuck != 0 || d.Stalled || d.Unreachable {
			// The rebalancer's moves are printed too: a shard it moved off
			// v is not the drain's to count (a flake of this kind was seen
			// once under CI load: one shard fewer moved than held).
			t.Errorf("%s: holds %d shards after the drain; status %+v, want %d moved and %d lost; rebalancing moved %d shards meanwhile",
				v.id, shards, d, held[v.id]-lost, lost, leader.backend.RebalanceStatus().MovedShards)
		}
		if mm, _ := leader.node.FSM().Member(v.id); mm.State != fsm.MemberDraining {
			t.Errorf("%s is %s after the drain, want draining until removed", v.id, mm.State)
		}
		// The copies left behind were deleted.
		for _, b := range append(blocks, later...) {
			if b.key.Namespace != "rs" && v.tiers.Contains(b.key) {
				t.Errorf("%s still stores %v", v.id, b.key)
			}
		}
	}
	if _, ok := leader.node.FSM().Lookup(lost); ok {
		t.Errorf("lost block %v still indexed", lost)
	}
	blocks = slices.DeleteFunc(blocks, func(b testBlock) bool { return b.key == lost })
	// Every block keeps its redundancy, off the drained members.
	for _, b := range append(blocks, later...) {
		e, _ := leader.node.FSM().Lookup(b.key)
		nodes := map[string]bool{}
		for _, s := range e.Placement {
			nodes[s.NodeID] = true
		}
		want := map[string]int{"one": 1, "rep": 3, "rs": 3}[b.key.Namespace]
		if len(e.Placement) != want || len(nodes) != want {
			t.Errorf("%v: placement %+v, want %d shards on distinct members", b.key, e.Placement, want)
		}
	}
	// Removing the drained members loses nothing.
	for _, v := range victims {
		tc.peers.setDown(v.id, true)
		if err := leader.node.Remove(ctx, v.id); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range append(blocks, later...) {
		for _, r := range others {
			mustGet(t, r.store, b.key, b.data)
		}
	}
	if st := leader.backend.RepairStatus(); st.Pending != 0 {
		t.Errorf("repair status after removal %+v", st)
	}
}

func TestDrainCancel(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	leader := tc.leader()
	f := tc.follower()
	ctx := withTimeout(t, 10*time.Second)
	if err := leader.backend.CancelDrain(ctx, f.id); !errors.Is(err, block.ErrInvalidArgument) {
		t.Fatalf("cancel without a drain: %v", err)
	}
	if _, err := leader.backend.Drain(ctx, f.id); err != nil {
		t.Fatal(err)
	}
	if d := leader.backend.Drains(); len(d) != 1 || d[0].ID != f.id || !d[0].Done || !d[0].Active {
		t.Fatalf("drains %+v", d)
	}
	if err := leader.backend.CancelDrain(ctx, f.id); err != nil {
		t.Fatal(err)
	}
	if m, _ := leader.node.FSM().Member(f.id); m.State != fsm.MemberAlive || leader.backend.Drains() != nil {
		t.Fatalf("after cancel: %s, drains %+v", m.State, leader.backend.Drains())
	}
}

// TestDrainOfMemberThatDies: the draining member stops answering half way.
// Shards with parity elsewhere are rebuilt from the other holders; blocks
// whose only copy is on it are reported stuck, and move once it is back.
func TestDrainOfMemberThatDies(t *testing.T) {
	// 100 kB/s: each shard copy of ~20 kB waits 0.2 s, so the drain lasts
	// long enough to be interrupted.
	tc := newTestCluster(t, 4, func(c *Config) { c.RepairBytesPerSec = 100_000 })
	tc.createNS("one", 1, 0)
	tc.createNS("rep", 1, 2)
	tc.createNS("rs", 2, 1)
	blocks := append(tc.putBlocks(8, 0, "one", "rep", "rs"), tc.putBlocks(16, 500, "one")...)
	leader := tc.leader()
	victim := tc.follower()
	ctx := withTimeout(t, 30*time.Second)
	st, err := leader.backend.Drain(ctx, victim.id)
	if err != nil {
		t.Fatal(err)
	}
	// Repair goes through the namespaces in name order, "one" first: the
	// member dies after the first shard moved, with single copies left.
	if st.Namespaces["one"] < 2 {
		t.Fatalf("%s holds %d single-copy blocks (%+v): the test needs two", victim.id, st.Namespaces["one"], st)
	}
	tc.eventually("the drain under way", func() bool { return tc.drainOf(victim.id).MovedShards > 0 })
	tc.peers.setDown(victim.id, true)
	var d DrainStatus
	tc.eventually("the drain stalled on single copies only", func() bool {
		d = tc.drainOf(victim.id)
		return d.Stalled && d.Unreachable && len(d.Namespaces) == 1 && d.Namespaces["one"] > 0
	})
	if d.Stuck != d.BlocksLeft || d.Done {
		t.Fatalf("stalled drain %+v", d)
	}
	t.Logf("stalled with %d single-copy blocks on the dead member, %d shards moved", d.Stuck, d.MovedShards)
	for _, b := range blocks {
		if b.key.Namespace != "one" {
			mustGet(t, leader.store, b.key, b.data)
		}
	}
	if m, _ := leader.node.FSM().Member(victim.id); m.State != fsm.MemberDraining {
		t.Fatalf("dead draining member is %s", m.State)
	}
	// It comes back: the drain finishes.
	tc.peers.setDown(victim.id, false)
	tc.eventually("the drain done", func() bool {
		d = tc.drainOf(victim.id)
		return d.Done && !d.Unreachable
	})
	tc.peers.setDown(victim.id, true)
	for _, b := range blocks {
		mustGet(t, leader.store, b.key, b.data)
	}
}
