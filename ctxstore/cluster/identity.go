package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// A member's data address can be stale for a moment: a node that restarts
// on another port (or host) registers its new address a little after it
// starts serving, and meanwhile its old port may belong to another process,
// even another member. A NotFound from such an address says nothing about
// the member. Before a NotFound leads to giving a block up, the answering
// member proves who it is: every node keeps, in its own tier stack, a tiny
// block under identityKey whose bytes are its node id, and a member whose
// address answers that key with its own id is the member the index means.

// IdentityKey is the reserved key of a node's identity block: the default
// namespace, hash 0, and the highest shard number, which no erasure code
// reaches (at most 32 shards). ctxstore/cluster/peer reads it on every
// new link to a member, so a shard meant for one member never lands on another.
var IdentityKey = block.Key{Namespace: block.DefaultNamespace, Shard: block.MaxShard}

var identityKey = IdentityKey

// putIdentity stores this node's identity block in its tier stack.
func (b *Backend) putIdentity(ctx context.Context) error {
	id := []byte(b.cfg.NodeID)
	sum := block.Checksum(id)
	err := b.local.Put(ctx, identityKey, id, sum, block.PutOptions{Sum: sum, HasSum: true})
	if errors.Is(err, block.ErrConflict) {
		// A data directory that served another node id: replace it.
		if err = b.local.Delete(ctx, identityKey); err == nil || errors.Is(err, block.ErrNotFound) {
			err = b.local.Put(ctx, identityKey, id, sum, block.PutOptions{Sum: sum, HasSum: true})
		}
	}
	if err != nil {
		return fmt.Errorf("storing this node's identity block: %w", err)
	}
	return nil
}

// verified reports whether member id answers at its recorded data address
// with its own identity. Any failure is "not verified".
func (b *Backend) verified(ctx context.Context, id string) bool {
	if id == b.cfg.NodeID {
		return true
	}
	m, ok := b.node.FSM().Member(id)
	if !ok {
		return false
	}
	d, _, err := b.peers.GetShard(ctx, m, identityKey, 0)
	return err == nil && string(d) == m.ID
}

// allVerified reports whether every member in ids is verified.
func (b *Backend) allVerified(ctx context.Context, ids []string) bool {
	for _, id := range ids {
		if !b.verified(ctx, id) {
			b.log.Info("a member that answered NotFound did not prove its identity; not giving the block up", "member", id)
			return false
		}
	}
	return true
}
