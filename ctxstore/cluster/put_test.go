package cluster

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TestPutBatchIsOneProposal: a batch put through the leader or a follower
// commits all of its index entries in one log entry (they share a
// generation, the entry's log index), a follower forwards it in one call,
// every block reads back, and per-item outcomes (a conflict, an existing
// block) come back in place without failing the others.
func TestPutBatchIsOneProposal(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	cases := []struct {
		name string
		k, m int
		via  func() *testNode
	}{
		{"one copy via the leader", 1, 0, tc.leader},
		{"three replicas via a follower", 1, 2, tc.follower},
		{"RS(2,1) via a follower", 2, 1, tc.follower},
	}
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ns := fmt.Sprintf("batch%d", ci)
			tc.createNS(ns, c.k, c.m)
			ctx := withTimeout(t, 20*time.Second)
			w := c.via()
			items := make([]ctxstore.PutItem, 32)
			for i := range items {
				items[i] = ctxstore.PutItem{Key: block.NewKey(ns, uint64(100+i)), Data: payload(i, 3000+i)}
			}
			tc.fwd.mu.Lock()
			forwarded := tc.fwd.n
			tc.fwd.mu.Unlock()
			shards0, commits0 := putPhases(t, w.backend)
			for i, err := range w.store.PutBatch(ctx, items) {
				if err != nil {
					t.Fatalf("item %d via %s: %v", i, w.id, err)
				}
			}
			tc.fwd.mu.Lock()
			calls := tc.fwd.n - forwarded
			tc.fwd.mu.Unlock()
			if want := map[bool]int{true: 0, false: 1}[w.node.IsLeader()]; calls != want {
				t.Fatalf("%d forwarded calls for one batch via %s, want %d", calls, w.id, want)
			}
			// The batch is timed once per half, not once per block.
			if shards, commits := putPhases(t, w.backend); shards != shards0+1 || commits != commits0+1 {
				t.Fatalf("put phase samples went from %d/%d to %d/%d for one batch, want one more of each", shards0, commits0, shards, commits)
			}
			var gen uint64
			for _, it := range items {
				tc.waitEntry(it.Key)
				e, _ := tc.leader().node.FSM().Lookup(it.Key)
				if gen == 0 {
					gen = e.Generation
				}
				if e.Generation != gen {
					t.Fatalf("%s has generation %d, the batch's first %d: not one log entry", it.Key, e.Generation, gen)
				}
				for _, r := range tc.nodes {
					mustGet(t, r.store, it.Key, it.Data)
				}
			}
			// A second batch: one new block, one existing with the same
			// bytes, one existing with other bytes.
			fresh := ctxstore.PutItem{Key: block.NewKey(ns, 999), Data: payload(7, 2000)}
			again := items[0]
			clash := ctxstore.PutItem{Key: items[1].Key, Data: payload(77, 2000)}
			// And a key twice within the batch: in-order outcomes, the first
			// bytes kept.
			twice := ctxstore.PutItem{Key: block.NewKey(ns, 1000), Data: payload(8, 2000)}
			twiceOther := ctxstore.PutItem{Key: twice.Key, Data: payload(88, 2000)}
			errs := w.store.PutBatch(ctx, []ctxstore.PutItem{fresh, again, clash, twice, twice, twiceOther})
			if errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], block.ErrConflict) || errs[3] != nil || errs[4] != nil || !errors.Is(errs[5], block.ErrConflict) {
				t.Fatalf("mixed batch: %v, want nil, nil, conflict, nil, nil, conflict", errs)
			}
			tc.waitEntry(twice.Key)
			mustGet(t, w.store, twice.Key, twice.Data)
			tc.waitEntry(fresh.Key)
			mustGet(t, w.store, fresh.Key, fresh.Data)
			mustGet(t, w.store, clash.Key, items[1].Data)
		})
	}
}

// putPhases returns how many shard-write and commit times b has observed
// (ctxtier_cluster_put_phase_seconds).
func putPhases(t *testing.T, b *Backend) (shards, commits uint64) {
	t.Helper()
	count := func(o prometheus.Observer) uint64 {
		var m dto.Metric
		if err := o.(prometheus.Histogram).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetHistogram().GetSampleCount()
	}
	return count(b.met.putShards), count(b.met.putCommit)
}
