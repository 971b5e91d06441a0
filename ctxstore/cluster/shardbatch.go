package cluster

import (
	"context"
	"fmt"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/erasure"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// Shard writes grouped by destination: the shards one put (or one PutBatch)
// sends to the same remote member travel as one Peers.PutShards request, so
// a batch of N blocks costs each member one request instead of N frames
// and round trips. Every shard still succeeds or fails on its own.

// shardWrite is one shard write of a put: blk is the block's position in its
// batch (0 for a single put) and i the entry's position in the block's
// placement.
type shardWrite struct {
	blk, i int
	node   string
	key    block.Key // the shard's key
	data   []byte
	opts   block.PutOptions // the put's; writeShard and putShardsTo shape them per shard
}

// shardResult is the outcome of a block's i'th placement entry.
type shardResult struct {
	i   int
	err error
}

// appendShardWrites appends the writes of shards[p.Index] to each entry p
// of place.
func appendShardWrites(ws []shardWrite, blk int, key block.Key, c *erasure.Code, shards [][]byte, place []fsm.Shard, opts block.PutOptions) []shardWrite {
	for i, p := range place {
		ws = append(ws, shardWrite{blk: blk, i: i, node: p.NodeID, key: shardKey(key, c, int(p.Index)), data: shards[p.Index], opts: opts})
	}
	return ws
}

// sendShards starts every write and reports each one's outcome to done,
// exactly once, from any goroutine; it does not wait. A write to this node
// goes to the local tier, a lone write to a member through Peers.PutShard,
// and the writes bound for one remote member as one Peers.PutShards.
func (b *Backend) sendShards(ctx context.Context, writes []shardWrite, done func(w *shardWrite, err error)) {
	byNode := make(map[string][]*shardWrite, 4)
	var nodes []string
	for j := range writes {
		w := &writes[j]
		if _, ok := byNode[w.node]; !ok {
			nodes = append(nodes, w.node)
		}
		byNode[w.node] = append(byNode[w.node], w)
	}
	for _, node := range nodes {
		ws := byNode[node]
		if node == b.cfg.NodeID {
			// In the batch's order, as a member applies its PutShards
			// request: the local tier's policy sees a chain's blocks one
			// after the other (chain order, tail demotion), not in the
			// order goroutines happen to take its lock.
			go func() {
				for j, err := range b.putLocal(ctx, ws) {
					done(ws[j], err)
				}
			}()
			continue
		}
		if len(ws) == 1 {
			w := ws[0]
			go func() { done(w, b.writeShard(ctx, w.node, w.key, w.data, w.opts)) }()
			continue
		}
		go func() {
			for j, err := range b.putShardsTo(ctx, node, ws) {
				done(ws[j], err)
			}
		}()
	}
}

// putLocal writes ws to this node's tier stack in order, bounded together by
// ShardTimeout as putShardsTo bounds one remote member's writes, and
// returns one error per write. One deadline for the group instead of one
// per block: a context with a timer per 4 KiB block was a few percent of a
// node's CPU under batched puts.
func (b *Backend) putLocal(ctx context.Context, ws []*shardWrite) []error {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.ShardTimeout)
	defer cancel()
	errs := make([]error, len(ws))
	for j, w := range ws {
		o := shardOpts(w.key, w.data, w.opts)
		errs[j] = b.local.Put(ctx, w.key, w.data, o.Sum, o)
	}
	return errs
}

// putShardsTo writes ws to one remote member in one request, bounded by
// ShardTimeout as one shard write is, and returns one error per write.
func (b *Backend) putShardsTo(ctx context.Context, node string, ws []*shardWrite) []error {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.ShardTimeout)
	defer cancel()
	errs := make([]error, len(ws))
	fail := func(err error) []error {
		for j := range errs {
			errs[j] = err
		}
		return errs
	}
	m, ok := b.node.FSM().Member(node)
	if !ok {
		return fail(fmt.Errorf("%w: unknown member %q", block.ErrUnavailable, node))
	}
	puts := make([]ShardPut, len(ws))
	for j, w := range ws {
		o := shardOpts(w.key, w.data, w.opts)
		puts[j] = ShardPut{Key: w.key, Data: w.data, Sum: o.Sum, Opts: o}
	}
	got := b.peers.PutShards(ctx, m, puts)
	if len(got) != len(ws) {
		return fail(fmt.Errorf("%w: %s answered %d results for %d shards", block.ErrUnavailable, node, len(got), len(ws)))
	}
	b.met.shardBatches.Inc()
	// As writeShard does: writes refused at a member's old address, while
	// its new record committed, go once more to the new one.
	if cur, ok := b.node.FSM().Member(node); ok && cur.DataAddr != m.DataAddr {
		var again []int
		for j, err := range got {
			if err != nil {
				again = append(again, j)
			}
		}
		if len(again) > 0 {
			b.log.Debug("shard writes failed at a member's old address; writing to its new one", "node", node, "old", m.DataAddr, "new", cur.DataAddr, "shards", len(again))
			retry := make([]ShardPut, len(again))
			for i, j := range again {
				retry[i] = puts[j]
			}
			if res := b.peers.PutShards(ctx, cur, retry); len(res) == len(retry) {
				for i, j := range again {
					got[j] = res[i]
				}
			}
		}
	}
	return got
}

// shardOpts are the options a shard is stored with: its own CRC-32C (the
// caller's, already verified, for a whole block). A whole-block copy keeps
// the put's parent link, which the holder's replacement policy reads to
// keep a chain's head longer than its tail (tiers/policy Window); a shard
// of an erasure-coded block has none (its parent's shards may live on other
// members, and the wire's parent field carries the shard index).
func shardOpts(sk block.Key, data []byte, opts block.PutOptions) block.PutOptions {
	o := opts
	if sk.Shard == 0 {
		o.Sum = opts.Sum // the whole block: the caller verified it already
	} else {
		o.Sum = block.Checksum(data)
		o.HasParent, o.Parent = false, 0
	}
	o.HasSum = true
	return o
}
