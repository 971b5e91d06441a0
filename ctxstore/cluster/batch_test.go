package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// forwards is how many proposals followers have forwarded to the leader.
func (tc *testCluster) forwards() int {
	tc.fwd.mu.Lock()
	defer tc.fwd.mu.Unlock()
	return tc.fwd.n
}

// batchTries bounds how often TestDeleteAndPinBatchesAreOneProposal tries
// a batch again because the leadership moved while it was proposed.
const batchTries = 3

func TestDeleteAndPinBatchesAreOneProposal(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	tc.createNS("rep", 1, 2)
	tc.createNS("rs", 2, 1)
	ctx := withTimeout(t, 60*time.Second)
	missing := block.NewKey("rep", 999_999)
	for ci, c := range []struct {
		name string
		run  func(f *testNode, keys []block.Key) []error
	}{
		{"pin", func(f *testNode, keys []block.Key) []error { return f.store.PinBatch(ctx, keys, time.Hour) }},
		{"delete", func(f *testNode, keys []block.Key) []error { return f.store.DeleteBatch(ctx, keys) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Both namespaces, a key no one put, and a key of a namespace
			// that does not exist: one proposal for the batch (the pin of
			// a missing key is part of it), counted as the calls a
			// follower forwards to the leader. That count means one
			// proposal only while the follower stays one and the leader
			// keeps its term: under load the leadership may move during
			// the call (the follower then proposes itself, or retries at
			// the new leader). Then the batch is tried again, with new
			// blocks, at most batchTries times.
			var (
				blocks []testBlock
				keys   []block.Key
				errs   []error
				f      *testNode
			)
			for try := 1; ; try++ {
				blocks = tc.putBlocks(6, 1000*try+100*ci, "rep", "rs")
				for _, b := range blocks {
					tc.waitEntry(b.key)
				}
				keys = keys[:0]
				for _, b := range blocks {
					keys = append(keys, b.key)
				}
				keys = append(keys, missing, block.NewKey("nope", 1))
				ld := tc.leader()
				term := ld.node.Stats()["term"]
				f = tc.follower()
				before := tc.forwards()
				errs = c.run(f, keys)
				got := tc.forwards() - before
				if got == 1 {
					break
				}
				stable := tc.leader() == ld && ld.node.Stats()["term"] == term
				if stable || try == batchTries {
					t.Fatalf("%s batch of %d keys: %d proposals forwarded, want 1 (leader %s kept term %s through the call: %v)", c.name, len(keys), got, ld.id, term, stable)
				}
				t.Logf("%s batch, try %d: the leadership moved during the call (%d proposals forwarded); again with new blocks", c.name, try, got)
			}
			n := len(blocks)
			for i, err := range errs[:n] {
				if err != nil {
					t.Fatalf("%s %v: %v", c.name, keys[i], err)
				}
			}
			if !errors.Is(errs[n], block.ErrNotFound) {
				t.Fatalf("%s of a key no one put: %v", c.name, errs[n])
			}
			if !errors.Is(errs[n+1], block.ErrUnknownNamespace) {
				t.Fatalf("%s in an unknown namespace: %v", c.name, errs[n+1])
			}
			// A repeated key acts as a second call after the first: a
			// second pin succeeds, a second delete finds nothing.
			twice := block.NewKey("rs", 777_000+uint64(len(c.name)))
			if err := f.store.Put(ctx, twice, payload(777, 5000), block.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			errs = c.run(f, []block.Key{twice, twice})
			if errs[0] != nil || c.name == "pin" && errs[1] != nil || c.name == "delete" && !errors.Is(errs[1], block.ErrNotFound) {
				t.Fatalf("%s of a key twice in one batch: %v", c.name, errs)
			}
			for _, b := range blocks {
				tc.eventually("the change everywhere", func() bool {
					for _, tn := range tc.nodes {
						e, ok := tn.node.FSM().Lookup(b.key)
						if c.name == "pin" && (!ok || time.Until(e.PinUntil) < 50*time.Minute) || c.name == "delete" && ok {
							return false
						}
					}
					return true
				})
			}
			if c.name == "delete" {
				// The shards are gone from every member. A copy may linger
				// a moment: a restore pass that found it missing while its
				// index still had the entry writes it back, and deletes it
				// once it has caught up. One left behind stays.
				for _, b := range blocks {
					for _, tn := range tc.nodes {
						for i := range 3 {
							sk := b.key
							if b.key.Namespace == "rs" {
								sk = b.key.WithShard(i)
							}
							for deadline := time.Now().Add(10 * time.Second); tn.tiers.Contains(sk); time.Sleep(20 * time.Millisecond) {
								if time.Now().After(deadline) {
									t.Fatalf("%s still holds %v after the delete", tn.id, sk)
								}
							}
						}
					}
				}
			}
		})
	}
}
