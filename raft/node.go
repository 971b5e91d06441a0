package raft

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// Deps are the Raft storage and transport a node runs on. Open builds the
// production ones; tests pass in-memory ones to OpenWith.
type Deps struct {
	Logs      hraft.LogStore
	Stable    hraft.StableStore
	Snapshots hraft.SnapshotStore
	Transport hraft.Transport
	// Closers are closed, in order, after Raft shuts down.
	Closers []io.Closer
	// Probe, when set, checks that a joiner's Raft address answers before
	// Join makes it a voter (nil: no check). Open sets StreamLayer.CheckPeer:
	// it connects as Raft would, with TLS when configured, and runs the
	// cluster-secret handshake.
	Probe func(ctx context.Context, raftAddr string) error
}

// probeTimeout bounds one Probe of a joiner's Raft address.
const probeTimeout = 2 * time.Second

// Node is one member of the Raft group.
type Node struct {
	cfg     Config
	log     *slog.Logger
	raft    *hraft.Raft
	fsm     *fsm.FSM
	batch   *batcher
	metrics *nodeMetrics
	reads   *Coalescer // leader: barrier, then the applied index
	deps    Deps

	unregister []func()
	stop       chan struct{}
	wg         sync.WaitGroup
	closeOnce  sync.Once
	closeErr   error
}

