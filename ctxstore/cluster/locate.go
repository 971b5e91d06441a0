package cluster

import (
	"context"
	"fmt"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
)

var _ ctxstore.Locator = (*Backend)(nil)

// Locate returns where this node's index places key's shards
// (ctxstore.Locator), in the order a read here would try them: this node
// first, then alive members, then restoring, suspect and draining ones,
// then the rest. A holder the index lists but that is dead is still
// listed (with its state), so a caller can tell it apart from an alive one.
// This node's own holder entry says whether its shard is in its DRAM tier
// (Holder.InMemory).
func (b *Backend) Locate(ctx context.Context, key block.Key) (ctxstore.Location, error) {
	key = key.Block()
	e, ok := b.own.lookup(ctx, key)
	if !ok {
		return ctxstore.Location{}, fmt.Errorf("%w: %s", block.ErrNotFound, key)
	}
	c, err := b.code(key.Namespace)
	if err != nil {
		return ctxstore.Location{}, err
	}
	loc := ctxstore.Location{Size: e.Size, DataShards: c.K, Holders: make([]ctxstore.Holder, 0, len(e.Placement))}
	f := b.node.FSM()
	for _, s := range b.reads.readOrder(e.Placement) {
		state := "unknown"
		if m, ok := f.Member(s.NodeID); ok {
			state = m.State.String()
		}
		h := ctxstore.Holder{Node: s.NodeID, Shard: int(s.Index), State: state}
		if s.NodeID == b.cfg.NodeID {
			// Stat is passive: it neither promotes nor counts as an access.
			info, err := b.local.Stat(ctx, shardKey(key, c, int(s.Index)))
			h.InMemory = err == nil && info.Tier == block.TierDRAM
		}
		loc.Holders = append(loc.Holders, h)
	}
	return loc, nil
}

// LocalNode is this node's member ID.
func (b *Backend) LocalNode() string { return b.cfg.NodeID }
