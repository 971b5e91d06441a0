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

// ReadIndexer asks the leader for its read index (raft.Node.ReadIndex):
// the log index a node must have applied to serve a linearizable read.
// the subpackage control's Forwarder implements it over HTTP beside Forward;
// a Forwarder without it leaves followers able to read locally only.
type ReadIndexer interface {
	ReadIndex(ctx context.Context, leader fsm.Member) (uint64, error)
}

var errNoReadIndexer = fmt.Errorf("%w: this follower has no way to ask the leader for a read index (its Forwarder is no ReadIndexer)", block.ErrUnavailable)

var _ ctxstore.ReadSyncer = (*Backend)(nil)

// SyncRead makes this node's index current for a linearizable read: every
// write acknowledged through any node before the call is in it when
// SyncRead returns. The leader confirms its leadership with a Raft barrier
// (shared by concurrent reads). A follower asks the leader for its read
// index (one HTTP round trip, shared by concurrent reads) and waits until
// its own FSM has applied that index. It gives up after
// Config.ProposeTimeout (or when ctx ends) with block.ErrUnavailable.
func (b *Backend) SyncRead(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.ProposeTimeout)
	defer cancel()
	if b.node.IsLeader() {
		_, err := b.node.ReadIndex(ctx)
		if err == nil || !errors.Is(err, raft.ErrNotLeader) && !errors.Is(err, raft.ErrOutcomeUnknown) {
			return err
		}
		// Leadership moved meanwhile: read as a follower.
	}
	idx, err := b.readIndex.Do(ctx)
	if err != nil {
		return fmt.Errorf("linearizable read: %w", err)
	}
	return b.node.WaitApplied(ctx, idx)
}

// fetchReadIndex is the one run of b.readIndex that concurrent follower
// reads share: the leader's read index, retried through leader changes for
// up to Config.ProposeTimeout.
func (b *Backend) fetchReadIndex() (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.ProposeTimeout)
	defer cancel()
	backoff := 10 * time.Millisecond
	for {
		idx, err := b.readIndexOnce(ctx)
		if err == nil {
			return idx, nil
		}
		if errors.Is(err, errNoReadIndexer) {
			return 0, err
		}
		if !errors.Is(err, block.ErrUnavailable) {
			// Refused (a wrong cluster token): retrying cannot help, and the
			// reader's request was not at fault.
			return 0, fmt.Errorf("%w: the leader refused the read-index request: %v", block.ErrUnavailable, err)
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%w: no read index from the leader: %v (last error: %v)", block.ErrUnavailable, ctx.Err(), err)
		case <-b.stop:
			return 0, fmt.Errorf("%w: the cluster backend is closing", block.ErrUnavailable)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 200*time.Millisecond)
	}
}

func (b *Backend) readIndexOnce(ctx context.Context) (uint64, error) {
	if b.node.IsLeader() {
		return b.node.ReadIndex(ctx)
	}
	leader, ok := b.node.LeaderMember()
	if !ok || leader.ID == b.cfg.NodeID {
		return 0, fmt.Errorf("%w: no raft leader known", block.ErrUnavailable)
	}
	ri, ok := b.fwd.(ReadIndexer)
	if !ok {
		return 0, errNoReadIndexer
	}
	return ri.ReadIndex(ctx, leader)
}
