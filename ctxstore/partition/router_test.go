package partition

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// testConfig has the Raft test timeouts of raft's own in-memory tests:
// 500 ms, long enough that a loaded 2-core machine under -race does not
// elect spuriously.
func testConfig(parts int) Config {
	c := DefaultConfig()
	c.Partitions = parts
	c.LeaderTimeout = 30 * time.Second
	c.Group.HeartbeatTimeout, c.Group.ElectionTimeout, c.Group.LeaderLeaseTimeout = 500*time.Millisecond, 500*time.Millisecond, 500*time.Millisecond
	c.Group.CommitTimeout = 5 * time.Millisecond
	return c
}

// startHosts opens n hosts of cfg on one in-memory network.
func startHosts(t *testing.T, cfg Config, n int) (Layout, []*Host, *Router) {
	t.Helper()
	layout, err := cfg.Layout(members(n))
	if err != nil {
		t.Fatal(err)
	}
	net := NewInmemNetwork(5 * time.Second)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var hosts []*Host
	for _, m := range members(n) {
		h, err := OpenHost(context.Background(), cfg, m.ID, layout, net, log)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		hosts = append(hosts, h)
	}
	r, err := NewRouter(cfg, layout, hosts)
	if err != nil {
		t.Fatal(err)
	}
	return layout, hosts, r
}

// proposeAll proposes ops and proposes again those whose outcome was
// unknown (a leader lost its leadership while committing them), as a
// client does: a put of the same entry again is idempotent, "existed" when
// the first one had committed. Other errors fail.
func proposeAll(ctx context.Context, r *Router, ops []fsm.Op) ([]fsm.OpResult, error) {
	res, err := r.Propose(ctx, ops)
	for try := 0; err != nil; try++ {
		if !errors.Is(err, raft.ErrOutcomeUnknown) || try == 10 {
			return nil, err
		}
		var again []int
		for i, rs := range res {
			if rs.Status == 0 {
				again = append(again, i)
			}
		}
		sub := make([]fsm.Op, len(again))
		for j, i := range again {
			sub[j] = ops[i]
		}
		var got []fsm.OpResult
		got, err = r.Propose(ctx, sub)
		for j, i := range again {
			res[i] = got[j]
		}
	}
	return res, nil
}

func put(h uint64) fsm.Op {
	return fsm.PutOp(block.NewKey(block.DefaultNamespace, h), fsm.Entry{Size: 64, Sum: uint32(h), Placement: []fsm.Shard{{NodeID: "m1"}}, Created: time.Unix(1, 0)})
}

