package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
)

var _ ctxstore.Describer = (*Backend)(nil)

// Descriptor leases this node's own replica of key for a co-located reader
// (ctxstore.Describer), so the descriptor path works on a cluster node: only
// a whole replica (a namespace with k = 1) that the index places here and
// that the local tier holds, with the index's size and checksum, can be
// read in place. A block the index does not hold is block.ErrNotFound; one
// held only by other nodes or only as erasure-coded shards is
// block.ErrUnavailable (read it with Get).
func (b *Backend) Descriptor(ctx context.Context, key block.Key) (block.Descriptor, func(), error) {
	key = key.Block()
	e, ok := b.own.lookup(ctx, key)
	if !ok {
		return block.Descriptor{}, nil, fmt.Errorf("%w: %s", block.ErrNotFound, key)
	}
	c, err := b.code(key.Namespace)
	if err != nil {
		return block.Descriptor{}, nil, err
	}
	ld, ok := b.local.(ctxstore.Describer)
	here := false
	for _, s := range e.Placement {
		here = here || s.NodeID == b.cfg.NodeID
	}
	if c.K != 1 || !ok || !here {
		return block.Descriptor{}, nil, fmt.Errorf("%w: %s: no whole replica on this node; read the block instead", block.ErrUnavailable, key)
	}
	d, release, err := ld.Descriptor(ctx, key)
	if err != nil {
		if errors.Is(err, block.ErrNotFound) {
			err = fmt.Errorf("%w: %s: this node's replica is gone; read the block instead", block.ErrUnavailable, key)
		}
		return block.Descriptor{}, nil, err
	}
	if d.Length != e.Size || d.Sum != e.Sum {
		release()
		return block.Descriptor{}, nil, fmt.Errorf("%w: %s: this node's replica does not match the index; read the block instead", block.ErrUnavailable, key)
	}
	return d, release, nil
}
