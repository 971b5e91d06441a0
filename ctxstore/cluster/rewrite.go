package cluster

import (
	"context"
	"slices"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/placement"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// A put's entry can commit with fewer shards than the put wrote: the FSM
// drops a shard whose member restarted while the put ran (its copy went
// with the old process, docs/raft.md). Rather than acknowledge with the
// remaining shards and leave the rest to repair, the writer rewrites each
// dropped shard (same index, to the same member's new process, or else to
// a spare member) and commits the new placement before answering. Any
// failure leaves it to repair: the put is committed either way.

// rewriteDropped restores the shards of p that its committed entry e
// lacks. It logs, and leaves the rest to repair, when that fails.
func (b *Backend) rewriteDropped(ctx context.Context, p *pendingPut, e fsm.Entry) {
	var dropped []fsm.Shard
	for _, w := range p.written {
		if !slices.Contains(e.Placement, w) {
			dropped = append(dropped, w)
		}
	}
	// Before the first write: a member that restarts again meanwhile loses
	// this copy too, and the FSM drops it again.
	began := time.Now()
	shards, err := p.c.Encode(p.data)
	if err != nil {
		b.log.Warn("put: re-encoding for shards dropped at commit failed; repair rebuilds them", "key", p.key.String(), "err", err)
		return
	}
	var rewritten []fsm.Shard
	for _, d := range dropped {
		data, opts := shards[d.Index], p.opts
		to := d.NodeID
		err := b.writeShard(ctx, to, shardKey(p.key, p.c, int(d.Index)), data, opts)
		if err != nil {
			// A spare: an alive member holding no shard of the block.
			exclude := map[string]bool{d.NodeID: true}
			for _, s := range append(slices.Clone(e.Placement), rewritten...) {
				exclude[s.NodeID] = true
			}
			to = ""
			if cands := b.candidates(exclude); len(cands) > 0 {
				if picked, perr := placement.Pick(p.key, cands, 1); perr == nil {
					to = picked[0].ID
					err = b.writeShard(ctx, to, shardKey(p.key, p.c, int(d.Index)), data, opts)
				}
			}
		}
		if to == "" || err != nil {
			b.log.Warn("put: rewriting a shard dropped at commit failed; repair rebuilds it", "key", p.key.String(), "shard", d.Index, "node", d.NodeID, "err", err)
			continue
		}
		rewritten = append(rewritten, fsm.Shard{NodeID: to, Index: d.Index})
	}
	if len(rewritten) == 0 {
		return
	}
	place := append(slices.Clone(e.Placement), rewritten...)
	// Conditional on the placement committed with the put: a repair or a
	// rebalance may have moved the block since, and this change, planned
	// from the older placement, would name copies that writer deleted and
	// drop the ones it wrote.
	st, cur, ok, err := b.commitMove(ctx, fsm.MovePlaceOp(p.key, p.op.Sum, e.Placement, place, began))
	if err == nil && st == fsm.StatusUpdated {
		b.met.shardsWritten.Add(float64(len(rewritten)))
		return
	}
	if err == nil {
		// Refused (the block was moved, deleted or re-put meanwhile): the
		// copies the index does not name go; another writer may have put
		// some where this one did, so those it names stay.
		var keep []fsm.Shard
		if ok {
			keep = cur.Placement
		}
		b.cleanup(p.key, p.c, rewritten, keep, shardVersion(p.c, p.op.Sum, shards))
	}
	// An unknown outcome keeps the copies (the placement may name them).
	b.log.Warn("put: committing shards rewritten after a drop failed; repair rebuilds them", "key", p.key.String(), "err", err, "status", st.String())
}
