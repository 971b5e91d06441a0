package partition

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// Router sends index operations to the partitions' leaders. It finds a
// partition's leader among the hosts it was given, all in this process
// (tests, the scaling harness); across processes the same split would send
// each part to its leader's member over the network (not built).
type Router struct {
	cfg     Config
	layout  Layout
	hosts   map[string]*Host
	leaders []atomic.Pointer[raft.Node] // last leader seen, per partition
}

// NewRouter returns a router over hosts laid out by layout.
func NewRouter(cfg Config, layout Layout, hosts []*Host) (*Router, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(layout.Voters) != cfg.Partitions {
		return nil, fmt.Errorf("%w: partition: layout of %d partitions for a config of %d", ErrUnknownPartition, len(layout.Voters), cfg.Partitions)
	}
	r := &Router{cfg: cfg, layout: layout, hosts: make(map[string]*Host, len(hosts)), leaders: make([]atomic.Pointer[raft.Node], cfg.Partitions)}
	for _, h := range hosts {
		r.hosts[h.id] = h
	}
	return r, nil
}

// pollEvery is how often Leader looks again while a partition has none.
const pollEvery = 5 * time.Millisecond

// Leader returns the replica that leads partition p now, waiting up to
// Config.LeaderTimeout (or ctx) for one: ErrUnknownPartition for p outside
// 0..P-1, ErrNoLeader when none of the replicas held here leads in time.
func (r *Router) Leader(ctx context.Context, p int) (*raft.Node, error) {
	if p < 0 || p >= r.cfg.Partitions {
		return nil, fmt.Errorf("%w: %d (there are %d)", ErrUnknownPartition, p, r.cfg.Partitions)
	}
	if n := r.leaders[p].Load(); n != nil && n.IsLeader() {
		return n, nil
	}
	deadline := time.Now().Add(r.cfg.LeaderTimeout)
	for {
		for _, id := range r.layout.Voters[p] {
			h, ok := r.hosts[id]
			if !ok {
				continue
			}
			if n, err := h.Group(p); err == nil && n.IsLeader() {
				r.leaders[p].Store(n)
				return n, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: partition %d (voters %v) after %v", ErrNoLeader, p, r.layout.Voters[p], r.cfg.LeaderTimeout)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: partition %d: %v", ErrNoLeader, p, ctx.Err())
		case <-time.After(pollEvery):
		}
	}
}

// Propose splits ops by partition and proposes each partition's part to
// its leader, all parts at once; the leader's batcher group-commits the
// parts that concurrent callers send to one partition into one log entry.
// It returns one result per operation, in order. A batch is not atomic
// across partitions: when some parts fail, err joins their errors and the
// operations of those parts have a zero Status (not acknowledged; as with
// raft.ErrOutcomeUnknown they may have committed, and retrying them is
// safe), while the others' results stand. A part whose leader stepped
// down before it was proposed (raft.ErrNotLeader) goes to the new leader.
func (r *Router) Propose(ctx context.Context, ops []fsm.Op) ([]fsm.OpResult, error) {
	res := make([]fsm.OpResult, len(ops))
	if len(ops) == 0 {
		return res, nil
	}
	// Group the operations by partition, keeping their order within each.
	idx := make(map[int][]int, len(ops))
	var parts []int
	for i, o := range ops {
		p := r.cfg.Of(o.Key)
		if _, ok := idx[p]; !ok {
			parts = append(parts, p)
		}
		idx[p] = append(idx[p], i)
	}
	errs := make([]error, len(parts))
	propose := func(j int) {
		p := parts[j]
		sub := make([]fsm.Op, len(idx[p]))
		for k, i := range idx[p] {
			sub[k] = ops[i]
		}
		got, err := r.proposePart(ctx, p, sub)
		if err != nil {
			errs[j] = fmt.Errorf("partition %d: %w", p, err)
			return
		}
		for k, i := range idx[p] {
			res[i] = got[k]
		}
	}
	if len(parts) == 1 {
		propose(0)
	} else {
		var wg sync.WaitGroup
		for j := range parts {
			wg.Go(func() { propose(j) })
		}
		wg.Wait()
	}
	return res, errors.Join(errs...)
}

// proposePart proposes ops, all of partition p, to its leader, following
// the leadership while it moves (until LeaderTimeout).
func (r *Router) proposePart(ctx context.Context, p int, ops []fsm.Op) ([]fsm.OpResult, error) {
	deadline := time.Now().Add(r.cfg.LeaderTimeout)
	for {
		n, err := r.Leader(ctx, p)
		if err != nil {
			return nil, err
		}
		res, err := n.Propose(ctx, ops...)
		if err == nil || !errors.Is(err, raft.ErrNotLeader) || time.Now().After(deadline) {
			return res, err
		}
		r.leaders[p].CompareAndSwap(n, nil)
	}
}

// Lookup reads key's entry from its partition's leader at level
// (raft.ReadLocal: the leader's FSM as it is, which holds every write the
// leader acknowledged; raft.ReadLinearizable: after a read-index barrier).
func (r *Router) Lookup(ctx context.Context, key block.Key, level raft.ReadLevel) (fsm.Entry, bool, error) {
	n, err := r.Leader(ctx, r.cfg.Of(key))
	if err != nil {
		return fsm.Entry{}, false, err
	}
	f, err := n.Read(ctx, level)
	if err != nil {
		return fsm.Entry{}, false, err
	}
	e, ok := f.Lookup(key.Block())
	return e, ok, nil
}