// Open starts a node on disk: a raft-wal log and stable store and a file
// snapshot store under DataDir/raft, and a TCP transport (TLS when
// cfg.TLS is set) listening on cfg.RaftAddr, every connection of which
// proves knowledge of cfg.Secret (PeerAuth). Raft, raft-wal and this
// package's metrics go to reg (nil: none); logs go to log.
func Open(ctx context.Context, cfg Config, log *slog.Logger, reg prometheus.Registerer) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.DataDir == "" {
		return nil, fmt.Errorf("%w: raft config: DataDir is required", block.ErrInvalidArgument)
	}
	if cfg.Secret == "" {
		return nil, fmt.Errorf("%w: raft config: Secret (the cluster secret) is required: the Raft port never runs unauthenticated", block.ErrInvalidArgument)
	}
	if log == nil {
		log = slog.Default()
	}
	hlog := NewHCLog(log, "raft")
	auth, err := NewPeerAuth(cfg.Secret, cfg.AuthTimeout, log.With("node_id", cfg.NodeID))
	if err != nil {
		return nil, err
	}
	walDir := filepath.Join(cfg.DataDir, "raft", "wal")
	if err := os.MkdirAll(walDir, 0o755); err != nil {
		return nil, fmt.Errorf("raft: %w", err)
	}
	wc := newWALCollector(cfg.NodeID)
	unWAL, err := register(reg, wc.all)
	if err != nil {
		return nil, fmt.Errorf("raft metrics: %w", err)
	}
	// raft-wal's Close does not close its metadata database (a bolt file
	// holding an exclusive lock), so we own it and close it after the WAL,
	// or a restart in the same process would wait on the lock for ever.
	meta := &metadb.BoltMetaDB{}
	w, err := wal.Open(walDir, wal.WithLogger(hlog.Named("wal")), wal.WithMetricsCollector(wc), wal.WithMetaStore(meta))
	if err != nil {
		unWAL()
		return nil, fmt.Errorf("raft: open wal %s: %w", walDir, err)
	}
	snaps, err := hraft.NewFileSnapshotStoreWithLogger(filepath.Join(cfg.DataDir, "raft"), cfg.SnapshotRetain, hlog.Named("snapshots"))
	if err != nil {
		w.Close()
		meta.Close()
		unWAL()
		return nil, fmt.Errorf("raft: snapshot store: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.RaftAddr)
	if err != nil {
		w.Close()
		meta.Close()
		unWAL()
		return nil, fmt.Errorf("%w: raft listen %s: %v", block.ErrUnavailable, cfg.RaftAddr, err)
	}
	adv, err := net.ResolveTCPAddr("tcp", cfg.advertise())
	if err != nil {
		ln.Close()
		w.Close()
		meta.Close()
		unWAL()
		return nil, fmt.Errorf("%w: raft advertise %s: %v", block.ErrInvalidArgument, cfg.advertise(), err)
	}
	stream := NewStreamLayer(ln, adv, cfg.TLS, auth)
	trans := &gatedTransport{NetworkTransport: hraft.NewNetworkTransportWithConfig(&hraft.NetworkTransportConfig{
		Stream: stream, MaxPool: 3, Timeout: 10 * time.Second, Logger: hlog.Named("transport"),
	})}
	var logs hraft.LogStore = w
	if cfg.LogCache > 0 {
		// Validate bounds it; NewLogCache fails only on a capacity of 0.
		if logs, err = hraft.NewLogCache(cfg.LogCache, w); err != nil {
			w.Close()
			meta.Close()
			unWAL()
			return nil, fmt.Errorf("raft: log cache: %w", err)
		}
	}
	n, err := OpenWith(ctx, cfg, log, reg, Deps{Logs: logs, Stable: w, Snapshots: snaps, Transport: trans,
		Closers: []io.Closer{closerFunc(trans.stopHeartbeats), trans, w, meta}, Probe: stream.CheckPeer})
	if err != nil {
		trans.Close()
		w.Close()
		meta.Close()
		unWAL()
		return nil, err
	}
	n.unregister = append(n.unregister, unWAL)
	unAuth, err := register(reg, []prometheus.Collector{auth.collector(cfg.NodeID)})
	if err != nil {
		n.Close()
		return nil, fmt.Errorf("raft metrics: %w", err)
	}
	n.unregister = append(n.unregister, unAuth)
	return n, nil
}

// OpenWith starts a node on the given storage and transport (tests use
// raft.NewInmemStore and raft.NewInmemTransport). cfg.DataDir is unused.
func OpenWith(_ context.Context, cfg Config, log *slog.Logger, reg prometheus.Registerer, d Deps) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	log = log.With("node_id", cfg.NodeID)
	hlog := NewHCLog(log, "raft")
	n := &Node{cfg: cfg, log: log, fsm: fsm.New(log), deps: d, stop: make(chan struct{})}
	release, err := attachRaftMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("raft metrics: %w", err)
	}
	n.unregister = append(n.unregister, release)

	hasState, err := hraft.HasExistingState(d.Logs, d.Stable, d.Snapshots)
	if err != nil {
		n.releaseMetrics()
		return nil, fmt.Errorf("raft: %w", err)
	}
	r, err := hraft.NewRaft(cfg.raftConfig(hlog), n.fsm, d.Logs, d.Stable, d.Snapshots, d.Transport)
	if err != nil {
		n.releaseMetrics()
		return nil, fmt.Errorf("raft: %w", err)
	}
	n.raft = r
	if cfg.Bootstrap && !hasState {
		var servers []hraft.Server
		for _, p := range cfg.InitialPeers {
			servers = append(servers, hraft.Server{ID: hraft.ServerID(p.ID), Address: hraft.ServerAddress(p.Addr), Suffrage: hraft.Voter})
		}
		if len(servers) == 0 {
			servers = []hraft.Server{{ID: hraft.ServerID(cfg.NodeID), Address: d.Transport.LocalAddr(), Suffrage: hraft.Voter}}
		}
		if err := r.BootstrapCluster(hraft.Configuration{Servers: servers}).Error(); err != nil && !errors.Is(err, hraft.ErrCantBootstrap) {
			r.Shutdown()
			n.releaseMetrics()
			return nil, fmt.Errorf("raft bootstrap: %w", err)
		}
		log.Info("raft cluster bootstrapped", "voters", len(servers))
	}
	n.metrics = newNodeMetrics(cfg.NodeID, n.IsLeader, n.fsm.OpsApplied)
	unreg, err := register(reg, n.metrics.collectors)
	if err != nil {
		r.Shutdown()
		n.releaseMetrics()
		return nil, fmt.Errorf("raft metrics: %w", err)
	}
	n.unregister = append(n.unregister, unreg)
	n.batch = newBatcher(cfg.Batch, func(cmd []byte) hraft.ApplyFuture { return r.Apply(cmd, cfg.ApplyTimeout) }, n.mapErr,
		func(ops int) { n.metrics.batchOps.Observe(float64(ops)); n.metrics.proposedOps.Add(float64(ops)) })
	n.reads = NewCoalescer(func() (uint64, error) {
		if err := n.mapErr(r.Barrier(cfg.ApplyTimeout).Error()); err != nil {
			return 0, err
		}
		return n.fsm.AppliedIndex(), nil
	})
	n.wg.Add(1)
	go n.watchLeadership()
	return n, nil
}

func (n *Node) releaseMetrics() {
	for i := len(n.unregister) - 1; i >= 0; i-- {
		n.unregister[i]()
	}
	n.unregister = nil
}

