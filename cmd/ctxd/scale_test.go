package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
)

// memberCounts returns, from nd's status, the alive voters and the ids of
// members in each state.
func memberCounts(nd *testNode) (aliveVoters int, states map[string]string, err error) {
	st, err := clusterapi.NewClient(nd.http, control.WithToken(testSecret)).Status(context.Background())
	if err != nil {
		return 0, nil, err
	}
	states = map[string]string{}
	for _, m := range st.Members {
		states[m.ID] = fmt.Sprintf("%s/voter=%v", m.State, m.Voter)
		if m.State == "alive" && m.Voter {
			aliveVoters++
		}
	}
	return aliveVoters, states, nil
}

// TestClusterScaleOutAndIn (issue 9) runs the scaling walkthrough of
// docs/operations.md with real processes: three nodes grow to five, blocks
// of a single-copy namespace and of a three-replica one land on the new
// nodes, then n5 and n4 are drained, removed and stopped, and every block
// still reads back with its bytes from the three that remain.
func TestClusterScaleOutAndIn(t *testing.T) {
	nodes, join := startCluster(t, 3)
	ctx := withTimeout(t, 2*time.Minute)

	// Scale out: n4 and n5 join through the seeds.
	var added []*testNode
	for _, id := range []string{"n4", "n5"} {
		nd := &testNode{id: id, http: freeAddr(t), raft: freeAddr(t), dataDir: t.TempDir()}
		nd.p = startCtxd(t, nd.args(join)...)
		added = append(added, nd)
	}
	all := append(append([]*testNode(nil), nodes...), added...)
	waitFor(t, 30*time.Second, "five alive voters", func() bool {
		n, _, err := memberCounts(nodes[0])
		return err == nil && n == 5
	})

	// Blocks in a one-copy namespace and a three-replica one, put through
	// every node in turn.
	createOnLeader(t, all, block.Namespace{Name: "one", DataShards: 1, ParityShards: 0}, block.Namespace{Name: "r3", DataShards: 1, ParityShards: 2})
	// A peer that has not applied the namespace yet refuses its shards.
	waitFor(t, 10*time.Second, "every node knows the namespaces", func() bool {
		for _, nd := range all {
			for _, ns := range []string{"one", "r3"} {
				if _, err := httpClient(t, nd.http).Namespace(ctx, ns); err != nil {
					return false
				}
			}
		}
		return true
	})
	type blk struct {
		key  block.Key
		seed int
	}
	var blocks []blk
	for i := range 40 {
		for j, ns := range []string{"one", "r3"} {
			seed := 2*i + j
			b := blk{block.NewKey(ns, uint64(seed)*0x9e3779b97f4a7c15+1), seed}
			if err := httpClient(t, all[seed%len(all)].http).Put(ctx, b.key, blockBytes(seed, 16<<10), block.PutOptions{}); err != nil {
				t.Fatalf("put %v through %s: %v", b.key, all[seed%len(all)].id, err)
			}
			blocks = append(blocks, b)
		}
	}

	// Scale in: drain n5 and n4 (what the index places on them is in the
	// reply), wait until nothing is left on them, then remove and stop them.
	cl := clusterapi.NewClient(nodes[0].http, control.WithToken(testSecret))
	onLeaving := map[string]int{}
	for _, id := range []string{"n5", "n4"} {
		resp, err := cl.Drain(ctx, id)
		if err != nil {
			t.Fatalf("drain %s: %v", id, err)
		}
		if resp.State != "draining" || resp.Drain == nil {
			t.Fatalf("drain %s: reply %+v", id, resp)
		}
		t.Logf("draining %s: %d shards of %d blocks, by namespace %v", id, resp.Drain.ShardsLeft, resp.Drain.BlocksLeft, resp.Drain.Namespaces)
		for ns, n := range resp.Drain.Namespaces {
			onLeaving[ns] += n
		}
	}
	// 40 single copies over five nodes: all of them missing n4 and n5
	// would happen once in 10^9 runs.
	if onLeaving["one"] == 0 || onLeaving["r3"] == 0 {
		t.Fatalf("blocks on n4 and n5 by namespace %v: the test needs single copies and replicas there", onLeaving)
	}
	start := time.Now()
	var last cluster.DrainStatus
	if err := cl.WaitDrained(ctx, []string{"n5", "n4"}, 100*time.Millisecond, func(d cluster.DrainStatus) { last = d }); err != nil {
		t.Fatalf("waiting for the drains: %v (last %+v)", err, last)
	}
	t.Logf("drained n4 and n5 in %v", time.Since(start).Round(time.Millisecond))
	for _, nd := range []*testNode{added[1], added[0]} {
		if err := cl.Remove(ctx, nd.id); err != nil {
			t.Fatalf("remove %s: %v", nd.id, err)
		}
		if err := nd.p.Stop(10 * time.Second); err != nil {
			t.Logf("%s: %v", nd.id, err)
		}
	}
	waitFor(t, 20*time.Second, "three alive voters, n4 and n5 left", func() bool {
		n, states, err := memberCounts(nodes[0])
		return err == nil && n == 3 && len(states) == 5 && states["n4"] == "left/voter=false" && states["n5"] == "left/voter=false"
	})

	// Every block reads back with its bytes through each remaining node.
	for _, nd := range nodes {
		c := httpClient(t, nd.http)
		for _, b := range blocks {
			got, err := c.Get(ctx, b.key)
			if err != nil || !bytes.Equal(got, blockBytes(b.seed, 16<<10)) {
				t.Fatalf("%s: block %v after scale-in: %v", nd.id, b.key, err)
			}
		}
	}
	// Nothing is left for repair to do.
	leader, ok := leaderOf(t, nodes)
	if !ok {
		t.Fatal("no leader")
	}
	waitFor(t, 10*time.Second, "no repair pending", func() bool {
		st, err := clusterapi.NewClient(leader.http, control.WithToken(testSecret)).Status(ctx)
		if err != nil {
			return false
		}
		var extra struct {
			Repair cluster.RepairStatus `json:"repair"`
		}
		return json.Unmarshal(st.Extra, &extra) == nil && extra.Repair.Active && extra.Repair.Pending == 0 && extra.Repair.Unrepairable == 0
	})
}
