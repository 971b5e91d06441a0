package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/cmd/internal/subcmd"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/peer"
	"github.com/ctxtier/ctxtier/internal/clustersecret"
	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/raft/fsm"
	"github.com/ctxtier/ctxtier/tiers"
)

// advertised returns the address other nodes use for a listener bound to
// bound: the --advertise host (or the listen host) and the bound port.
func advertised(cfg Config, listen string, bound net.Addr) (string, error) {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return "", err
	}
	if cfg.Advertise != "" {
		host = cfg.Advertise
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		// Listening on every interface (a container, a pod): other nodes
		// reach this one by its host name unless --advertise says otherwise.
		h, err := os.Hostname()
		if err != nil || h == "" {
			return "", fmt.Errorf("listen address %q has no host other nodes can dial and the host name is unknown: set --advertise", listen)
		}
		host = h
	}
	_, port, err := net.SplitHostPort(bound.String())
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(host, port), nil
}

// raftAdvertise is the address peers dial for this node's Raft listener
// (the listener binds inside raft.Open, so its port is the configured one).
func raftAdvertise(cfg Config) (string, error) {
	_, port, err := net.SplitHostPort(cfg.RaftListen)
	if err != nil {
		return "", fmt.Errorf("raft-listen: %w", err)
	}
	p, err := net.LookupPort("tcp", port)
	if err != nil {
		return "", fmt.Errorf("raft-listen: %w", err)
	}
	return advertised(cfg, cfg.RaftListen, &net.TCPAddr{Port: p})
}

// openRaft starts this node's Raft member: bootstrapping a one-voter
// cluster when alone, a static cluster with --initial-peers, or waiting to
// be added when --join is given.
func openRaft(ctx context.Context, cfg Config, self fsm.Member, secret string, tlsc *raft.TLS, reg prometheus.Registerer, log *slog.Logger) (*raft.Node, error) {
	rc := raft.DefaultConfig()
	rc.TLS = tlsc
	rc.Secret = secret
	rc.NodeID = cfg.NodeID
	rc.DataDir = cfg.DataDir
	rc.RaftAddr = cfg.RaftListen
	adv, err := raftAdvertise(cfg)
	if err != nil {
		return nil, err
	}
	rc.AdvertiseAddr = adv
	peers, err := parsePeers(cfg.InitialPeers)
	if err != nil {
		return nil, err
	}
	rc.InitialPeers = peers
	rc.Bootstrap = cfg.Join == ""
	joinAddrs := subcmd.SplitList(cfg.Join)
	if len(joinAddrs) > 0 && len(peers) == 0 && joinAddrs[0] == self.HTTPAddr {
		// Join-or-bootstrap: every node runs the same command line; the node
		// named first in --join forms the cluster (only if it has no Raft
		// state yet: existing state always wins) and the others join it.
		rc.Bootstrap = true
	}
	rc.Self = self
	node, err := raft.Open(ctx, rc, log, reg)
	if err != nil {
		return nil, err
	}
	if len(joinAddrs) > 0 && !rc.Bootstrap {
		var others []string
		for _, a := range joinAddrs {
			if a != self.HTTPAddr {
				others = append(others, a)
			}
		}
		// Joining is idempotent on the leader, so a restarted member asks
		// again harmlessly; it retries across the addresses until it is in.
		go func() {
			if err := control.Join(ctx, others, self, clusterOpts(cfg, tlsc, secret)...); err != nil && ctx.Err() == nil {
				log.Error("joining the cluster failed", "via", others, "err", err)
				return
			}
			log.Info("joined the cluster", "via", others)
		}()
	}
	return node, nil
}

// nodeSecret settles this node's cluster secret (the node identity): the
// one given, the one kept in the data directory, or, for a node that forms
// a cluster, a new one, logged this once.
func nodeSecret(cfg Config, self fsm.Member, log *slog.Logger) (string, error) {
	given, err := cfg.secretSource().Read()
	if err != nil {
		return "", fmt.Errorf("cluster secret: %w", err)
	}
	peers, err := parsePeers(cfg.InitialPeers)
	if err != nil {
		return "", err
	}
	joins := subcmd.SplitList(cfg.Join)
	forms := len(joins) == 0 && len(peers) <= 1 || len(peers) == 0 && len(joins) > 0 && joins[0] == self.HTTPAddr
	secret, created, err := clustersecret.Resolve(given, cfg.DataDir, forms)
	if err != nil {
		return "", err
	}
	if created {
		log.Warn("created this cluster's secret, shown only now: joining nodes and ctxctl need it (--cluster-secret, or --cluster-secret-file with a copy of the file)",
			"cluster_secret", secret, "file", filepath.Join(cfg.DataDir, clustersecret.FileName))
	}
	return secret, nil
}

