package cluster

import (
	"context"
	"fmt"

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
	key = key.Block()
	synced := false
	for range 3 {
		e, ok := b.lookup(ctx, key)
		if (!ok || e.Sum != sum) && !synced {
			// The version may have been put, or replaced, through another
			// node a moment ago: ask the leader once before answering.
			synced = true
			if b.SyncRead(ctx) == nil {
				e, ok = b.node.FSM().Lookup(key)
			}
		}
		if !ok || e.Sum != sum {
			return fmt.Errorf("%w: %s does not hold that version", block.ErrNotFound, key)
		}
		res, err := b.propose(ctx, fsm.DeleteOp(key, e.Generation))
		if err != nil {
			return err
		}
		switch res[0].Status {
		case fsm.StatusDeleted:
			if c, err := b.code(key.Namespace); err == nil {
				b.cleanup(key, c, e.Placement, nil)
			}
			return nil
		case fsm.StatusNotFound:
			return fmt.Errorf("%w: %s", block.ErrNotFound, key)
		case fsm.StatusConflict:
			// The entry changed since the lookup (a new generation of the
			// same bytes after a placement change, or other bytes): look
			// again, and delete only if it still holds sum.
			continue
		default:
			return fmt.Errorf("%w: %s: index says %s", res[0].Err(), key, res[0].Status)
		}
	}
	return fmt.Errorf("%w: %s: the entry kept changing", block.ErrUnavailable, key)
}
