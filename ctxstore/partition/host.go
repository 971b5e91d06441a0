package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"

	"github.com/ctxtier/ctxtier/raft"
)

// Network gives each replica of a group (a member's replica of one
// partition) its address, Raft storage and transport. InmemNetwork is the
// in-process one; across processes each replica would need a transport of
// its own or a node-wide one that multiplexes groups (not built).
type Network interface {
	// Addr is the Raft address of member's replica of partition p.
	Addr(member string, p int) string
	// Deps opens the storage and transport of member's replica of p.
	Deps(member string, p int) (raft.Deps, error)
}

// Host is one member's share of the partitioned index: a replica (a
// raft.Node, with the index FSM and its group-commit batcher) of every
// partition whose voters include the member.
type Host struct {
	id     string
	groups map[int]*raft.Node
	order  []int
}

// OpenHost starts member self's replicas of the partitions layout places
// on it. Each group bootstraps with its voters from the layout, so the
// replicas of one partition, opened on any hosts in any order, form one
// group and elect a leader once a quorum of them runs.
func OpenHost(ctx context.Context, cfg Config, self string, layout Layout, net Network, log *slog.Logger) (*Host, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(layout.Voters) != cfg.Partitions {
		return nil, fmt.Errorf("%w: partition: layout of %d partitions for a config of %d", ErrUnknownPartition, len(layout.Voters), cfg.Partitions)
	}
	parts, ok := layout.Hosted[self]
	if !ok {
		return nil, fmt.Errorf("%w: partition: %q is not a member of the layout", ErrUnknownPartition, self)
	}
	if log == nil {
		log = slog.Default()
	}
	h := &Host{id: self, groups: make(map[int]*raft.Node, len(parts))}
	for _, p := range parts {
		g := cfg.Group
		g.NodeID, g.RaftAddr, g.AdvertiseAddr, g.Bootstrap = self, net.Addr(self, p), "", true
		g.InitialPeers = make([]raft.Peer, 0, len(layout.Voters[p]))
		for _, v := range layout.Voters[p] {
			g.InitialPeers = append(g.InitialPeers, raft.Peer{ID: v, Addr: net.Addr(v, p)})
		}
		d, err := net.Deps(self, p)
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("partition %d on %s: %w", p, self, err)
		}
		n, err := raft.OpenWith(ctx, g, log.With("partition", p), nil, d)
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("partition %d on %s: %w", p, self, err)
		}
		h.groups[p] = n
		h.order = append(h.order, p)
	}
	sort.Ints(h.order)
	return h, nil
}

// ID is the member id of this host.
func (h *Host) ID() string { return h.id }

// Partitions lists the partitions this host holds a replica of, ascending.
func (h *Host) Partitions() []int { return append([]int(nil), h.order...) }

// Group returns this host's replica of partition p (ErrUnknownPartition
// when it holds none).
func (h *Host) Group(p int) (*raft.Node, error) {
	n, ok := h.groups[p]
	if !ok {
		return nil, fmt.Errorf("%w: %d is not held by %s", ErrUnknownPartition, p, h.id)
	}
	return n, nil
}

// HostStats counts one host's groups.
type HostStats struct {
	// Groups is the number of replicas it holds; Led the number of those
	// that lead their group now.
	Groups, Led int
	// Applied is the index operations its replicas applied, and
	// AppliedLed those applied by the replicas that lead now.
	Applied, AppliedLed uint64
}

// Stats counts this host's groups, leaders and applied operations.
func (h *Host) Stats() HostStats {
	s := HostStats{Groups: len(h.groups)}
	for _, n := range h.groups {
		ops := n.FSM().OpsApplied()
		s.Applied += ops
		if n.IsLeader() {
			s.Led++
			s.AppliedLed += ops
		}
	}
	return s
}

// Close shuts every replica down, in parallel (a node's Close waits for
// Raft's goroutines).
func (h *Host) Close() error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, n := range h.groups {
		wg.Go(func() {
			if err := n.Close(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
