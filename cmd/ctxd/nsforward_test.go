package main

import (
	"errors"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TestNamespaceChangesThroughFollowers: namespace changes made through a
// follower reach the leader (ctxstore/cluster LeaderCatalog), as
// docs/operations.md promises ("through any node"): a create, a
// conflicting create (the leader's answer comes back as
// NamespaceExists), and a quota change, which the follower that took it
// shows at once and every node shows soon after. Before, a follower
// answered 503 "not the raft leader".
func TestNamespaceChangesThroughFollowers(t *testing.T) {
	nodes, _ := startCluster(t, 3)
	ctx := withTimeout(t, 90*time.Second)
	ld, ok := leaderOf(t, nodes)
	if !ok {
		t.Fatal("no leader")
	}
	var followers []*testNode
	for _, nd := range nodes {
		if nd != ld {
			followers = append(followers, nd)
		}
	}
	f1, f2 := httpClient(t, followers[0].http), httpClient(t, followers[1].http)

	ns := block.Namespace{Name: "via-follower", DataShards: 1, ParityShards: 2}
	if _, err := f1.CreateNamespace(ctx, ns); err != nil {
		t.Fatalf("create through follower %s: %v", followers[0].id, err)
	}
	if _, err := f1.Namespace(ctx, ns.Name); err != nil {
		t.Fatalf("the follower that took the create does not show it: %v", err)
	}
	// The same definition again is no error; another one is a conflict,
	// decided by the leader and carried back through the forward.
	if _, err := f2.CreateNamespace(ctx, ns); err != nil {
		t.Fatalf("identical create through %s: %v", followers[1].id, err)
	}
	other := ns
	other.ParityShards = 1
	if _, err := f2.CreateNamespace(ctx, other); !errors.Is(err, block.ErrNamespaceExists) {
		t.Fatalf("conflicting create through %s: %v, want NamespaceExists", followers[1].id, err)
	}

	q := block.Quota{DRAM: 8 << 20, NVMe: 64 << 20}
	if _, err := f2.SetQuota(ctx, ns.Name, q); err != nil {
		t.Fatalf("quota through follower %s: %v", followers[1].id, err)
	}
	st, err := f2.NamespaceStatus(ctx, ns.Name)
	if err != nil || st.Namespace.Quota != q {
		t.Fatalf("the follower that took the quota shows %+v (%v), want %+v", st.Namespace.Quota, err, q)
	}
	for _, nd := range nodes {
		waitFor(t, 10*time.Second, "the quota on "+nd.id, func() bool {
			st, err := httpClient(t, nd.http).NamespaceStatus(ctx, ns.Name)
			return err == nil && st.Namespace.Quota == q
		})
	}
	// Blocks go into the namespace through the follower that created it.
	key := block.NewKey(ns.Name, 7)
	if err := f1.Put(ctx, key, []byte("made through a follower"), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := httpClient(t, ld.http).Get(ctx, key)
	if err != nil || string(got) != "made through a follower" {
		t.Fatalf("get through the leader: %q %v", got, err)
	}
}
