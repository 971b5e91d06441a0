package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TestReadOfAReusedKey: a read that looked up version A of a key reads its
// holders after A was deleted, or deleted and put again as B (an object
// slot reused by racing writers): the holder's copy no longer matches A.
// The read must answer from the index as it is now (B's bytes, or
// NotFound), never fail with "replica does not match the index", which S3
// clients see as BadDigest.
func TestReadOfAReusedKey(t *testing.T) {
	for _, tt := range []struct {
		name        string
		k, m, nodes int
		putB        bool
	}{
		{"one node, put again", 1, 0, 1, true},
		{"one node, deleted", 1, 0, 1, false},
		{"replicas, put again", 1, 1, 2, true},
		{"erasure, put again", 2, 1, 3, true},
		{"erasure, deleted", 2, 1, 3, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestCluster(t, tt.nodes, nil)
			tc.createNS("reread", tt.k, tt.m)
			ctx := withTimeout(t, 30*time.Second)
			key := block.NewKey("reread", 9)
			a, b := payload(5, 5000), payload(6, 5000)
			n := tc.nodes[0]
			if err := n.store.Put(ctx, key, a, block.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			stale, ok := n.node.FSM().Lookup(key)
			if !ok {
				t.Fatal("no entry for A")
			}
			if err := n.store.Delete(ctx, key); err != nil {
				t.Fatal(err)
			}
			if tt.putB {
				if err := n.store.Put(ctx, key, b, block.PutOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			c, err := n.backend.code(key.Namespace)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := n.backend.reads.readEntry(ctx, key, stale, c, block.GetOptions{})
			if !tt.putB {
				if !errors.Is(err, block.ErrNotFound) {
					t.Fatalf("read of a deleted key through A's entry: %v, want NotFound", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("read through A's entry after B replaced it: %v", err)
			}
			defer ref.Release()
			if string(ref.Data) != string(b) || ref.Sum != block.Checksum(b) {
				t.Fatalf("read %d bytes crc32c %08x, want B's", len(ref.Data), ref.Sum)
			}
		})
	}
}
