package cluster

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// restartWhenWritten arms a hook that, on the first shard write of
// namespace ns that lands on member id, restarts that member empty with a
// new incarnation (the clock now) and waits until the leader's index has
// recorded it: a SIGKILL and restart between a shard write and the commit
// of the placement naming it. The returned channel closes once it ran.
func (tc *testCluster) restartWhenWritten(id, ns string) <-chan struct{} {
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
	restarted := tc.restartWhenWritten("n4", "one")
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