// TestRouterProposeAndRead: batches spread over every partition, from
// concurrent callers; every acknowledged entry is then readable through
// the router and from every voter's FSM of its partition, each FSM holds
// exactly its partition's keys, and a host holds no replica it does not
// vote in.
func TestRouterProposeAndRead(t *testing.T) {
	cfg := testConfig(8)
	layout, hosts, r := startHosts(t, cfg, 5)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const callers, batches, batch = 4, 10, 32
	var (
		mu    sync.Mutex
		acked []uint64
		wg    sync.WaitGroup
	)
	for c := range callers {
		wg.Go(func() {
			for b := range batches {
				ops := make([]fsm.Op, batch)
				for i := range ops {
					ops[i] = put(uint64(c)<<32 | uint64(b*batch+i+1))
				}
				res, err := proposeAll(ctx, r, ops)
				if err != nil {
					t.Error(err)
					return
				}
				for i, rs := range res {
					if rs.Status != fsm.StatusCreated && rs.Status != fsm.StatusExisted {
						t.Errorf("put %d: %s", i, rs.Status)
						return
					}
					mu.Lock()
					acked = append(acked, ops[i].Key.Hash)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if len(acked) != callers*batches*batch {
		t.Fatalf("%d puts acknowledged, want %d", len(acked), callers*batches*batch)
	}

	perPart := make([]int, cfg.Partitions)
	for _, h := range acked {
		k := block.NewKey(block.DefaultNamespace, h)
		perPart[cfg.Of(k)]++
		e, ok, err := r.Lookup(ctx, k, raft.ReadLocal)
		if err != nil || !ok || e.Sum != uint32(h) {
			t.Fatalf("Lookup(%v) = %+v, %v, %v: want the acknowledged entry", k, e, ok, err)
		}
	}
	for p, n := range perPart {
		if n == 0 {
			t.Fatalf("partition %d got no puts: the batches were not spread", p)
		}
	}
	// Every voter of a partition applies what its leader acknowledged, and
	// holds only its partition's keys.
	for _, h := range hosts {
		for _, p := range h.Partitions() {
			leader, err := r.Leader(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			g, _ := h.Group(p)
			if err := g.WaitApplied(ctx, leader.FSM().AppliedIndex()); err != nil {
				t.Fatal(err)
			}
			n := 0
			if err := g.FSM().Scan(block.DefaultNamespace, "", func(k block.Key, _ fsm.Entry) bool {
				if cfg.Of(k) != p {
					t.Errorf("%s's replica of partition %d holds %v of partition %d", h.ID(), p, k, cfg.Of(k))
				}
				n++
				return true
			}); err != nil {
				t.Fatal(err)
			}
			if n != perPart[p] {
				t.Fatalf("%s's replica of partition %d holds %d entries, %d were acknowledged", h.ID(), p, n, perPart[p])
			}
		}
		for p := range cfg.Partitions {
			_, err := h.Group(p)
			votes := false
			for _, v := range layout.Voters[p] {
				votes = votes || v == h.ID()
			}
			if votes != (err == nil) {
				t.Fatalf("%s: Group(%d) = %v, votes in it: %v", h.ID(), p, err, votes)
			}
			if err != nil && !errors.Is(err, ErrUnknownPartition) {
				t.Fatalf("%s: Group(%d) = %v, want ErrUnknownPartition", h.ID(), p, err)
			}
		}
	}
	led := 0
	for _, h := range hosts {
		led += h.Stats().Led
	}
	if led != cfg.Partitions {
		t.Fatalf("%d groups led, want one leader per partition (%d)", led, cfg.Partitions)
	}
}

// TestRouterFollowsLeadership: after a partition's leader hands its
// leadership over, the router's next proposal to it reaches the new leader.
func TestRouterFollowsLeadership(t *testing.T) {
	cfg := testConfig(2)
	_, _, r := startHosts(t, cfg, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var h uint64
	next := func(p int) fsm.Op {
		for {
			h++
			if o := put(h); cfg.Of(o.Key) == p {
				return o
			}
		}
	}
	if _, err := r.Propose(ctx, []fsm.Op{next(0)}); err != nil {
		t.Fatal(err)
	}
	old, err := r.Leader(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.TransferLeadership(ctx, ""); err != nil {
		t.Fatal(err)
	}
	o := next(0)
	res, err := r.Propose(ctx, []fsm.Op{o})
	if err != nil || res[0].Status != fsm.StatusCreated {
		t.Fatalf("after the transfer: %v, %v", res, err)
	}
	now, err := r.Leader(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if now == old {
		t.Fatalf("partition 0 still led by %s after its transfer", old.ID())
	}
	if _, ok := now.FSM().Lookup(o.Key); !ok {
		t.Fatalf("the new leader %s does not hold %v", now.ID(), o.Key)
	}
}

func TestRouterErrors(t *testing.T) {
	cfg := testConfig(4)
	layout, err := cfg.Layout(members(3))
	if err != nil {
		t.Fatal(err)
	}
	cfg.LeaderTimeout = 50 * time.Millisecond
	// A router that holds none of the replicas finds no leader.
	r, err := NewRouter(cfg, layout, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"leader of a negative partition", func() error { _, err := r.Leader(ctx, -1); return err }, ErrUnknownPartition},
		{"leader past the end", func() error { _, err := r.Leader(ctx, 4); return err }, ErrUnknownPartition},
		{"no replica here", func() error { _, err := r.Leader(ctx, 0); return err }, ErrNoLeader},
		{"propose without a leader", func() error { _, err := r.Propose(ctx, []fsm.Op{put(1)}); return err }, block.ErrUnavailable},
		{"lookup without a leader", func() error { _, _, err := r.Lookup(ctx, block.NewKey("default", 1), raft.ReadLocal); return err }, ErrNoLeader},
		{"layout of another P", func() error { _, err := NewRouter(testConfig(5), layout, nil); return err }, ErrUnknownPartition},
		{"host not in the layout", func() error {
			_, err := OpenHost(ctx, cfg, "stranger", layout, NewInmemNetwork(time.Second), nil)
			return err
		}, ErrUnknownPartition},
		{"replica opened twice", func() error {
			n := NewInmemNetwork(time.Second)
			if _, err := n.Deps("m1", 0); err != nil {
				return err
			}
			_, err := n.Deps("m1", 0)
			return err
		}, block.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	// Results of a failed part are zero: not acknowledged.
	res, err := r.Propose(ctx, []fsm.Op{put(1), put(2)})
	if err == nil || len(res) != 2 || res[0].Status != 0 || res[1].Status != 0 {
		t.Fatalf("Propose without leaders = %v, %v", res, err)
	}
}
