package cluster

import (
	"context"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

var _ ctxstore.ConditionalDeleter = (*Backend)(nil)

// DeleteIf deletes key only while its index entry records the checksum sum:
// the delete is committed conditioned on the entry's generation, so a block
// re-put with other bytes since the lookup is never removed (the FSM
// answers Conflict, and the entry is looked up again). A key that is
// absent or holds other bytes is block.ErrNotFound.
func (b *Backend) DeleteIf(ctx context.Context, key block.Key, sum uint32) error {
	return b.deleteMatching(ctx, key, func(e fsm.Entry) bool { return e.Sum == sum })
}
