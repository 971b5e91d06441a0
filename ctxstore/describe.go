package ctxstore

import (
	"context"
	"fmt"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Describer is implemented by a Tier that can hand out direct-read
// descriptors: a leased location of a block's bytes in a file that a
// co-located process reads itself (tiers.Manager does). release ends the
// lease and is idempotent.
type Describer interface {
	Descriptor(ctx context.Context, key block.Key) (d block.Descriptor, release func(), err error)
}

// Descriptor leases a block's bytes in place and says where they are (see
// block.Descriptor and docs/tiers.md, "Leases and descriptors"). It is
// block.ErrNotFound for a missing block and block.ErrUnavailable when the
// tier hands out no descriptor for it (read it with Get). The caller must
// call release. It reads at opts.Level (opts.Namespace applies; the other
// options do not).
func (s *Store) Descriptor(ctx context.Context, key block.Key, opts ReadOptions) (block.Descriptor, func(), error) {
	if err := s.sync(ctx, opts.Level); err != nil {
		return block.Descriptor{}, nil, err
	}
	if _, err := s.resolve(key.Namespace, &opts.Namespace); err != nil {
		return block.Descriptor{}, nil, err
	}
	d, ok := s.tier.(Describer)
	if !ok {
		return block.Descriptor{}, nil, fmt.Errorf("%w: %s: this node's tier hands out no descriptors; read the block instead", block.ErrUnavailable, key)
	}
	return d.Descriptor(ctx, key)
}
