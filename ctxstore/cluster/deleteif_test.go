package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TestDeleteIfNeverRemovesANewerVersion: through any node, a conditional
// delete naming a replaced version's checksum changes nothing; naming the
// current one deletes it from the index and the holders' tiers.
func TestDeleteIfNeverRemovesANewerVersion(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	tc.createNS("cond", 1, 1)
	ctx := withTimeout(t, 20*time.Second)
	key := block.NewKey("cond", 7)
	old, cur := payload(1, 4000), payload(2, 4000)
	w := tc.nodes[1]
	if err := w.store.Put(ctx, key, old, block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := w.store.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	tc.eventually("every node to apply the delete", func() bool {
		for _, n := range tc.nodes {
			if _, ok := n.node.FSM().Lookup(key); ok {
				return false
			}
		}
		return true
	})
	if err := w.store.Put(ctx, key, cur, block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		via  int
		sum  uint32
		want error
	}{
		{"stale version through a follower", 2, block.Checksum(old), block.ErrNotFound},
		{"stale version through the writer", 1, block.Checksum(old), block.ErrNotFound},
		{"current version", 2, block.Checksum(cur), nil},
		{"already deleted", 0, block.Checksum(cur), block.ErrNotFound},
	}
	for _, st := range steps {
		err := tc.nodes[st.via].store.DeleteIf(ctx, key, st.sum)
		if (st.want == nil) != (err == nil) || (st.want != nil && !errors.Is(err, st.want)) {
			t.Fatalf("%s: DeleteIf = %v, want %v", st.name, err, st.want)
		}
		if st.want != nil && st.name != "already deleted" {
			mustGet(t, tc.nodes[0].store, key, cur)
		}
	}
	tc.eventually("the index and every holder to drop the block", func() bool {
		for _, n := range tc.nodes {
			if _, ok := n.node.FSM().Lookup(key); ok || n.tiers.Contains(key) {
				return false
			}
		}
		return true
	})
}
