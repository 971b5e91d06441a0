package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TestPutOnFullDisksIsNoSpace: when the shard writes that fail are refused
// for lack of space, the put is block.ErrNoSpace (HTTP 507), not
// Unavailable (503, which clients retry), and nothing is indexed.
func TestPutOnFullDisksIsNoSpace(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	tc.createNS("r3", 1, 2)
	ctx := withTimeout(t, 10*time.Second)
	for _, tn := range tc.nodes {
		tc.peers.mu.Lock()
		tc.peers.full[tn.id] = true
		tc.peers.mu.Unlock()
	}
	key := block.NewKey("r3", 1)
	err := tc.leader().store.Put(ctx, key, payload(1, 4096), block.PutOptions{})
	if !errors.Is(err, block.ErrNoSpace) || errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("put on full disks: %v, want NoSpace", err)
	}
	if _, ok := tc.leader().node.FSM().Lookup(key); ok {
		t.Fatal("a refused put was indexed")
	}
	// Room again: the same put succeeds.
	for _, tn := range tc.nodes {
		tc.peers.mu.Lock()
		tc.peers.full[tn.id] = false
		tc.peers.mu.Unlock()
	}
	if err := tc.leader().store.Put(ctx, key, payload(1, 4096), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}
