package raft

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/internal/clustersecret"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// Peer is a voter of a statically bootstrapped cluster.
type Peer struct {
	ID   string
	Addr string
}

// Config configures a Node.
type Config struct {
	// NodeID names this node for ever; it must be unique in the cluster.
	NodeID string
	// RaftAddr is the host:port the Raft transport listens on.
	RaftAddr string
	// AdvertiseAddr is the address peers dial; empty means RaftAddr, which
	// then must not be an unspecified address like ":7000".
	AdvertiseAddr string
	// DataDir holds raft/wal and raft/snapshots. Only Open uses it.
	DataDir string

	// Bootstrap, when the node has no Raft state yet, forms a new cluster:
	// of InitialPeers when set (every one of them must be given the same
	// list: this is the bootstrap-expect form), else of this node alone. A
	// node with Bootstrap false and no state waits to be added by a leader
	// (Node.Join, called on the leader through the gateway's join request).
	// Existing state always wins: restarting never re-bootstraps.
	Bootstrap    bool
	InitialPeers []Peer

	// Self is this node's member record (data/HTTP addresses, zone,
	// capacity); ID and RaftAddr are filled in from the fields above. The
	// leader keeps its own record in the FSM and Join records the joiner's.
	Self fsm.Member

	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	// ApplyTimeout bounds how long a proposal may wait to enter Raft's queue.
	ApplyTimeout time.Duration

	SnapshotInterval  time.Duration
	SnapshotThreshold uint64
	TrailingLogs      uint64
	SnapshotRetain    int

	// TLS, when set, secures the Raft transport (mTLS with TLS.Mutual).
	TLS *TLS
	// Secret is the cluster secret (internal/clustersecret). Open requires
	// it: every Raft connection, both ways, first proves that both ends
	// hold it (PeerAuth), inside TLS when TLS is set. OpenWith, on a
	// transport of the caller's, does not use it.
	Secret string
	// AuthTimeout bounds that handshake on each connection.
	AuthTimeout time.Duration

	Batch BatchConfig

	// LogCache is how many of the newest log entries Open keeps in memory
	// in front of the write-ahead log (hashicorp/raft's LogCache): the
	// leader's replication and a follower's apply read recent entries
	// from it instead of reading them back from the log's files (0: no
	// cache). Memory: at most LogCache x Batch.MaxBytes, usually far less.
	LogCache int
}

// BatchConfig bounds group commit: concurrent proposals are coalesced into
// one log entry of at most MaxOps operations and MaxBytes encoded bytes
// (a single proposal larger than that travels alone). At most MaxInflight
// entries are in Raft at once; while they are, new proposals accumulate. A
// batch that could be sent waits up to Linger for more (0: send at once).
type BatchConfig struct {
	MaxOps      int
	MaxBytes    int
	MaxInflight int
	Linger      time.Duration
}

// DefaultConfig returns a configuration tuned for a LAN: a lost leader is
// replaced in about one to two seconds.
func DefaultConfig() Config {
	return Config{
		Bootstrap:          true,
		HeartbeatTimeout:   500 * time.Millisecond,
		ElectionTimeout:    500 * time.Millisecond,
		LeaderLeaseTimeout: 250 * time.Millisecond,
		CommitTimeout:      20 * time.Millisecond,
		ApplyTimeout:       5 * time.Second,
		SnapshotInterval:   2 * time.Minute,
		SnapshotThreshold:  8192,
		TrailingLogs:       10240,
		SnapshotRetain:     2,
		AuthTimeout:        DefaultAuthTimeout,
		Batch:              BatchConfig{MaxOps: 4096, MaxBytes: 1 << 20, MaxInflight: 4},
		LogCache:           32,
	}
}