// Close shuts Raft down and releases the stores, transport and metrics.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		close(n.stop)
		n.batch.close()
		n.closeErr = n.raft.Shutdown().Error()
		n.wg.Wait()
		for _, c := range n.deps.Closers {
			if err := c.Close(); err != nil && n.closeErr == nil {
				n.closeErr = err
			}
		}
		n.releaseMetrics()
	})
	return n.closeErr
}

// FSM is the replicated state, for local reads (no network hop).
func (n *Node) FSM() *fsm.FSM { return n.fsm }

// ID is this node's id.
func (n *Node) ID() string { return n.cfg.NodeID }

// IsLeader reports whether this node is the leader now.
func (n *Node) IsLeader() bool { return n.raft.State() == hraft.Leader }

// Leader returns the current leader's id and Raft address ("" when none is
// known). The gateway forwards writes to the leader's member HTTPAddr.
func (n *Node) Leader() (id, addr string) {
	a, i := n.raft.LeaderWithID()
	return string(i), string(a)
}

// LeaderMember returns the leader's member record, for its HTTP and data
// addresses.
func (n *Node) LeaderMember() (fsm.Member, bool) {
	id, _ := n.Leader()
	if id == "" {
		return fsm.Member{}, false
	}
	return n.fsm.Member(id)
}

// WaitLeader blocks until some leader is known (not necessarily this node).
func (n *Node) WaitLeader(ctx context.Context) (id string, err error) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if id, _ := n.Leader(); id != "" {
			return id, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%w: no raft leader: %v", block.ErrUnavailable, ctx.Err())
		case <-t.C:
		}
	}
}

// Propose commits index operations through the group-commit batcher and
// returns one result per operation, in order. It must run on the leader
// (else a *NotLeaderError: forward the request). ErrOutcomeUnknown means
// the operations may have committed: retrying is safe.
func (n *Node) Propose(ctx context.Context, ops ...fsm.Op) ([]fsm.OpResult, error) {
	res, _, err := n.batch.propose(ctx, ops)
	if err != nil {
		n.metrics.applyErrors.Inc()
	}
	return res, err
}

// Apply commits one encoded command as its own log entry, bypassing the
// batcher (membership, namespace and credential changes use it).
func (n *Node) Apply(ctx context.Context, cmd []byte) (*fsm.Response, error) {
	f := n.raft.Apply(cmd, n.cfg.ApplyTimeout)
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		if err != nil {
			n.metrics.applyErrors.Inc()
			return nil, n.mapErr(err)
		}
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", ErrOutcomeUnknown, ctx.Err())
	}
	resp, ok := f.Response().(*fsm.Response)
	if !ok {
		return nil, fmt.Errorf("%w: raft returned %T", block.ErrUnavailable, f.Response())
	}
	return resp, nil
}

func (n *Node) applyErr(ctx context.Context, cmd []byte) error {
	resp, err := n.Apply(ctx, cmd)
	if err != nil {
		return err
	}
	return resp.Err
}

// SetMember adds or replaces a member record.
func (n *Node) SetMember(ctx context.Context, m fsm.Member) error {
	return n.applyErr(ctx, fsm.EncodeMember(fsm.MemberCommand{Action: fsm.MemberUpsert, Member: m}))
}

// SetMemberState changes a member's state (the failure detector marks
// suspect/dead; a graceful leave marks left).
func (n *Node) SetMemberState(ctx context.Context, id string, s fsm.MemberState) error {
	return n.applyErr(ctx, fsm.EncodeMember(fsm.MemberCommand{Action: fsm.MemberSetState, Member: fsm.Member{ID: id, State: s}}))
}

// SetIncarnation records member id's start (incarnation) and whether it is
// still restoring its shards (fsm.CmdIncarnation).
func (n *Node) SetIncarnation(ctx context.Context, id string, incarnation uint64, restoring bool) error {
	return n.applyErr(ctx, fsm.EncodeIncarnation(fsm.IncarnationCommand{ID: id, Incarnation: incarnation, Restoring: restoring}))
}

// PutCredential stores a credential whose secret is already hashed or
// sealed (fsm.HashSecret, fsm.SealSecret).
func (n *Node) PutCredential(ctx context.Context, c fsm.Credential) error {
	if err := c.Validate(); err != nil {
		return err
	}
	return n.applyErr(ctx, fsm.EncodeCredential(fsm.CredentialCommand{Action: fsm.CredentialPut, Credential: c}))
}

// DeleteCredential removes an access key (absent is not an error).
func (n *Node) DeleteCredential(ctx context.Context, accessKeyID string) error {
	return n.applyErr(ctx, fsm.EncodeCredential(fsm.CredentialCommand{Action: fsm.CredentialDelete, Credential: fsm.Credential{AccessKeyID: accessKeyID}}))
}

