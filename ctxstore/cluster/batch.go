package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// Batched deletes and pins: like PutBatch, a batch of N keys commits its
// index changes as one proposal (one Raft log entry, or one forwarded call
// to the leader), not N.

var (
	_ ctxstore.BatchDeleter = (*Backend)(nil)
	_ ctxstore.BatchPinner  = (*Backend)(nil)
)

// batchCleaners bounds the blocks whose shards one batch deletes or pins at
// the same time.
const batchCleaners = 16

// firsts returns, for keys, the index of each key's first occurrence and
// the positions of later repeats (done after the batch, in order, so their
// outcome is that of in-order calls).
func firsts(keys []block.Key) (first []int, again []int) {
	seen := make(map[block.Key]bool, len(keys))
	for i, k := range keys {
		if k = k.Block(); seen[k] {
			again = append(again, i)
			continue
		}
		seen[k] = true
		first = append(first, i)
	}
	return first, again
}

// DeleteBatch deletes every key as Delete does and returns one error per
// key; the index entries of all the keys found go in one proposal.
func (b *Backend) DeleteBatch(ctx context.Context, keys []block.Key) []error {
	errs := make([]error, len(keys))
	first, again := firsts(keys)
	entries := make(map[int]fsm.Entry, len(first))
	var missing []int
	for _, i := range first {
		if e, ok := b.own.lookup(ctx, keys[i].Block()); ok {
			entries[i] = e
		} else {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 && b.SyncRead(ctx) == nil {
		// Blocks put through another node a moment ago: one read-index
		// round trip for the whole batch before answering NotFound.
		for _, i := range missing {
			if e, ok := b.node.FSM().Lookup(keys[i].Block()); ok {
				entries[i] = e
			}
		}
	}
	var ops []fsm.Op
	var at []int
	for _, i := range first {
		e, ok := entries[i]
		if !ok {
			errs[i] = fmt.Errorf("%w: %s", block.ErrNotFound, keys[i].Block())
			continue
		}
		ops = append(ops, fsm.DeleteOp(keys[i].Block(), e.Generation))
		at = append(at, i)
	}
	if len(ops) > 0 {
		res, err := b.propose(ctx, ops...)
		var gone []int
		for j, i := range at {
			key := keys[i].Block()
			switch {
			case err != nil:
				errs[i] = err
			case res[j].Status == fsm.StatusDeleted:
				gone = append(gone, i)
			case res[j].Status == fsm.StatusNotFound:
				errs[i] = fmt.Errorf("%w: %s", block.ErrNotFound, key)
			case res[j].Status == fsm.StatusConflict:
				errs[i] = b.Delete(ctx, key) // re-put meanwhile: delete what is there now
			default:
				errs[i] = fmt.Errorf("%w: %s: index says %s", res[j].Err(), key, res[j].Status)
			}
		}
		eachBounded(gone, batchCleaners, func(i int) {
			key := keys[i].Block()
			if c, err := b.code(key.Namespace); err == nil {
				b.cleanup(key, c, entries[i].Placement, nil, b.entryVersion(ctx, key, entries[i], c))
			}
		})
	}
	for _, i := range again {
		errs[i] = b.Delete(ctx, keys[i])
	}
	return errs
}

// PinBatch pins every key until the given time as Pin does and returns one
// error per key; the pins commit in one proposal, then the shards are
// pinned (best effort).
func (b *Backend) PinBatch(ctx context.Context, keys []block.Key, until time.Time) []error {
	errs := make([]error, len(keys))
	first, again := firsts(keys)
	ops := make([]fsm.Op, len(first))
	for j, i := range first {
		ops[j] = fsm.PinOp(keys[i].Block(), until)
	}
	if len(ops) > 0 {
		res, err := b.propose(ctx, ops...)
		var pinned []int
		for j, i := range first {
			switch {
			case err != nil:
				errs[i] = err
			case res[j].Err() != nil:
				errs[i] = fmt.Errorf("%w: %s", res[j].Err(), keys[i].Block())
			default:
				pinned = append(pinned, i)
			}
		}
		eachBounded(pinned, batchCleaners, func(i int) { b.pinShards(ctx, keys[i].Block(), until) })
	}
	for _, i := range again {
		errs[i] = b.Pin(ctx, keys[i], until)
	}
	return errs
}

// eachBounded runs fn for every index, limit at a time, and waits for all.
func eachBounded(idx []int, limit int, fn func(int)) {
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for _, i := range idx {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			fn(i)
		})
	}
	wg.Wait()
}