// Validate checks the configuration (DataDir is checked by Open).
func (c Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: raft config: %s", block.ErrInvalidArgument, fmt.Sprintf(format, a...))
	}
	switch {
	case c.NodeID == "" || len(c.NodeID) > 128:
		return bad("NodeID must be 1..128 bytes")
	case c.RaftAddr == "":
		return bad("RaftAddr is required")
	case c.HeartbeatTimeout < 5*time.Millisecond || c.ElectionTimeout < 5*time.Millisecond:
		return bad("heartbeat and election timeouts must be at least 5ms")
	case c.LeaderLeaseTimeout <= 0 || c.LeaderLeaseTimeout > c.HeartbeatTimeout:
		return bad("LeaderLeaseTimeout must be positive and at most HeartbeatTimeout")
	case c.CommitTimeout <= 0 || c.ApplyTimeout <= 0:
		return bad("CommitTimeout and ApplyTimeout must be positive")
	case c.AuthTimeout <= 0:
		return bad("AuthTimeout must be positive")
	case c.SnapshotRetain < 1:
		return bad("SnapshotRetain must be at least 1")
	case c.LogCache < 0 || c.LogCache > 1<<16:
		return bad("LogCache must be in 0..65536 entries")
	case c.Batch.MaxOps < 1 || c.Batch.MaxBytes < 1 || c.Batch.MaxInflight < 1 || c.Batch.Linger < 0:
		return bad("Batch needs MaxOps, MaxBytes, MaxInflight >= 1 and Linger >= 0")
	}
	if c.Secret != "" {
		if err := clustersecret.Validate(c.Secret); err != nil {
			return bad("Secret: %v", err)
		}
	}
	if _, _, err := net.SplitHostPort(c.advertise()); err != nil {
		return bad("advertise address %q: %v", c.advertise(), err)
	}
	if host, _, _ := net.SplitHostPort(c.advertise()); host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified() {
		return bad("advertise address %q is unspecified: set AdvertiseAddr", c.advertise())
	}
	seen := map[string]bool{}
	self := false
	for _, p := range c.InitialPeers {
		if p.ID == "" || p.Addr == "" || seen[p.ID] {
			return bad("InitialPeers need unique ids and addresses")
		}
		seen[p.ID] = true
		self = self || p.ID == c.NodeID
	}
	if len(c.InitialPeers) > 0 && !self {
		return bad("InitialPeers must include this node %q", c.NodeID)
	}
	return nil
}

func (c Config) advertise() string {
	if c.AdvertiseAddr != "" {
		return c.AdvertiseAddr
	}
	return c.RaftAddr
}

func (c Config) raftConfig(hlog hclog.Logger) *hraft.Config {
	rc := hraft.DefaultConfig()
	rc.LocalID = hraft.ServerID(c.NodeID)
	rc.Logger = hlog
	rc.HeartbeatTimeout = c.HeartbeatTimeout
	rc.ElectionTimeout = c.ElectionTimeout
	rc.LeaderLeaseTimeout = c.LeaderLeaseTimeout
	rc.CommitTimeout = c.CommitTimeout
	rc.SnapshotInterval = c.SnapshotInterval
	if c.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = c.SnapshotThreshold
	}
	if c.TrailingLogs > 0 {
		rc.TrailingLogs = c.TrailingLogs
	}
	if rc.SnapshotInterval <= 0 {
		rc.SnapshotInterval = 2 * time.Minute
	}
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 256
	return rc
}

// Sentinels. Both wrap block.ErrUnavailable, so the gateway's error table
// maps them to "unavailable, retry" without a row of their own.
var (
	// ErrNotLeader: this node cannot commit; forward to the leader (see
	// NotLeaderError for its address).
	ErrNotLeader = fmt.Errorf("%w: not the raft leader", block.ErrUnavailable)
	// ErrOutcomeUnknown: the command may or may not have committed (the
	// leader lost leadership, or the caller stopped waiting). Retry: every
	// index operation is idempotent.
	ErrOutcomeUnknown = fmt.Errorf("%w: raft outcome unknown, retry", block.ErrUnavailable)
)

// NotLeaderError is ErrNotLeader with the current leader, when known.
type NotLeaderError struct {
	LeaderID   string
	LeaderAddr string
}

func (e *NotLeaderError) Error() string {
	if e.LeaderAddr == "" {
		return ErrNotLeader.Error() + " (no leader known)"
	}
	return fmt.Sprintf("%v (leader %s at %s)", ErrNotLeader, e.LeaderID, e.LeaderAddr)
}

// Unwrap makes errors.Is(err, ErrNotLeader) and block.ErrUnavailable hold.
func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }

// mapErr turns hashicorp/raft errors into this package's.
func (n *Node) mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, hraft.ErrNotLeader), errors.Is(err, hraft.ErrNotVoter):
		addr, id := n.raft.LeaderWithID()
		return &NotLeaderError{LeaderID: string(id), LeaderAddr: string(addr)}
	case errors.Is(err, hraft.ErrLeadershipLost):
		return fmt.Errorf("%w: %v", ErrOutcomeUnknown, err)
	case errors.Is(err, hraft.ErrRaftShutdown):
		return fmt.Errorf("%w: raft: %v", block.ErrClosed, err)
	case errors.Is(err, hraft.ErrEnqueueTimeout), errors.Is(err, hraft.ErrLeadershipTransferInProgress), errors.Is(err, hraft.ErrAbortedByRestore):
		return fmt.Errorf("%w: raft: %v", block.ErrUnavailable, err)
	}
	return fmt.Errorf("%w: raft: %v", block.ErrUnavailable, err)
}
