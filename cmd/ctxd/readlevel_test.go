package main

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/client"
)

// TestClusterLinearizableReadThroughFollower (issue 5, read levels): a
// block put through one follower reads back at once through the other when
// the read asks for X-Ctxtier-Read: linearizable, every time. Local reads
// (the default) may miss for a moment: they are counted, and must all see
// the blocks soon after (a generous bound, the time logged). The cluster
// runs with a token, so the read-index endpoint is authenticated too.
func TestClusterLinearizableReadThroughFollower(t *testing.T) {
	nodes, _ := startClusterWith(t, 3, func(string) []string { return nil })
	leader, ok := leaderOf(t, nodes)
	if !ok {
		t.Fatal("no leader")
	}
	var followers []*testNode
	for _, nd := range nodes {
		if nd != leader {
			followers = append(followers, nd)
		}
	}
	a, b := httpClient(t, followers[0].http), httpClient(t, followers[1].http)
	ctx := withTimeout(t, time.Minute)
	lin := client.WithLinearizable(ctx)
	const n = 100
	localMisses := 0
	start := time.Now()
	for i := range n {
		key := block.NewKey(block.DefaultNamespace, 0x5eed0000+uint64(i))
		data := blockBytes(i, 4<<10)
		if err := a.Put(ctx, key, data, block.PutOptions{}); err != nil {
			t.Fatalf("put %d through %s: %v", i, followers[0].id, err)
		}
		if i%2 == 0 {
			// Half the time, first a local read: allowed to miss.
			if ok, err := b.ExistsBatch(ctx, []block.Key{key}); err == nil && !ok[0] {
				localMisses++
			}
		}
		if ok, err := b.ExistsBatch(lin, []block.Key{key}); err != nil || !ok[0] {
			t.Fatalf("put %d: linearizable exists through %s: %v %v", i, followers[1].id, ok, err)
		}
		got, err := b.Get(lin, key)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("put %d: linearizable get through %s: %v", i, followers[1].id, err)
		}
		if p, err := b.Lookup(lin, []block.Key{key}); err != nil || p != 1 {
			t.Fatalf("put %d: linearizable lookup through %s: %d %v", i, followers[1].id, p, err)
		}
	}
	t.Logf("%d puts through %s, each read back linearizably through %s at once (%v in all); %d of %d local reads before them missed",
		n, followers[0].id, followers[1].id, time.Since(start).Round(time.Millisecond), localMisses, n/2)
	// A local read may miss only for a moment: every block put above is
	// soon visible to local reads through the other follower too.
	all := make([]block.Key, n)
	for i := range all {
		all[i] = block.NewKey(block.DefaultNamespace, 0x5eed0000+uint64(i))
	}
	took := waitFor(t, time.Minute, "local reads through "+followers[1].id+" to see every block", func() bool {
		ok, err := b.ExistsBatch(ctx, all)
		if err != nil {
			return false
		}
		for _, o := range ok {
			if !o {
				return false
			}
		}
		return true
	})
	t.Logf("local reads saw all %d blocks %v after the last put", n, took)
	// A delete through the other follower right after the put finds the
	// block (it asks the leader before it answers NotFound).
	for i := range 20 {
		key := block.NewKey(block.DefaultNamespace, 0xde1e0000+uint64(i))
		if err := a.Put(ctx, key, blockBytes(i, 4<<10), block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := b.Delete(ctx, key); err != nil {
			t.Fatalf("delete %d through %s right after its put through %s: %v", i, followers[1].id, followers[0].id, err)
		}
		if _, err := b.Get(lin, key); !errors.Is(err, block.ErrNotFound) {
			t.Fatalf("deleted block %d: get says %v", i, err)
		}
	}
}

// TestClusterNamespaceUsableAtOnce: a namespace created through the leader
// takes puts through a follower at once, with replicas on every node, with
// no wait for replication: a node that does not know a namespace yet syncs
// with the leader's read index before it says the namespace is unknown.
func TestClusterNamespaceUsableAtOnce(t *testing.T) {
	nodes, _ := startCluster(t, 3)
	leader, ok := leaderOf(t, nodes)
	if !ok {
		t.Fatal("no leader")
	}
	var follower *testNode
	for _, nd := range nodes {
		if nd != leader {
			follower = nd
			break
		}
	}
	lc, fc := httpClient(t, leader.http), httpClient(t, follower.http)
	ctx := withTimeout(t, time.Minute)
	for i := range 20 {
		ns := block.Namespace{Name: fmt.Sprintf("fresh-%d", i), DataShards: 1, ParityShards: 2}
		if _, err := lc.CreateNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
		key := block.NewKey(ns.Name, uint64(i)+1)
		data := blockBytes(i, 8<<10)
		if err := fc.Put(ctx, key, data, block.PutOptions{}); err != nil {
			t.Fatalf("namespace %d: put through %s right after creating it: %v", i, follower.id, err)
		}
		got, err := fc.Get(ctx, key)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("namespace %d: get: %v", i, err)
		}
	}
}
