package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// Namespace changes commit through Raft, so only the leader can make them.
// A client may send them to any node (ctxctl, S3 CreateBucket, a quota
// change): leaderCatalog tries locally and, on a follower, forwards the
// same namespace command to the leader, as puts are forwarded. The caller
// has already been authorised by the node it reached; the forward goes
// over the cluster endpoint, which only members (the cluster secret) can
// call.

// leaderCatalog is a ctxstore.Catalog whose changes reach the leader.
type leaderCatalog struct {
	*raft.Catalog
	b *Backend
}

// LeaderCatalog wraps cat (this node's Raft catalog) so that namespace
// changes made on a follower are forwarded to the leader.
func (b *Backend) LeaderCatalog(cat *raft.Catalog) ctxstore.Catalog {
	return leaderCatalog{Catalog: cat, b: b}
}

func (c leaderCatalog) CreateNamespace(ctx context.Context, ns block.Namespace) error {
	return c.change(ctx, c.Catalog.CreateNamespace(ctx, ns), fsm.NamespaceCommand{Action: fsm.NamespaceCreate, Namespace: ns})
}

func (c leaderCatalog) UpdateNamespace(ctx context.Context, ns block.Namespace) error {
	return c.change(ctx, c.Catalog.UpdateNamespace(ctx, ns), fsm.NamespaceCommand{Action: fsm.NamespaceUpdate, Namespace: ns})
}

func (c leaderCatalog) DeleteNamespace(ctx context.Context, name string) error {
	return c.change(ctx, c.Catalog.DeleteNamespace(ctx, name), fsm.NamespaceCommand{Action: fsm.NamespaceDelete, Namespace: block.Namespace{Name: name}})
}

// change returns local, the outcome of trying cmd on this node, unless it
// says this node is not the leader; then it forwards cmd to the leader,
// again through leader changes, until the propose timeout.
func (c leaderCatalog) change(ctx context.Context, local error, cmd fsm.NamespaceCommand) error {
	if !errors.Is(local, raft.ErrNotLeader) {
		return local
	}
	if err := c.b.forwardNamespace(ctx, fsm.EncodeNamespace(cmd)); err != nil {
		return err
	}
	// Read your writes: the caller may look the namespace up here next.
	if err := c.b.SyncRead(ctx); err != nil {
		c.b.log.Debug("namespace change forwarded; this node's index catches up later", "err", err)
	}
	return nil
}

// forwardNamespace sends an encoded namespace command to the leader. It
// retries while no other node is known to lead (an election) or the one
// asked is no longer the leader; any other answer is final.
func (b *Backend) forwardNamespace(ctx context.Context, req []byte) error {
	if b.fwd == nil {
		return fmt.Errorf("%w: not the leader and no forwarder configured", raft.ErrNotLeader)
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.ProposeTimeout)
	defer cancel()
	backoff := 10 * time.Millisecond
	for {
		var err error
		if b.node.IsLeader() {
			err = b.applyNamespace(ctx, req)
		} else if leader, ok := b.node.LeaderMember(); ok && leader.ID != b.cfg.NodeID {
			var out []byte
			if out, err = b.fwd.Forward(ctx, leader, req); err == nil {
				_, err = DecodeResults(out, 0)
			}
		} else {
			err = raft.ErrNotLeader
		}
		if !errors.Is(err, raft.ErrNotLeader) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: forwarding a namespace change to the leader: %v (last error: %v)", block.ErrUnavailable, ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 200*time.Millisecond)
	}
}

// applyNamespace commits an encoded namespace command on this node, the
// leader, and returns the FSM's answer (a conflict, an unknown or non-empty
// namespace).
func (b *Backend) applyNamespace(ctx context.Context, req []byte) error {
	resp, err := b.node.Apply(ctx, req)
	if err != nil {
		return err
	}
	return resp.Err
}
