package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/blocktest"
	"github.com/ctxtier/ctxtier/sim/trace"
)

// laneTier is one worker's own client of a shared in-memory tier: it
// counts the calls that came through it.
type laneTier struct {
	*blocktest.Tier
	calls atomic.Int64
}

func (l *laneTier) Lookup(ctx context.Context, keys []block.Key) (int, error) {
	l.calls.Add(1)
	return l.Tier.Lookup(ctx, keys)
}

func (l *laneTier) GetBatchInto(ctx context.Context, keys []block.Key, bufs [][]byte) ([]int, []error, error) {
	l.calls.Add(1)
	return l.Tier.GetBatchInto(ctx, keys, bufs)
}

func (l *laneTier) PutBatch(ctx context.Context, keys []block.Key, data [][]byte, opts []block.PutOptions) ([]error, error) {
	l.calls.Add(1)
	return l.Tier.PutBatch(ctx, keys, data, opts)
}

// TestConcurrentEqualsSequential checks the ordering rule (lanes.go): with
// a tier that does not evict, a concurrent run whose puts are slow and in
// flight on several lanes at once gives every policy the same records,
// hits, routes and virtual times as the sequential mode with calls that
// take no time, byte for byte, under either ordering.
func TestConcurrentEqualsSequential(t *testing.T) {
	for _, tc := range []struct {
		name    string
		workers int
		conc    int
		overlap bool
		order   Ordering
	}{
		{"4 workers, 4 lanes", 4, 4, false, OrderAll},
		{"4 workers, 4 lanes, blocks", 4, 4, false, OrderBlocks},
		{"4 workers, 2 lanes, blocks", 4, 2, false, OrderBlocks},
		{"3 workers, 8 lanes, put overlap", 3, 8, true, OrderAll},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reqs := synthetic(300, 11)
			for i := range reqs {
				reqs[i].TimestampMs /= 4 // busy workers: all of them serve
			}
			cfg := testConfig()
			cfg.PrefillWorkers = tc.workers
			cfg.HBMBlocks = 6 // small: most hits must come from the tier
			cfg.PutOverlap = tc.overlap
			seq := run(t, cfg, blocktest.New(), reqs)

			shared := blocktest.New(blocktest.WithPutDelay(300 * time.Microsecond))
			var clients []TierClient
			var lanes []*laneTier
			for range min(tc.conc, tc.workers) {
				l := &laneTier{Tier: shared}
				lanes = append(lanes, l)
				clients = append(clients, l)
			}
			cfg.Concurrency, cfg.Ordering = tc.conc, tc.order
			con, err := Run(context.Background(), cfg, Deps{Tier: shared, WorkerTiers: clients, Now: still}, reqs)
			if err != nil {
				t.Fatal(err)
			}
			js, _ := json.Marshal(seq.Policies)
			jc, _ := json.Marshal(con.Policies)
			if string(js) != string(jc) {
				for i, p := range seq.Policies {
					q := con.Policies[i]
					t.Logf("%s: sequential %d tier hits, concurrent %d", p.Policy, p.TierHitBlocks, q.TierHitBlocks)
				}
				t.Fatal("the concurrent run's results differ from the sequential run's")
			}
			if tr := con.Policy(SharedTier); tr.TierHitBlocks == 0 {
				t.Fatal("no tier hit: the comparison proves nothing")
			}
			if n := shared.Counts().MaxPutsInFlight; n < 2 {
				t.Fatalf("at most %d put in flight at once: the calls were not concurrent", n)
			}
			// Each worker calls over its own lane's client.
			for _, r := range con.Policy(SharedTier).Records {
				if l := lanes[r.Worker%len(lanes)]; l.calls.Load() == 0 {
					t.Errorf("worker %d's lane made no call", r.Worker)
				}
			}
			t.Logf("%d puts in flight at most", shared.Counts().MaxPutsInFlight)
		})
	}
}