// Credential returns this node's FSM record of an access key.
func (n *Node) Credential(accessKeyID string) (fsm.Credential, bool) {
	return n.fsm.Credential(accessKeyID)
}

// CredentialIDs lists the access key ids in this node's FSM, sorted.
func (n *Node) CredentialIDs() []string { return n.fsm.CredentialIDs() }

// Join adds m as a voter (on the leader) and records its member entry. It
// is idempotent: joining again with the same address changes nothing, and
// with a new address updates it. A new voter's Raft address must first
// pass Deps.Probe (StreamLayer.CheckPeer: ErrPermissionDenied for a wrong
// secret or certificate).
func (n *Node) Join(ctx context.Context, m fsm.Member) error {
	if m.State == 0 {
		m.State = fsm.MemberAlive
	}
	if err := m.Validate(); err != nil {
		return err
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return n.mapErr(err)
	}
	present := false
	for _, s := range cf.Configuration().Servers {
		if string(s.ID) == m.ID && string(s.Address) == m.RaftAddr && s.Suffrage == hraft.Voter {
			present = true
		}
	}
	if !present {
		// Adding a voter this node cannot talk to would cost the cluster a
		// vote of its quorum (one unreachable voter takes a single node's
		// quorum for good): check that the joiner's Raft address answers,
		// that it holds the cluster secret and, with TLS, a trusted
		// certificate, first (the join request itself arrived over HTTP).
		if probe := n.deps.Probe; probe != nil {
			if err := probe(ctx, m.RaftAddr); err != nil {
				n.log.Warn("join refused", "member", m.ID, "addr", m.RaftAddr, "err", err)
				return err
			}
		}
		if err := n.wait(ctx, n.raft.AddVoter(hraft.ServerID(m.ID), hraft.ServerAddress(m.RaftAddr), 0, n.cfg.ApplyTimeout)); err != nil {
			return err
		}
		n.log.Info("raft voter added", "member", m.ID, "addr", m.RaftAddr)
	}
	return n.SetMember(ctx, m)
}

// Remove takes a node out of the Raft configuration and marks its member
// record left (repair then rebuilds its shards elsewhere).
func (n *Node) Remove(ctx context.Context, id string) error {
	if err := n.wait(ctx, n.raft.RemoveServer(hraft.ServerID(id), 0, n.cfg.ApplyTimeout)); err != nil {
		return err
	}
	if _, ok := n.fsm.Member(id); ok {
		return n.SetMemberState(ctx, id, fsm.MemberLeft)
	}
	return nil
}

// TransferLeadership hands leadership to id ("" for the most up-to-date
// follower).
func (n *Node) TransferLeadership(ctx context.Context, id string) error {
	if id == "" {
		return n.wait(ctx, n.raft.LeadershipTransfer())
	}
	for _, s := range n.servers() {
		if string(s.ID) == id {
			return n.wait(ctx, n.raft.LeadershipTransferToServer(s.ID, s.Address))
		}
	}
	return fmt.Errorf("%w: %q is not in the raft configuration", block.ErrInvalidArgument, id)
}

// Server is one entry of the Raft configuration, for status displays.
type Server struct {
	ID       string
	Addr     string
	Voter    bool
	Leader   bool
	Member   fsm.Member // zero when the FSM has no record yet
	HasState bool       // Member is set
}

// Servers lists the Raft configuration.
func (n *Node) Servers() []Server {
	lid, _ := n.Leader()
	var out []Server
	for _, s := range n.servers() {
		m, ok := n.fsm.Member(string(s.ID))
		out = append(out, Server{ID: string(s.ID), Addr: string(s.Address), Voter: s.Suffrage == hraft.Voter, Leader: string(s.ID) == lid, Member: m, HasState: ok})
	}
	return out
}

func (n *Node) servers() []hraft.Server {
	cf := n.raft.GetConfiguration()
	if cf.Error() != nil {
		return nil
	}
	return cf.Configuration().Servers
}

// Stats are hashicorp/raft's counters (term, indices, state).
func (n *Node) Stats() map[string]string { return n.raft.Stats() }

func (n *Node) wait(ctx context.Context, f hraft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return n.mapErr(err)
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrOutcomeUnknown, ctx.Err())
	}
}

// ReadLevel chooses how fresh a read must be.
type ReadLevel uint8

