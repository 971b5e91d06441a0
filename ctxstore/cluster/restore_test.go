package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft/fsm"
	"github.com/ctxtier/ctxtier/tiers"
)

// restartEmpty stops tn's backend and starts it again over an empty tier
// stack, with a new incarnation: a DRAM-only node that was killed and
// restarted at once (its Raft state survives; its memory does not).
func (tc *testCluster) restartEmpty(tn *testNode) {
	tc.t.Helper()
	tc.restartEmptyAs(tn, tn.backend.cfg.Incarnation+1)
}

// restartEmptyAs is restartEmpty with the new start's incarnation.
func (tc *testCluster) restartEmptyAs(tn *testNode, inc uint64) {
	tc.t.Helper()
	tc.restartOver(tn, inc, nil)
}

// restartEmptyOver is restartEmpty with lower under the new DRAM tier.
func (tc *testCluster) restartEmptyOver(tn *testNode, lower tiers.Lower) {
	tc.t.Helper()
	tc.restartOver(tn, tn.backend.cfg.Incarnation+1, lower)
}

func (tc *testCluster) restartOver(tn *testNode, inc uint64, lower tiers.Lower) {
	tc.t.Helper()
	old := tn.backend
	old.Close()
	// Peers see the new, empty stack before the old one closes.
	oldTiers := tn.tiers
	tc.newTiersOver(tn, lower)
	oldTiers.Close()
	tn.cfg.Incarnation = inc
	tc.newBackend(tn)
}

// waitRestored waits until tn's restore is done and the cluster's index no
// longer says it is restoring.
func (tc *testCluster) waitRestored(tn *testNode) {
	tc.t.Helper()
	tc.eventually(tn.id+" restored", func() bool {
		if !tn.backend.Restored() {
			return false
		}
		for _, o := range tc.nodes {
			m, ok := o.node.FSM().Member(tn.id)
			if !ok || m.Incarnation != tn.backend.cfg.Incarnation || m.Restoring {
				return false
			}
		}
		return true
	})
}

