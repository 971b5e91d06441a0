// Package cluster is the data path of a ctxtier cluster: a ctxstore.Tier
// that splits each block into erasure-coded shards (k=1 is replication),
// places them on members by rendezvous hashing, writes them through the
// node-to-node shard transport, and commits the block's index entry through
// Raft before acknowledging. Reads, lookups and listings come from the
// node's own copy of the index; a linearizable read (ctxstore.ReadSyncer)
// first brings it up to the leader's read index (read.go). The leader also
// runs the failure detector and the background repair that rebuilds shards
// of dead or removed nodes.
package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// Config configures a Backend.
type Config struct {
	// NodeID is this node's id (the Raft node id).
	NodeID string
	// Self, when its RaftAddr is set, is this node's member record
	// (addresses, zone, capacity): the backend keeps it registered in the
	// index, through the leader, so statically bootstrapped nodes appear as
	// members. Joined nodes are recorded by the join itself.
	Self fsm.Member
	// DeadAfter: a member that has not answered a probe for this long is
	// marked dead (and its shards are repaired elsewhere).
	DeadAfter time.Duration
	// SuspectAfter: a member silent this long is marked suspect, which takes
	// it out of placement for new puts (0: DeadAfter/2).
	SuspectAfter time.Duration
	// ProbeInterval is how often the leader probes every member.
	ProbeInterval time.Duration
	// ProbeTimeout bounds one probe.
	ProbeTimeout time.Duration
	// RepairInterval is how often the leader scans the index for shards to
	// repair.
	RepairInterval time.Duration
	// RepairBytesPerSec bounds the shard bytes repair writes per second.
	RepairBytesPerSec int64
	// ShardTimeout bounds one shard read or write to a peer, and one
	// batch of shard writes to a peer (Peers.PutShards).
	ShardTimeout time.Duration
	// ProposeTimeout bounds committing an index change, retries and leader
	// changes included, and likewise a linearizable read's sync (read.go).
	ProposeTimeout time.Duration
	// Incarnation identifies this start of the node (0: the clock at New,
	// in nanoseconds). It must grow from one start to the next.
	Incarnation uint64
	// RebalanceBytesPerSec bounds the shard bytes rebalancing copies per
	// second (rebalance.go), RebalanceInflight the shard copies it runs at
	// once, and RebalanceBatch the blocks of one page (one Raft proposal).
	RebalanceBytesPerSec int64
	RebalanceInflight    int
	RebalanceBatch       int
	// DropBatch and DropLinger bound how capacity drops are batched into
	// index updates.
	DropBatch  int
	DropLinger time.Duration
}

// DefaultConfig returns the defaults: dead after 10 s, probes every second,
// repair at 64 MiB/s, rebalancing at 32 MiB/s with 8 shard copies at once
// in pages of 64 blocks.
func DefaultConfig() Config {
	return Config{
		DeadAfter:            10 * time.Second,
		ProbeInterval:        time.Second,
		ProbeTimeout:         time.Second,
		RepairInterval:       time.Second,
		RepairBytesPerSec:    64 << 20,
		RebalanceBytesPerSec: 32 << 20,
		RebalanceInflight:    8,
		RebalanceBatch:       64,
		ShardTimeout:         10 * time.Second,
		ProposeTimeout:       10 * time.Second,
		DropBatch:            256,
		DropLinger:           50 * time.Millisecond,
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: cluster config: %s", block.ErrInvalidArgument, fmt.Sprintf(format, a...))
	}
	switch {
	case c.NodeID == "":
		return bad("NodeID is required")
	case c.ProbeInterval <= 0 || c.ProbeTimeout <= 0:
		return bad("ProbeInterval and ProbeTimeout must be positive")
	case c.DeadAfter < c.ProbeInterval:
		return bad("DeadAfter %v must be at least ProbeInterval %v", c.DeadAfter, c.ProbeInterval)
	case c.SuspectAfter < 0 || c.SuspectAfter > c.DeadAfter:
		return bad("SuspectAfter must be in 0..DeadAfter")
	case c.RepairInterval <= 0 || c.RepairBytesPerSec <= 0:
		return bad("RepairInterval and RepairBytesPerSec must be positive")
	case c.RebalanceBytesPerSec <= 0 || c.RebalanceInflight < 1 || c.RebalanceBatch < 1:
		return bad("RebalanceBytesPerSec must be positive, RebalanceInflight and RebalanceBatch at least 1")
	case c.ShardTimeout <= 0 || c.ProposeTimeout <= 0:
		return bad("ShardTimeout and ProposeTimeout must be positive")
	case c.DropBatch < 1 || c.DropLinger <= 0:
		return bad("DropBatch must be >= 1 and DropLinger positive")
	}
	return nil
}

func (c Config) suspectAfter() time.Duration {
	if c.SuspectAfter > 0 {
		return c.SuspectAfter
	}
	return c.DeadAfter / 2
}

// Peers is the node-to-node shard transport (ctxstore/cluster/peer implements it).
// Every call names the member by its record (DataAddr is where it listens).
// Shard keys carry block.Key.Shard for erasure shards; a replica (k=1) is
// the whole block under its own key.
type Peers interface {
	PutShard(ctx context.Context, m fsm.Member, key block.Key, data []byte, sum uint32, opts block.PutOptions) error
	// PutShards stores several shards on m in one request (ctxstore/cluster/peer:
	// one pipelined native batch put) and returns one error per shard, in
	// order: each shard succeeds or fails on its own, as PutShard would.
	PutShards(ctx context.Context, m fsm.Member, shards []ShardPut) []error
	// GetShard returns the shard's bytes and their CRC-32C: the checksum
	// the peer stored with them, which the bytes were verified against (so
	// comparing it with an expected sum checks the bytes without a second
	// pass over them). retain > 0 is the read's retain window
	// (block.GetOptions.Retain), passed on to the member as a read hint.
	GetShard(ctx context.Context, m fsm.Member, key block.Key, retain time.Duration) ([]byte, uint32, error)
	DeleteShard(ctx context.Context, m fsm.Member, key block.Key) error
	// DeleteShardIf deletes the shard only while m holds the bytes whose
	// CRC-32C is sum (block.ErrNotFound, changing nothing, otherwise): a
	// cleanup never removes a newer version put under the key since.
	DeleteShardIf(ctx context.Context, m fsm.Member, key block.Key, sum uint32) error
	PinShard(ctx context.Context, m fsm.Member, key block.Key, until time.Time) error
	// Healthy returns nil when the member answers.
	Healthy(ctx context.Context, m fsm.Member) error
}

// ShardPut is one shard of a Peers.PutShards request; Sum is the CRC-32C
// of Data (Opts.Sum is ignored).
type ShardPut struct {
	Key  block.Key
	Data []byte
	Sum  uint32
	Opts block.PutOptions
}

// Forwarder carries an encoded proposal to the leader (the subpackage control
// implements it over HTTP) and returns the leader's encoded answer, which
// the leader computes with Backend.HandleForwarded.
type Forwarder interface {
	Forward(ctx context.Context, leader fsm.Member, req []byte) ([]byte, error)
}
