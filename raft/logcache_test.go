package raft

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/raft/fsm"
)

// With the log cache, two file-backed nodes over TCP replicate and apply
// entries without reading them back from the write-ahead log; without it,
// every entry is read back (the leader to send it, the follower to apply
// it), which is what the cache saves.
func TestLogCacheServesReplication(t *testing.T) {
	const proposals = 60
	for _, tc := range []struct {
		name     string
		cache    int
		minReads float64 // log entries read back, both nodes together
		maxReads float64
	}{
		{"no cache", 0, proposals, 1e9},
		{"cache of 32", 32, 0, proposals / 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			regs := []*prometheus.Registry{prometheus.NewRegistry(), prometheus.NewRegistry()}
			c1 := tcpConfig(t, "c1", nil)
			c1.LogCache = tc.cache
			n1, err := Open(ctx, c1, quietLog(), regs[0])
			if err != nil {
				t.Fatal(err)
			}
			defer n1.Close()
			c2 := tcpConfig(t, "c2", nil)
			c2.LogCache, c2.Bootstrap = tc.cache, false
			n2, err := Open(ctx, c2, quietLog(), regs[1])
			if err != nil {
				t.Fatal(err)
			}
			defer n2.Close()
			eventually(t, "join", func() bool {
				l := (&cluster{t: t}).waitLeader(n1, n2)
				return l.Join(ctx, fsm.Member{ID: "c2", RaftAddr: c2.RaftAddr}) == nil
			})
			eventually(t, "c2 replicates", func() bool { _, ok := n2.FSM().Member("c2"); return ok })
			before := walReads(t, regs...)
			for i := range proposals {
				l := (&cluster{t: t}).waitLeader(n1, n2)
				if _, err := l.Propose(ctx, putOp(uint64(1000+i), 1)); err != nil {
					t.Fatalf("proposal %d: %v", i, err)
				}
			}
			eventually(t, "the follower applies every proposal", func() bool {
				return n1.FSM().AppliedIndex() == n2.FSM().AppliedIndex()
			})
			reads := walReads(t, regs...) - before
			t.Logf("%d proposals: %.0f log entries read back from the write-ahead logs", proposals, reads)
			if reads < tc.minReads || reads > tc.maxReads {
				t.Fatalf("%.0f log entries read back, want %.0f..%.0f", reads, tc.minReads, tc.maxReads)
			}
		})
	}
}

// walReads sums ctxtier_raft_wal_log_entries_read_total over regs.
func walReads(t *testing.T, regs ...*prometheus.Registry) float64 {
	t.Helper()
	var sum float64
	for _, reg := range regs {
		v, ok := counterSum(t, reg, "ctxtier_raft_wal_log_entries_read_total")
		if !ok {
			t.Fatal("ctxtier_raft_wal_log_entries_read_total is not registered")
		}
		sum += v
	}
	return sum
}

// counterSum sums the counter name over its series in reg; ok is false
// when reg has no such metric.
func counterSum(t *testing.T, reg *prometheus.Registry, name string) (sum float64, ok bool) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			ok = true
		}
	}
	return sum, ok
}
