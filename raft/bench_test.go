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