// TestConcurrentRunCountsMeasuredCalls checks that a concurrent run adds a
// request's own measured calls to its TTFT, not to the schedule: with a
// clock that advances 1 ms per reading, every call measures 1 ms, and each
// request's TTFT is the call-free run's plus its own calls.
func TestConcurrentRunCountsMeasuredCalls(t *testing.T) {
	reqs := []trace.Request{req(0, 12, 1, 1, 2, 3), req(1000, 16, 1, 1, 2, 3, 4)}
	cfg := testConfig()
	cfg.HBMBlocks = 0
	cfg.Policies = []Policy{SharedTier}
	base := run(t, cfg, blocktest.New(), reqs).Policies[0].Records
	var ms atomic.Int64
	tick := func() time.Time { return time.Unix(0, ms.Add(1)*int64(time.Millisecond)) }
	cfg.Concurrency = 2
	rep, err := Run(context.Background(), cfg, Deps{Tier: blocktest.New(), Now: tick}, reqs)
	if err != nil {
		t.Fatal(err)
	}
	p := rep.Policies[0]
	for i, r := range p.Records {
		b := base[i]
		calls := r.Route + r.Lookup + r.Fetch + r.Put
		if r.Put != 0.001 || r.Lookup != 0.001 || !near(r.TTFT, b.TTFT+calls) || !near(r.Queue, b.Queue) {
			t.Errorf("request %d: lookup %v put %v ttft %v queue %v; call-free ttft %v queue %v",
				i, r.Lookup, r.Put, r.TTFT, r.Queue, b.TTFT, b.Queue)
		}
	}
	if p.PutLatency.P50 != 0.001 || p.LookupLatency.Max != 0.001 || p.FetchLatency.P99 != 0.001 {
		t.Fatalf("latency summaries: lookup %+v fetch %+v put %+v", p.LookupLatency, p.FetchLatency, p.PutLatency)
	}
}

func TestConcurrentRunFailsOnFailedPut(t *testing.T) {
	cfg := testConfig()
	cfg.Policies = []Policy{SharedTier}
	cfg.Concurrency = 2
	tier := blocktest.New()
	tier.FailPuts(fmt.Errorf("%w: the tier refuses puts", block.ErrUnavailable))
	_, err := Run(context.Background(), cfg, Deps{Tier: tier, Now: still}, synthetic(50, 5))
	if !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("err = %v, want the put's ErrUnavailable", err)
	}
}

// TestOrderAllReadsAfterEveryPut checks what each ordering lets a read
// overlap: under OrderAll no lookup or get runs while a put is in flight
// (a put may evict what the read wants), under OrderBlocks some do.
func TestOrderAllReadsAfterEveryPut(t *testing.T) {
	reqs := synthetic(300, 11)
	for i := range reqs {
		reqs[i].TimestampMs /= 4
	}
	for _, order := range []Ordering{OrderAll, OrderBlocks} {
		cfg := testConfig()
		cfg.PrefillWorkers, cfg.HBMBlocks = 4, 6
		cfg.Policies = []Policy{SharedTier}
		cfg.Concurrency, cfg.Ordering = 4, order
		tier := blocktest.New(blocktest.WithPutDelay(300 * time.Microsecond))
		if _, err := Run(context.Background(), cfg, Deps{Tier: tier, Now: still}, reqs); err != nil {
			t.Fatal(err)
		}
		n := tier.Counts()
		t.Logf("%s: %d reads during puts, %d puts in flight at most", order, n.ReadsDuringPuts, n.MaxPutsInFlight)
		switch {
		case order == OrderAll && n.ReadsDuringPuts != 0:
			t.Errorf("%s: %d reads ran while a put was in flight", order, n.ReadsDuringPuts)
		case order == OrderBlocks && n.ReadsDuringPuts == 0:
			t.Errorf("%s: no read overlapped a put: the check cannot tell the orderings apart", order)
		}
	}
}