// clusterParts are the node's cluster: Raft, the peer clients and the
// cluster backend over the tier stack (openCluster builds them).
type clusterParts struct {
	// startIndex is the last Raft log index on disk at open: the node is
	// ready only once its FSM has applied that far, so a restarted node
	// never answers from a half-replayed index.
	startIndex uint64
	// caughtUp is set once this node's FSM is known to hold every entry
	// that was in its log at open.
	caughtUp atomic.Bool
	node     *raft.Node
	backend  *cluster.Backend
	peers    *peer.Peers
}

func (p *clusterParts) close(log *slog.Logger) {
	if p.backend != nil {
		p.backend.Close()
	}
	if p.peers != nil {
		p.peers.Close()
	}
	if p.node != nil {
		if err := p.node.Close(); err != nil {
			log.Error("closing raft", "err", err)
		}
	}
}

// openCluster starts Raft and the clustered backend over the local stack.
// tlsc (nil: plain TCP) secures Raft and the peer clients.
func openCluster(ctx context.Context, cfg Config, self fsm.Member, secret string, tlsc *raft.TLS, stack *tiers.Manager, reg prometheus.Registerer, log *slog.Logger) (*clusterParts, error) {
	parts := &clusterParts{}
	node, err := openRaft(ctx, cfg, self, secret, tlsc, reg, log)
	if err != nil {
		return nil, err
	}
	parts.node = node
	parts.startIndex, _ = strconv.ParseUint(node.Stats()["last_log_index"], 10, 64)
	popts := peer.DefaultOptions()
	// Peers' listeners take only this node identity.
	popts.AccessKeyID, popts.Secret = clustersecret.NodeAccessKeyID, secret
	if tlsc != nil {
		// The server name is --tls-server-name, or else each peer's host.
		popts.TLS = tlsc.ClientConfig("")
	}
	if parts.peers, err = peer.New(popts); err != nil {
		parts.close(log)
		return nil, err
	}
	ccfg := cluster.DefaultConfig()
	ccfg.NodeID = cfg.NodeID
	ccfg.Self = self
	ccfg.DeadAfter = cfg.DeadAfter
	ccfg.ProbeInterval = min(ccfg.ProbeInterval, cfg.DeadAfter/4)
	ccfg.ProbeTimeout = ccfg.ProbeInterval
	ccfg.RebalanceBytesPerSec, ccfg.RebalanceInflight = cfg.RebalanceRate, cfg.RebalanceInflight
	if parts.backend, err = cluster.New(ccfg, node, stack, parts.peers, control.NewForwarder(nil, clusterOpts(cfg, tlsc, secret)...), log, reg); err != nil {
		parts.close(log)
		return nil, err
	}
	return parts, nil
}

// ready reports whether the node can serve: a leader is known, this node's
// member record is committed, its FSM holds what its log held at start, and
// it has restored the shards the index places on it.
func (p *clusterParts) ready() error {
	if id, _ := p.node.Leader(); id == "" {
		return fmt.Errorf("%w: no raft leader yet", block.ErrUnavailable)
	}
	if !p.caughtUp.Load() {
		// Raft's applied_index runs ahead of the FSM (entries are handed
		// to the FSM goroutine asynchronously), so a restarted node could
		// answer lookups from a half-replayed index. A leader waits for a
		// barrier, which completes only once the FSM has applied every
		// preceding entry; a follower waits for applied_index (which also
		// counts no-ops and configuration changes) to pass its log's end.
		if p.node.IsLeader() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := p.node.Read(ctx, raft.ReadLinearizable)
			cancel()
			if err != nil {
				return fmt.Errorf("%w: replaying the raft log: %v", block.ErrUnavailable, err)
			}
		} else if got, _ := strconv.ParseUint(p.node.Stats()["applied_index"], 10, 64); got < p.startIndex {
			return fmt.Errorf("%w: replaying the raft log (%d of %d applied)", block.ErrUnavailable, got, p.startIndex)
		}
		p.caughtUp.Store(true)
	}
	if _, ok := p.node.FSM().Member(p.node.ID()); !ok {
		return fmt.Errorf("%w: this node's member record is not committed yet", block.ErrUnavailable)
	}
	if !p.backend.SelfRegistered() {
		// Until then other members write this node's shards to the
		// addresses of its previous start (ctxstore/cluster, restore.go).
		return fmt.Errorf("%w: this node's member record does not carry this start's addresses yet", block.ErrUnavailable)
	}
	if !p.backend.Restored() {
		// A restarted node first rebuilds the shards the index places on it
		// that its tiers lost (ctxstore/cluster, restore.go).
		st := p.backend.RestoreStatus()
		return fmt.Errorf("%w: restoring this node's shards (%d of %d checked were missing, %d restored, %d waiting: %s)",
			block.ErrUnavailable, st.Missing, st.Checked, st.Restored, st.Waiting, st.Err)
	}
	return nil
}

// waitReady waits up to d for ready (so the first requests find a leader).
func (p *clusterParts) waitReady(ctx context.Context, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		if err := p.ready(); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return p.ready()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
