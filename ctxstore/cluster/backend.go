package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/erasure"
	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// TierPeer is the tier reported for a block served by the cluster rather
// than from this node's own memory.
const TierPeer block.Tier = "peer"

// Backend is the clustered tier: ctxstore.New(cfg, node.Catalog(), backend,
// log) is the cluster's Store.
type Backend struct {
	// What every job works on: the index (node), this node's own tier
	// stack, the other members' (peers), the leader (fwd).
	cfg   Config
	node  *raft.Node
	local ctxstore.Tier
	peers Peers
	fwd   Forwarder
	log   *slog.Logger
	met   *metrics
	// nsLookups counts the backend's own namespace lookups in the FSM
	// (code): a Get whose caller handed the namespace down makes none,
	// which a test checks.
	nsLookups atomic.Uint64

	// Data path. reads reads blocks from their holders (get.go,
	// getcoded.go); own is this node's own-write watermark (ownwrites.go).
	reads *blockReader
	own   *ownWrites

	// Capacity drops: batched into index corrections (drop.go).
	drops *dropBatcher

	// Failure detection, leader only (health.go).
	detect *detector

	// Repair, drain, rebalance, leader only. repair is the repair progress
	// (repair.go), wake makes the repair loop scan now (a member state
	// changed); drain is the account of the draining members (drain.go);
	// rebal is the rebalancing account (rebalance.go), rebalLimit its byte
	// budget.
	repair     repairBook
	wake       chan struct{}
	drain      *drainBook
	rebalMu    sync.Mutex
	rebal      rebalanceState
	rebalLimit *byteLimiter

	// Forwarding: readIndex shares a follower's read-index requests to the
	// leader (read.go); sessions ends agent sessions on the other members
	// (session.go).
	readIndex *raft.Coalescer
	sessions  atomic.Pointer[sessionPeersRef]
	// fwdq coalesces this node's index proposals forwarded to the leader
	// (forward.go).
	fwdq *forwardQueue

	// Restart: this start's restore progress (restore.go); started is
	// when New ran.
	restore *restoreBook
	started time.Time

	// Lifecycle of the background goroutines.
	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

var _ ctxstore.Tier = (*Backend)(nil)

// New builds the backend over a running Raft node, this node's own tier
// stack (local), the shard transport to the other members, and the
// forwarder to the leader (nil on a node that is always leader). It starts
// the failure detector, repair and drop-batching loops; Close stops them.
func New(cfg Config, node *raft.Node, local ctxstore.Tier, peers Peers, fwd Forwarder, log *slog.Logger, reg prometheus.Registerer) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if node == nil || local == nil || peers == nil {
		return nil, fmt.Errorf("%w: cluster: node, local tier and peers are required", block.ErrInvalidArgument)
	}
	if log == nil {
		log = slog.Default()
	}
	met, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	b := &Backend{
		cfg: cfg, node: node, local: local, peers: peers, fwd: fwd, log: log.With("node_id", cfg.NodeID), met: met,
		stop: make(chan struct{}), wake: make(chan struct{}, 1),
		drain: newDrainBook(), restore: &restoreBook{}, started: time.Now(),
		rebalLimit: newByteLimiter(cfg.RebalanceBytesPerSec),
	}
	b.own = &ownWrites{node: node, met: met}
	b.readIndex = raft.NewCoalescer(b.fetchReadIndex)
	b.fwdq = newForwardQueue(cfg.ProposeTimeout, b.forwardIndex, func(ops int) {
		met.forwards.Inc()
		met.forwardedOps.Add(float64(ops))
	})
	if b.cfg.Incarnation == 0 {
		b.cfg.Incarnation = uint64(time.Now().UnixNano())
	}
	b.drops = newDropBatcher(b.cfg, node, local, b.log, met)
	b.drops.propose, b.drops.catchUp, b.drops.syncRead = b.propose, b.catchUp, b.SyncRead
	b.drops.cleanup = func(key block.Key, c *erasure.Code, place []fsm.Shard) { b.cleanup(key, c, place, nil, version{}) }
	b.reads = &blockReader{cfg: b.cfg, node: node, local: local, peers: peers, met: met, syncRead: b.SyncRead, dropped: b.Dropped}
	b.detect = &detector{cfg: b.cfg, node: node, peers: peers, drain: b.drain, log: b.log, met: met, changed: b.kickRepair}
	// Before the peer listener serves: peers check it on every connection.
	ictx, cancel := context.WithTimeout(context.Background(), cfg.ShardTimeout)
	if err := b.putIdentity(ictx); err != nil {
		b.log.Error("no identity block: other members cannot tell this node from a stale address", "err", err)
	}
	cancel()
	b.met.restoring.Set(1)
	b.wg.Add(1)
	go func() {
		b.restoreLoop()
		if b.Restored() {
			b.met.restoring.Set(0)
		}
	}()
	if cfg.Self.RaftAddr != "" {
		b.wg.Add(1)
		go b.registerLoop()
	}
	b.wg.Add(3)
	go func() {
		defer b.wg.Done()
		b.detect.run(b.stop)
	}()
	go b.repairLoop()
	go func() {
		defer b.wg.Done()
		b.drops.run(b.stop)
	}()
	return b, nil
}

// Close stops the background loops (not the node nor the tiers).
func (b *Backend) Close() error {
	b.once.Do(func() {
		close(b.stop)
		b.fwdq.stop()
		b.wg.Wait()
		b.met.unregister()
	})
	return nil
}
