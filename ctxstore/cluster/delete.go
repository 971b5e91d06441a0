package cluster

import (
	"context"
	"fmt"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// Delete: the index entry first (through Raft, for the generation looked
// up), then the shards of that version (cleanup.go). DeleteIf is in
// deleteif.go, DeleteBatch in batch.go.

// Delete removes the index entry, then (best effort) its shards.
func (b *Backend) Delete(ctx context.Context, key block.Key) error {
	return b.deleteMatching(ctx, key, nil)
}

// deleteMatching removes key's index entry while match accepts it (nil:
// whatever it holds), then (best effort) its shards. The delete is
// committed for the generation that was looked up; if the entry changed
// meanwhile the FSM answers Conflict and the entry is looked up again.
func (b *Backend) deleteMatching(ctx context.Context, key block.Key, match func(fsm.Entry) bool) error {
	key = key.Block()
	accept := func(e fsm.Entry, ok bool) bool { return ok && (match == nil || match(e)) }
	synced := false
	for range 3 {
		e, found := b.own.lookup(ctx, key)
		ok := accept(e, found)
		if !ok && !synced {
			// The block may have been put, or replaced, through another
			// node a moment ago: a delete is rare enough to ask the leader
			// before it answers NotFound (one read-index round trip).
			synced = true
			if b.SyncRead(ctx) == nil {
				e, found = b.node.FSM().Lookup(key)
				ok = accept(e, found)
			}
		}
		if !ok {
			if match != nil && found {
				return fmt.Errorf("%w: %s does not hold that version", block.ErrNotFound, key)
			}
			return fmt.Errorf("%w: %s", block.ErrNotFound, key)
		}
		res, err := b.propose(ctx, fsm.DeleteOp(key, e.Generation))
		if err != nil {
			return err
		}
		switch res[0].Status {
		case fsm.StatusDeleted:
			if c, err := b.code(key.Namespace); err == nil {
				b.cleanup(key, c, e.Placement, nil, b.entryVersion(ctx, key, e, c))
			}
			return nil
		case fsm.StatusNotFound:
			return fmt.Errorf("%w: %s", block.ErrNotFound, key)
		case fsm.StatusConflict:
			continue // re-put meanwhile: look again, and delete what matches
		default:
			return fmt.Errorf("%w: %s: index says %s", res[0].Err(), key, res[0].Status)
		}
	}
	return fmt.Errorf("%w: %s: the entry kept changing", block.ErrUnavailable, key)
}
