package cluster

import (
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/erasure"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

func TestWriteQuorum(t *testing.T) {
	// redundant: the shards after which a slow live member is left to
	// repair (redundantWrites); below it only failed writes let a put
	// commit on its quorum.
	tests := []struct {
		k, m, n, want, redundant int
	}{
		{1, 0, 1, 1, 1}, // one copy: that copy
		{1, 2, 3, 2, 2}, // three replicas: two
		{1, 2, 2, 1, 2}, // three replicas on two members: one may be down, but not merely slow
		{2, 1, 3, 2, 3}, // RS(2,1): the data shards' worth if one member is down; all three if it is slow
		{4, 2, 6, 5, 5},
		{2, 0, 2, 2, 2}, // no parity: every shard
		{6, 3, 9, 8, 8},
	}
	for _, tc := range tests {
		c, err := erasure.New(tc.k, tc.m)
		if err != nil {
			t.Fatal(err)
		}
		if got := writeQuorum(c, tc.n); got != tc.want {
			t.Errorf("RS(%d,%d) over %d shards: quorum %d, want %d", tc.k, tc.m, tc.n, got, tc.want)
		}
		if got := max(tc.want, redundantWrites(c, tc.n)); got != tc.redundant {
			t.Errorf("RS(%d,%d) over %d shards: waits for a slow member until %d are written, want %d", tc.k, tc.m, tc.n, got, tc.redundant)
		}
	}
}

// TestPutSurvivesADeadMember: a member dies and is not yet suspect (the
// failure detector would take DeadAfter/2). Puts of every code go on: a
// shard meant for the dead member goes to a spare member when there is
// one, and otherwise the put is acknowledged on its write quorum; repair
// writes the missing shard once the member is back.
func TestPutSurvivesADeadMember(t *testing.T) {
	for _, tc := range []struct {
		name         string
		nodes        int
		wantComplete bool // every block has k+m shards on live members
	}{
		{"spare member", 4, true},
		{"no spare member", 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := newTestCluster(t, tc.nodes, func(c *Config) { c.DeadAfter = time.Hour })
			cl.createNS("one", 1, 0)
			cl.createNS("rep", 1, 2)
			cl.createNS("rs", 2, 1)
			leader := cl.leader()
			var dead *testNode
			for _, tn := range cl.nodes {
				if tn != leader {
					dead = tn
				}
			}
			cl.peers.setDown(dead.id, true)
			var writer *testNode
			for _, tn := range cl.nodes {
				if tn != dead {
					writer = tn
				}
			}
			ctx := withTimeout(t, 30*time.Second)
			var blocks []testBlock
			for i := range 24 {
				ns := []string{"one", "rep", "rs"}[i%3]
				b := testBlock{block.NewKey(ns, uint64(100+i)), payload(i, 10_000+i)}
				if err := writer.store.Put(ctx, b.key, b.data, block.PutOptions{}); err != nil {
					t.Fatalf("put %v with %s down: %v", b.key, dead.id, err)
				}
				blocks = append(blocks, b)
			}
			for _, b := range blocks {
				cl.waitEntry(b.key) // every node's index has it (no timing assumed)
				e, _ := writer.node.FSM().Lookup(b.key)
				c, _ := writer.backend.code(b.key.Namespace)
				want := c.N()
				if c.K == 1 {
					want = min(c.N(), tc.nodes-1)
				}
				for _, s := range e.Placement {
					if s.NodeID == dead.id {
						t.Fatalf("%v placed on the dead member: %v", b.key, e.Placement)
					}
				}
				if complete := len(e.Placement) >= want; complete != tc.wantComplete && !(c.K == 1 && complete) {
					t.Fatalf("%v: placement %v, complete %v, want %v", b.key, e.Placement, complete, tc.wantComplete)
				}
				mustGet(t, writer.store, b.key, b.data)
			}
			// The member comes back: repair completes every block.
			cl.peers.setDown(dead.id, false)
			cl.eventually("full redundancy", func() bool {
				for _, b := range blocks {
					e, _ := leader.node.FSM().Lookup(b.key)
					c, _ := leader.backend.code(b.key.Namespace)
					if len(e.Placement) < min(c.N(), tc.nodes) {
						return false
					}
				}
				return true
			})
			for _, b := range blocks {
				mustGet(t, dead.store, b.key, b.data)
			}
		})
	}
}

