package ctxstore

import (
	"context"
	"fmt"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Holder is one node that holds a shard of a block.
type Holder struct {
	// Node is the member's ID.
	Node string
	// Shard is the shard's index: below the block's DataShards a data
	// shard, else a parity shard. With DataShards 1 every shard is a whole
	// replica of the block.
	Shard int
	// State is the member's state as the cluster agrees on it ("alive",
	// "suspect", "dead", "left", "draining").
	State string
	// InMemory is set on the answering node's own shard when that shard
	// is in its DRAM tier right now, so a read of it touches no lower
	// tier. A node does not know other members' tiers: their entries
	// never have it.
	InMemory bool
}

// Location says where a block's shards are.
type Location struct {
	// Size is the block's length in bytes.
	Size int64
	// DataShards is k of the block's erasure code: 1 means every holder
	// has the whole block.
	DataShards int
	// Holders are the shard holders in the order a read on this node
	// would try them.
	Holders []Holder
}

// Locator is implemented by a Tier that knows which nodes hold a block's
// shards (the cluster backend does; a single node's tier stack holds
// everything itself and does not).
type Locator interface {
	// Locate returns key's location, block.ErrNotFound when no block is
	// indexed under it.
	Locate(ctx context.Context, key block.Key) (Location, error)
	// LocalNode is the ID of the node answering.
	LocalNode() string
}

// Locate says which nodes hold key's shards. It is block.ErrUnavailable
// when the store is not clustered (its one node holds every block), and
// block.ErrNotFound for a block that is not there. It reads at opts.Level
// (opts.Namespace applies; the other options do not).
func (s *Store) Locate(ctx context.Context, key block.Key, opts ReadOptions) (Location, error) {
	if err := s.sync(ctx, opts.Level); err != nil {
		return Location{}, err
	}
	if _, err := s.resolve(key.Namespace, &opts.Namespace); err != nil {
		return Location{}, err
	}
	l, ok := s.tier.(Locator)
	if !ok {
		return Location{}, fmt.Errorf("%w: %s: this store is not clustered; every block is on this node", block.ErrUnavailable, key)
	}
	return l.Locate(ctx, key)
}

// LocalNode is the ID of this node in its cluster, "" when the store is
// not clustered.
func (s *Store) LocalNode() string {
	if l, ok := s.tier.(Locator); ok {
		return l.LocalNode()
	}
	return ""
}