// Read levels.
const (
	// ReadLocal reads this node's FSM as it is: no network hop, possibly a
	// little behind the leader.
	ReadLocal ReadLevel = iota
	// ReadLinearizable first makes sure this node's FSM holds every write
	// committed before the call: on the leader a Raft barrier (ReadIndex);
	// on a follower the leader's read index, then WaitApplied.
	ReadLinearizable
)

// Read prepares a read at level and returns the FSM to read from. Here a
// linearizable read must run on the leader (else *NotLeaderError): a
// follower asks the leader for ReadIndex over the network (ctxstore/cluster
// does, through ctxstore/cluster/control) and then calls WaitApplied.
func (n *Node) Read(ctx context.Context, level ReadLevel) (*fsm.FSM, error) {
	if level == ReadLinearizable {
		if _, err := n.ReadIndex(ctx); err != nil {
			return nil, err
		}
	}
	return n.fsm, nil
}

// ReadIndex is the leader's half of a linearizable read (Raft's ReadIndex,
// done with a barrier): it confirms that this node still leads, through a
// Raft barrier, which commits only with a quorum and returns only once the
// FSM has applied every entry before it, and then returns the log index
// this node's FSM has applied. Every write acknowledged before the call is
// at or below that index, so any node whose FSM has applied it (see
// WaitApplied) can serve a linearizable read from its own state.
// Concurrent calls share barriers. It must run on the leader (else
// *NotLeaderError).
func (n *Node) ReadIndex(ctx context.Context) (uint64, error) {
	if !n.IsLeader() {
		return 0, n.mapErr(hraft.ErrNotLeader)
	}
	idx, err := n.reads.Do(ctx)
	if err != nil {
		return 0, fmt.Errorf("linearizable read: %w", err)
	}
	return idx, nil
}

// WaitApplied blocks until this node's FSM has applied log index idx (a
// leader's ReadIndex). It wakes on each apply, never polls; when ctx ends
// first it returns block.ErrUnavailable.
func (n *Node) WaitApplied(ctx context.Context, idx uint64) error {
	if err := n.fsm.WaitApplied(ctx, idx); err != nil {
		return fmt.Errorf("%w: linearizable read: node %s has applied log index %d, the read needs %d: %v",
			block.ErrUnavailable, n.cfg.NodeID, n.fsm.AppliedIndex(), idx, err)
	}
	return nil
}

// watchLeadership keeps the leader's own member record in the FSM.
func (n *Node) watchLeadership() {
	defer n.wg.Done()
	ch := n.raft.LeaderCh()
	for {
		select {
		case <-n.stop:
			return
		case leader := <-ch:
			if !leader {
				continue
			}
			n.log.Info("raft leadership acquired")
			self := n.cfg.Self
			self.ID, self.RaftAddr = n.cfg.NodeID, string(n.deps.Transport.LocalAddr())
			if self.State == 0 {
				self.State = fsm.MemberAlive
			}
			if cur, ok := n.fsm.Member(self.ID); ok && cur == self {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
			if err := n.SetMember(ctx, self); err != nil {
				n.log.Warn("recording own member entry failed", "err", err)
			}
			cancel()
		}
	}
}

var _ hclog.Logger = (*hclogAdapter)(nil)

// gatedTransport is the TCP transport with Raft's heartbeat fast path
// gated: the transport calls that path from its own connection goroutines,
// outside Raft's run loop, so a heartbeat that arrived just before Shutdown
// can still be writing the term when the stores close, and Raft panics on a
// store error ("failed to save current term: closed"). Close stops the gate
// first: it waits for heartbeats in progress and refuses later ones.
type gatedTransport struct {
	*hraft.NetworkTransport
	mu     sync.RWMutex
	closed bool
}

// SetHeartbeatHandler installs cb behind the gate.
func (g *gatedTransport) SetHeartbeatHandler(cb func(rpc hraft.RPC)) {
	if cb == nil {
		g.NetworkTransport.SetHeartbeatHandler(nil)
		return
	}
	g.NetworkTransport.SetHeartbeatHandler(func(rpc hraft.RPC) {
		g.mu.RLock()
		defer g.mu.RUnlock()
		if g.closed {
			rpc.Respond(nil, errors.New("raft: node closed"))
			return
		}
		cb(rpc)
	})
}

// stopHeartbeats waits for heartbeats in progress and refuses later ones.
func (g *gatedTransport) stopHeartbeats() error {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	return nil
}

// closerFunc is a func as an io.Closer.
type closerFunc func() error

func (f closerFunc) Close() error { return f() }