// localShards counts the shards the index places on tn that its tier stack
// holds, and those it places there in all.
func localShards(t *testing.T, tn *testNode, blocks []testBlock) (held, placed int) {
	t.Helper()
	for _, b := range blocks {
		e, ok := tn.node.FSM().Lookup(b.key)
		if !ok {
			t.Fatalf("%s: index lost %v", tn.id, b.key)
		}
		c, err := tn.backend.code(b.key.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range e.Placement {
			if s.NodeID == tn.id {
				placed++
				if tn.tiers.Contains(shardKey(b.key, c, int(s.Index))) {
					held++
				}
			}
		}
	}
	return held, placed
}

// TestRollingRestartLosesNothing: every node in turn restarts with an
// empty tier stack (three rounds). Each restores what the index places on
// it from the others before the next one goes, so no acknowledged block,
// three-replica or RS(2,1), is lost and every byte reads back.
func TestRollingRestartLosesNothing(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	tc.createNS("rep", 1, 2)
	tc.createNS("rs", 2, 1)
	blocks := tc.putBlocks(12, 0, "rep", "rs")
	for _, tn := range tc.nodes {
		tc.waitRestored(tn)
	}
	for round := range 3 {
		for _, tn := range tc.nodes {
			before := tn.backend.cfg.Incarnation
			tc.restartEmpty(tn)
			tc.waitRestored(tn)
			held, placed := localShards(t, tn, blocks)
			if held != placed || placed == 0 {
				t.Fatalf("round %d %s: holds %d of the %d shards placed on it", round, tn.id, held, placed)
			}
			// It started empty, so every one of them was restored.
			st := tn.backend.RestoreStatus()
			if !st.Done || st.Lost != 0 || st.Restored != uint64(placed) || st.Checked != placed || st.Incarnation <= before {
				t.Fatalf("round %d %s: restore status %+v (previous incarnation %d)", round, tn.id, st, before)
			}
		}
	}
	for _, b := range blocks {
		for _, tn := range tc.nodes {
			mustGet(t, tn.store, b.key, b.data)
		}
	}
}

// TestRestoringShardsCountAsPending: while a restarted member cannot
// restore (the other holders do not answer), it is not restored, and the
// leader counts the shards placed on it as pending repair.
func TestRestoringShardsCountAsPending(t *testing.T) {
	tc := newTestCluster(t, 3, func(c *Config) { c.DeadAfter = time.Hour })
	tc.createNS("rep", 1, 2)
	blocks := tc.putBlocks(6, 0, "rep")
	leader := tc.leader()
	var victim *testNode
	for _, tn := range tc.nodes {
		if tn != leader {
			victim = tn
		}
	}
	var others []*testNode
	for _, tn := range tc.nodes {
		if tn != victim {
			others = append(others, tn)
		}
	}
	// The leader's shard reads fail, but it still leads; the third node is
	// down too, so no holder answers the restoring node.
	for _, o := range others {
		tc.peers.setDown(o.id, true)
	}
	tc.restartEmpty(victim)
	tc.eventually("the leader sees the restart", func() bool {
		m, _ := leader.node.FSM().Member(victim.id)
		return m.Restoring && m.Incarnation == victim.backend.cfg.Incarnation
	})
	tc.eventually("pending counts the restoring member's shards", func() bool {
		return leader.backend.RepairStatus().Restoring == len(blocks)
	})
	if victim.backend.Restored() {
		t.Fatal("restored with no holder answering")
	}
	if st := leader.backend.RepairStatus(); st.Pending < len(blocks) {
		t.Fatalf("pending %d, want at least %d", st.Pending, len(blocks))
	}
	for _, o := range others {
		tc.peers.setDown(o.id, false)
	}
	tc.waitRestored(victim)
	tc.eventually("pending back to 0", func() bool {
		st := leader.backend.RepairStatus()
		return st.Pending == 0 && st.Restoring == 0
	})
	for _, b := range blocks {
		mustGet(t, victim.store, b.key, b.data)
	}
}

// TestRestoreGivesUpOnlyWhatNoHolderHas: a single-copy block on the
// restarted node is gone (no other holder); the node leaves its placement
// and the entry goes, while its replicated blocks are restored.
func TestRestoreGivesUpOnlyWhatNoHolderHas(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	tc.createNS("one", 1, 0)
	tc.createNS("rep", 1, 2)
	blocks := tc.putBlocks(9, 0, "one", "rep")
	// The victim is the holder of the first single-copy block.
	e, _ := tc.nodes[0].node.FSM().Lookup(blocks[0].key)
	victim := tc.byID(e.Placement[0].NodeID)
	var single, replicated []testBlock
	for _, b := range blocks {
		e, _ := victim.node.FSM().Lookup(b.key)
		if b.key.Namespace == "one" && e.Placement[0].NodeID == victim.id {
			single = append(single, b)
		}
		if b.key.Namespace == "rep" {
			replicated = append(replicated, b)
		}
	}
	tc.restartEmpty(victim)
	tc.waitRestored(victim)
	st := victim.backend.RestoreStatus()
	if st.Lost != uint64(len(single)) {
		t.Fatalf("lost %d, want %d single copies: %+v", st.Lost, len(single), st)
	}
	tc.eventually("the single copies leave the index", func() bool {
		for _, b := range single {
			if _, ok := tc.leader().node.FSM().Lookup(b.key); ok {
				return false
			}
		}
		return true
	})
	for _, b := range replicated {
		mustGet(t, victim.store, b.key, b.data)
	}
	if _, err := victim.store.Get(withTimeout(t, 5*time.Second), single[0].key); err == nil {
		t.Fatal("a lost single copy still reads")
	} else if !errors.Is(err, block.ErrNotFound) {
		t.Fatalf("lost single copy: %v, want NotFound", err)
	}
}

// TestIdentityTellsAStaleAddress: a member whose address reaches another
// member (a restarted node's old port, reused) is not verified, so its
// NotFound cannot make anyone give a block up.
func TestIdentityTellsAStaleAddress(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	ctx := withTimeout(t, 5*time.Second)
	n1, n2, n3 := tc.nodes[0], tc.nodes[1], tc.nodes[2]
	if !n1.backend.verified(ctx, n2.id) || !n1.backend.verified(ctx, n3.id) {
		t.Fatal("members at their own addresses must verify")
	}
	tc.peers.mu.Lock()
	tc.peers.tiers[n2.id] = n3.tiers // n2's address now reaches n3
	tc.peers.mu.Unlock()
	if n1.backend.verified(ctx, n2.id) {
		t.Fatal("n2's address answers as n3, yet n2 verified")
	}
	if n1.backend.allVerified(ctx, []string{n3.id, n2.id}) {
		t.Fatal("allVerified with a stale member")
	}
	tc.peers.mu.Lock()
	tc.peers.tiers[n2.id] = n2.tiers
	tc.peers.mu.Unlock()
	if !n1.backend.allVerified(ctx, []string{n2.id, n3.id, n1.id}) {
		t.Fatal("members back at their addresses must verify")
	}
}

// loadingLower is an empty lower tier that reports whether it has loaded
// its index (as the S3 tier rebuilding from its bucket does).
type loadingLower struct{ loaded atomic.Bool }

func (l *loadingLower) IndexLoaded() bool { return l.loaded.Load() }
func (l *loadingLower) Put(context.Context, block.Key, []byte, uint32, block.PutOptions) error {
	return nil
}
func (l *loadingLower) Get(_ context.Context, k block.Key, _ block.GetOptions) (*block.Ref, error) {
	return nil, fmt.Errorf("%w: %s", block.ErrNotFound, k)
}
func (l *loadingLower) Stat(_ context.Context, k block.Key) (block.Info, error) {
	return block.Info{}, fmt.Errorf("%w: %s", block.ErrNotFound, k)
}
func (l *loadingLower) Contains(block.Key) bool { return false }
func (l *loadingLower) Delete(_ context.Context, k block.Key) error {
	return fmt.Errorf("%w: %s", block.ErrNotFound, k)
}
func (l *loadingLower) Pin(_ context.Context, k block.Key, _ time.Time) error {
	return fmt.Errorf("%w: %s", block.ErrNotFound, k)
}
func (l *loadingLower) List(context.Context, string, string, string, int) ([]block.Info, error) {
	return nil, nil
}

// TestRestoreWaitsForLocalIndexes: a restarted node whose lower tier is
// still loading its index (so Contains misses what the tier may hold) does
// not give up its single copies until the index is loaded; only then are
// the blocks found missing counted lost.
func TestRestoreWaitsForLocalIndexes(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	tc.createNS("one", 1, 0)
	blocks := tc.putBlocks(9, 0, "one")
	e, _ := tc.nodes[0].node.FSM().Lookup(blocks[0].key)
	victim := tc.byID(e.Placement[0].NodeID)
	var single []testBlock
	for _, b := range blocks {
		if e, _ := victim.node.FSM().Lookup(b.key); e.Placement[0].NodeID == victim.id {
			single = append(single, b)
		}
	}
	lower := &loadingLower{}
	tc.restartEmptyOver(victim, lower)

	time.Sleep(time.Second) // restore passes run and must keep waiting
	if victim.backend.Restored() {
		t.Fatal("restore finished while the lower tier was still loading its index")
	}
	if st := victim.backend.RestoreStatus(); st.Lost != 0 {
		t.Fatalf("gave up %d shards while the lower tier was loading: %+v", st.Lost, st)
	}
	for _, b := range single {
		if _, ok := tc.leader().node.FSM().Lookup(b.key); !ok {
			t.Fatalf("%s left the index while the lower tier was loading", b.key)
		}
	}
	lower.loaded.Store(true) // loaded, and it has none of them
	tc.waitRestored(victim)
	if st := victim.backend.RestoreStatus(); st.Lost != uint64(len(single)) {
		t.Fatalf("lost %d, want %d once the index is loaded: %+v", st.Lost, len(single), st)
	}
}

// clusterPastFirstPass starts three nodes with a three-copy namespace "rep"
// holding six blocks and returns them with the leader and a follower whose
// restore has run a pass after its first (one that checks new entries only).
func clusterPastFirstPass(t *testing.T) (*testCluster, *testNode, *testNode, []testBlock) {
	t.Helper()
	tc := newTestCluster(t, 3, func(c *Config) { c.ShardTimeout, c.ProposeTimeout = 10*time.Second, 10*time.Second })
	tc.createNS("rep", 1, 2)
	blocks := tc.putBlocks(6, 0, "rep")
	for _, tn := range tc.nodes {
		tc.waitRestored(tn)
	}
	leader := tc.leader()
	var victim *testNode
	for _, tn := range tc.nodes {
		if tn != leader {
			victim = tn
		}
	}
	tc.eventually("a pass after the first", func() bool { return victim.backend.RestoreStatus().Passes >= 2 })
	return tc, leader, victim, blocks
}

// TestRestoreChecksLateEntriesWithoutScanning: after its restore, a node
// keeps checking, for a shard write and a proposal's time, the entries
// created since its last pass (a put that wrote its shard to the node's
// previous process may commit only now). Those checks read the FSM's record
// of new entries, not the whole index: an entry committed with the node in
// its placement and no copy on it is restored by a pass that does not scan.
func TestRestoreChecksLateEntriesWithoutScanning(t *testing.T) {
	tc, leader, victim, blocks := clusterPastFirstPass(t)
	before := victim.backend.RestoreStatus()
	// A late put: its bytes on the two other holders, none on the victim,
	// and an entry that places it on all three.
	ctx := withTimeout(t, 10*time.Second)
	e, ok := leader.node.FSM().Lookup(blocks[0].key)
	if !ok || len(e.Placement) != 3 {
		t.Fatalf("entry %+v, %v", e, ok)
	}
	late := testBlock{block.NewKey("rep", 1000), payload(1000, 30_000)}
	sum := block.Checksum(late.data)
	for _, tn := range tc.nodes {
		if tn == victim {
			continue
		}
		if err := tn.tiers.Put(ctx, late.key, late.data, sum, block.PutOptions{Sum: sum, HasSum: true}); err != nil {
			t.Fatal(err)
		}
	}
	entry := fsm.Entry{Size: int64(len(late.data)), Sum: sum, Placement: e.Placement, Created: time.Now()}
	res, err := leader.backend.propose(ctx, fsm.PutOp(late.key, entry))
	if err != nil || res[0].Status != fsm.StatusCreated {
		t.Fatalf("propose: %v %+v", err, res)
	}
	tc.eventually("the victim restores the late entry's copy", func() bool { return victim.tiers.Contains(late.key) })
	mustGet(t, victim.store, late.key, late.data)
	// The pass that restored it counts when it ends, after the copy lands.
	tc.eventually("the pass that restored it ends", func() bool { return victim.backend.RestoreStatus().Passes > before.Passes })
	after := victim.backend.RestoreStatus()
	if after.Scans != before.Scans || after.Passes <= before.Passes || after.Restored != before.Restored+1 {
		t.Fatalf("restore status before %+v, after %+v: want more passes, no more scans, one more shard restored", before, after)
	}
	if after.Scans < 1 {
		t.Fatalf("no pass scanned the index: %+v", after)
	}
}

// TestRestoreSkipsShardsTheTierDropped: a shard missing on a restored node
// because its own tier gave it up (a capacity drop queued, not yet
// committed) is not rebuilt from the other holders, which would undo the
// eviction; a shard of another entry committed with it, missing the same
// way but with no drop queued, is rebuilt in the same pass (so the skip is
// what keeps the first out).
func TestRestoreSkipsShardsTheTierDropped(t *testing.T) {
	tc, leader, victim, blocks := clusterPastFirstPass(t)
	ctx := withTimeout(t, 10*time.Second)
	e, ok := leader.node.FSM().Lookup(blocks[0].key)
	if !ok || len(e.Placement) != 3 {
		t.Fatalf("entry %+v, %v", e, ok)
	}
	// Two entries placing a block on all three, with copies on the two
	// others only; the victim's tier has given up the first (its drop is
	// queued), the second is simply missing.
	dropped := testBlock{block.NewKey("rep", 2000), payload(2000, 30_000)}
	missing := testBlock{block.NewKey("rep", 2001), payload(2001, 30_000)}
	var ops []fsm.Op
	for _, b := range []testBlock{dropped, missing} {
		sum := block.Checksum(b.data)
		for _, tn := range tc.nodes {
			if tn != victim {
				if err := tn.tiers.Put(ctx, b.key, b.data, sum, block.PutOptions{Sum: sum, HasSum: true}); err != nil {
					t.Fatal(err)
				}
			}
		}
		ops = append(ops, fsm.PutOp(b.key, fsm.Entry{Size: int64(len(b.data)), Sum: sum, Placement: e.Placement, Created: time.Now()}))
	}
	victim.backend.drops.gap.queue(dropped.key)
	defer victim.backend.drops.gap.unqueue(dropped.key)
	before := victim.backend.RestoreStatus()
	if res, err := leader.backend.propose(ctx, ops...); err != nil || res[0].Status != fsm.StatusCreated || res[1].Status != fsm.StatusCreated {
		t.Fatalf("propose: %v %+v", err, res)
	}
	tc.eventually("the victim rebuilds the missing shard", func() bool { return victim.tiers.Contains(missing.key) })
	mustGet(t, victim.store, missing.key, missing.data)
	tc.eventually("a pass after that", func() bool { return victim.backend.RestoreStatus().Passes >= before.Passes+3 })
	if victim.tiers.Contains(dropped.key) {
		t.Fatal("the restore rebuilt a shard whose drop was queued")
	}
	st := victim.backend.RestoreStatus()
	if st.Restored != before.Restored+1 || st.Lost != before.Lost || st.Skipped < before.Skipped+1 {
		t.Fatalf("restore status before %+v, after %+v: want one shard restored, none lost, the dropped one skipped", before, st)
	}
}
