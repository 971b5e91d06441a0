package cluster

import (
	"context"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// Dropped is the local tier stack's drop hook (tiers.Config.OnDrop): this
// node lost a shard to capacity pressure. The index is corrected in the
// background, in batches: the node leaves the block's placement, and a
// block left with too few shards to read is deleted. It never blocks; when
// the queue is full the drop is lost from the index's view until repair or
// a read notices.
func (b *Backend) Dropped(key block.Key) {
	select {
	case b.drops <- key:
	default:
		b.log.Warn("drop queue full; index not corrected", "key", key.String())
	}
}

func (b *Backend) dropLoop() {
	defer b.wg.Done()
	var batch []block.Key
	var timer <-chan time.Time
	for {
		select {
		case <-b.stop:
			return
		case k := <-b.drops:
			batch = append(batch, k)
			if timer == nil {
				timer = time.After(b.cfg.DropLinger)
			}
			if len(batch) < b.cfg.DropBatch {
				continue
			}
		case <-timer:
		}
		b.flushDrops(batch)
		batch, timer = batch[:0], nil
	}
}

func (b *Backend) flushDrops(keys []block.Key) {
	f := b.node.FSM()
	var ops []fsm.Op
	var orphans []fsm.Op // deleted entries whose other shards are garbage now
	seen := map[block.Key]bool{}
	for _, sk := range keys {
		key := sk.Block()
		e, ok := f.Lookup(key)
		if !ok {
			continue
		}
		c, err := b.code(key.Namespace)
		if err != nil {
			continue
		}
		var left []fsm.Shard
		idx := map[uint16]bool{}
		for _, s := range e.Placement {
			if s.NodeID == b.cfg.NodeID && shardKey(key, c, int(s.Index)) == sk {
				continue
			}
			left = append(left, s)
			idx[s.Index] = true
		}
		if len(left) == len(e.Placement) || seen[key] {
			continue
		}
		seen[key] = true
		if len(left) == 0 || (c.K > 1 && len(idx) < c.K) {
			ops = append(ops, fsm.DeleteOp(key, e.Generation))
			orphans = append(orphans, fsm.Op{Key: key, Placement: left})
		} else {
			ops = append(ops, fsm.PlaceOp(key, e.Sum, left))
		}
	}
	if len(ops) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.ProposeTimeout)
	defer cancel()
	if _, err := b.propose(ctx, ops...); err != nil {
		b.log.Warn("index correction for dropped shards failed", "blocks", len(ops), "err", err)
		return
	}
	b.met.drops.Add(float64(len(ops)))
	for _, o := range orphans {
		if c, err := b.code(o.Key.Namespace); err == nil {
			b.cleanup(o.Key, c, o.Placement, nil)
		}
	}
}
