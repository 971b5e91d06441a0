package cluster

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// restartWhenWritten arms a hook that, on the first shard write of
// namespace ns that lands on member id, restarts that member empty with a
// new incarnation (the clock now) and waits until the leader's index has
// recorded it: a SIGKILL and restart between a shard write and the commit
// of the placement naming it. Then it runs then (if not nil). The returned
// channel closes once it ran.
func (tc *testCluster) restartWhenWritten(id, ns string, then func()) <-chan struct{} {
	done := make(chan struct{})
	var once sync.Once
	tc.peers.mu.Lock()
	tc.peers.afterPut = func(to string, key block.Key) {
		if to != id || key.Namespace != ns {
			return
		}
		once.Do(func() {
			tn := tc.byID(id)
			inc := uint64(time.Now().UnixNano())
			tc.restartEmptyAs(tn, inc)
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if m, ok := tc.leader().node.FSM().Member(id); ok && m.Incarnation == inc {
					break
				}
			}
			if then != nil {
				then()
			}
			close(done)
		})
	}
	tc.peers.mu.Unlock()
	return done
}

// waitPicked waits until every node's index places every block, with all
// its shards, on the members placement.Pick chooses.
func (tc *testCluster) waitPicked(blocks []testBlock) {
	tc.t.Helper()
	tc.eventually("every block on its picked members", func() bool {
		for _, b := range blocks {
			for _, tn := range tc.nodes {
				e, ok := tn.node.FSM().Lookup(b.key)
				if !ok || !slices.Equal(placedNodes(e), wantNodes(tc.t, tn, b.key)) {
					return false
				}
			}
		}
		return true
	})
}

// TestRebalanceKeepsOldCopyWhenTargetRestarts: the rebalancer copies a
// single-copy block to a joining member, which is killed and restarted
// (empty) after the copy landed and before the placement commits. The
// commit must not name the lost copy, and the old copy must stay: every
// block reads back bit-exact throughout, and the move completes later.
func TestRebalanceKeepsOldCopyWhenTargetRestarts(t *testing.T) {
	tc := newTestCluster(t, 3, func(c *Config) { c.RebalanceInflight = 1 })
	tc.createNS("one", 1, 0)
	tc.createNS("rep", 1, 2)
	blocks := tc.putBlocks(30, 0, "one", "rep")
	tc.waitFull(blocks)
	// Hold n4's writes until the hook is armed (n4 joins below).
	open := tc.peers.gate("n4")
	defer open()
	r := tc.startReader(blocks)
	tc.addNode()
	restarted := tc.restartWhenWritten("n4", "one", nil)
	open()
	select {
	case <-restarted:
	case <-time.After(60 * time.Second):
		t.Fatal("no single-copy block was copied to n4")
	}
	tc.waitPicked(blocks)
	r.finish(t)
	// Copies the FSM dropped may leave garbage on their old holders
	// (leftovers); what matters is that every block reads back.
	perNode := tc.checkBalanced(blocks, true)
	t.Logf("shards per node %v", perNode)
}

// TestPutRewritesShardsDroppedAtCommit: a holder is killed and restarted
// (empty) after its shard of a put landed and before the put's entry
// commits, so the FSM drops that shard. The put must rewrite it and commit
// the full placement before it answers: right after Put returns, the entry
// names every shard, the restarted member holds its shard, and the block
// reads with any one member down. Repair is off, so it is not repair's doing.
func TestPutRewritesShardsDroppedAtCommit(t *testing.T) {
	tests := []struct {
		name string
		k, m int
	}{
		{"replicas", 1, 2},
		{"rs21", 2, 1},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestCluster(t, 3, func(c *Config) { c.RepairInterval = time.Hour })
			tc.createNS(tt.name, tt.k, tt.m)
			ld := tc.leader()
			var followers []string
			for _, tn := range tc.nodes {
				if tn != ld {
					followers = append(followers, tn.id)
				}
			}
			victim, other := followers[0], followers[1]
			// The other follower's write waits for the restart, so the put
			// cannot give up on the victim's write as a straggler.
			open := tc.peers.gate(other)
			defer open()
			restarted := tc.restartWhenWritten(victim, tt.name, open)
			key := block.NewKey(tt.name, uint64(100+i))
			data := payload(100+i, 30_000)
			if err := ld.store.Put(withTimeout(t, 30*time.Second), key, data, block.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-restarted:
			default:
				t.Fatal("the victim's shard write did not run the restart")
			}
			e, ok := ld.node.FSM().Lookup(key)
			if !ok || len(e.Placement) != 3 || !slices.ContainsFunc(e.Placement, func(s fsm.Shard) bool { return s.NodeID == victim }) {
				t.Fatalf("placement after the put: %v (found %v), want 3 shards, one on %s", e.Placement, ok, victim)
			}
			c, err := ld.backend.code(tt.name)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range e.Placement {
				ref, err := tc.byID(s.NodeID).tiers.Get(withTimeout(t, 5*time.Second), shardKey(key, c, int(s.Index)), block.GetOptions{})
				if err != nil {
					t.Fatalf("%s does not hold shard %d: %v", s.NodeID, s.Index, err)
				}
				ref.Release()
			}
			tc.waitEntry(key)
			for _, tn := range tc.nodes {
				mustGet(t, tn.store, key, data)
			}
			tc.readsWithAnyOneDown(key, data)
		})
	}
}
