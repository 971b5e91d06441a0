package raft

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/raft/fsm"
)

// BenchmarkIndexCommit measures index commit throughput (block entries per
// second) on a 3-node in-memory cluster with 64 concurrent proposers, each
// committing one put at a time: through the group-commit batcher, and as
// one log entry per put (Raft's own BatchApplyCh still batches disk and
// network work in that baseline). It reports both rates and their ratio.
//
//	go test -run '^$' -bench IndexCommit -benchtime 20000x ./raft/
func BenchmarkIndexCommit(b *testing.B) {
	// LAN timings: the short test timeouts lose leadership under this load.
	d := DefaultConfig()
	c := newCluster(b, 3, func(cfg *Config) {
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout, cfg.CommitTimeout = d.HeartbeatTimeout, d.ElectionTimeout, d.LeaderLeaseTimeout, d.CommitTimeout
	})
	leader := c.waitLeader()
	const workers = 64
	var next atomic.Uint64
	run := func(commit func(ctx context.Context, op fsm.Op) error) float64 {
		var wg sync.WaitGroup
		start := time.Now()
		per := b.N / workers
		if per == 0 {
			per = 1
		}
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				for i := 0; i < per; i++ {
					h := next.Add(1)
					if err := commit(ctx, putOp(h, uint32(h))); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		return float64(per*workers) / time.Since(start).Seconds()
	}
	b.ResetTimer()
	unbatched := run(func(ctx context.Context, op fsm.Op) error {
		_, err := leader.Apply(ctx, fsm.EncodeIndex([]fsm.Op{op}))
		return err
	})
	batched := run(func(ctx context.Context, op fsm.Op) error {
		_, err := leader.Propose(ctx, op)
		return err
	})
	b.StopTimer()
	b.ReportMetric(unbatched, "entries/s-unbatched")
	b.ReportMetric(batched, "entries/s-batched")
	b.ReportMetric(batched/unbatched, "batched/unbatched")
}

// BenchmarkIndexCommitBatch measures the Raft index alone (no block bytes)
// on a 3-node in-memory cluster with 64 concurrent proposers, each
// proposing batches of 64 puts (one Propose call, as a native batch put
// makes), against batches of 1 in the same run: block entries per second
// and their ratio. It is the single group's ceiling before any wire,
// shard or disk cost.
//
//	go test -run '^$' -bench IndexCommitBatch -benchtime 200000x ./raft/
func BenchmarkIndexCommitBatch(b *testing.B) {
	d := DefaultConfig()
	c := newCluster(b, 3, func(cfg *Config) {
		// Long timeouts: on this shared machine (load 40+) even LAN
		// timings lose leadership, and the measurement is of throughput.
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 5*time.Second, 5*time.Second, 5*time.Second
		cfg.CommitTimeout = d.CommitTimeout
	})
	leader := c.waitLeader()
	const workers = 64
	var next atomic.Uint64
	run := func(n, batch int) float64 {
		var wg sync.WaitGroup
		per := max(n/workers/batch, 1)
		start := time.Now()
		for range workers {
			wg.Go(func() {
				ctx := context.Background()
				ops := make([]fsm.Op, batch)
				for range per {
					for j := range ops {
						h := next.Add(1)
						ops[j] = putOp(h, uint32(h))
					}
					res, err := leader.Propose(ctx, ops...)
					if err != nil {
						b.Error(err)
						return
					}
					for _, r := range res {
						if r.Status != fsm.StatusCreated {
							b.Errorf("put: %s", r.Status)
							return
						}
					}
				}
			})
		}
		wg.Wait()
		return float64(per*workers*batch) / time.Since(start).Seconds()
	}
	b.ResetTimer()
	single := run(b.N/8, 1) // the slow path: an eighth of the entries
	batched := run(b.N, 64)
	b.StopTimer()
	b.ReportMetric(single, "entries/s-batch1")
	b.ReportMetric(batched, "entries/s-batch64")
	b.ReportMetric(batched/single, "batch64/batch1")
}