// TestRepairSpreadsShardsOfOneNode: a put made while fewer members were
// alive than the code has shards puts two shards on one node; once enough
// members are alive again, repair moves one of them, so that losing any
// single node leaves the block readable.
func TestRepairSpreadsShardsOfOneNode(t *testing.T) {
	cl := newTestCluster(t, 3, nil)
	cl.createNS("rs", 2, 1)
	leader := cl.leader()
	var down *testNode
	for _, tn := range cl.nodes {
		if tn != leader {
			down = tn
		}
	}
	cl.peers.setDown(down.id, true)
	cl.eventually("the member marked suspect", func() bool {
		m, _ := leader.node.FSM().Member(down.id)
		return m.State != fsm.MemberAlive
	})
	ctx := withTimeout(t, 10*time.Second)
	key := block.NewKey("rs", 77)
	data := payload(77, 30_000)
	if err := leader.store.Put(ctx, key, data, block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	distinct := func(tn *testNode) int {
		e, _ := tn.node.FSM().Lookup(key)
		nodes := map[string]bool{}
		for _, s := range e.Placement {
			nodes[s.NodeID] = true
		}
		return len(nodes)
	}
	if n := distinct(leader); n != 2 {
		t.Fatalf("with one member suspect the block is on %d nodes, want 2 (one holding two shards)", n)
	}
	cl.peers.setDown(down.id, false)
	cl.waitSpread(key, 3)
	// Any single node may now go: the block still reads.
	cl.readsWithAnyOneDown(key, data)
}

// TestPutWaitsForRedundancy: a live member that is slow to take its shard
// (a loaded node, well past stragglerGrace) must not leave an RS(2,1) put
// acknowledged on its two data shards' worth alone: such a block has no
// redundancy, and losing either holder before repair runs (a SIGKILL in a
// rolling restart, an empty DRAM tier after it) loses an acknowledged block.
// The put waits for the slow shard and commits all three, so that any one
// node may then go. (A member whose write fails, a dead one, still lets the
// put commit on its quorum: TestPutSurvivesADeadMember.)
func TestPutWaitsForRedundancy(t *testing.T) {
	for _, tc := range []struct {
		name string
		k, m int
	}{
		{"RS(2,1)", 2, 1},
		{"three replicas", 1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := newTestCluster(t, 3, func(c *Config) { c.DeadAfter, c.ShardTimeout = time.Hour, time.Minute })
			cl.createNS("ns", tc.k, tc.m)
			writer := cl.leader()
			slow := cl.follower()
			key := block.NewKey("ns", 4242)
			data := payload(4242, 20_000)
			c, err := erasure.New(tc.k, tc.m)
			if err != nil {
				t.Fatal(err)
			}
			open := cl.peers.gate(slow.id)
			t.Cleanup(open)
			done := make(chan error, 1)
			go func() { done <- writer.store.Put(withTimeout(t, time.Minute), key, data, block.PutOptions{}) }()
			// The other members take their shards at once.
			cl.eventually("the fast members' shards written", func() bool {
				for _, tn := range cl.nodes {
					if tn == slow {
						continue
					}
					held := false
					for i := range c.N() {
						held = held || tn.tiers.Contains(shardKey(key, c, i))
					}
					if !held {
						return false
					}
				}
				return true
			})
			// A second is far past stragglerGrace: a put that acknowledges
			// without the slow shard has done so by then.
			select {
			case err := <-done:
				if tc.k > 1 {
					e, _ := writer.node.FSM().Lookup(key)
					t.Fatalf("RS(%d,%d) put acknowledged while a live member was still taking its shard (err %v, placement %v): no redundancy", tc.k, tc.m, err, e.Placement)
				}
				// Two replicas of three are redundant already: the put may
				// be acknowledged, and repair adds the third.
				done <- err
			case <-time.After(time.Second):
			}
			open()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			cl.waitSpread(key, 3)
			// Any one node may now lose everything it held (a SIGKILL, an
			// empty DRAM tier): the others still serve the block.
			cl.readsWithAnyOneDown(key, data)
		})
	}
}
