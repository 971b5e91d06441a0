package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/erasure"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// Shard cleanup: deleting the copies of one version of a block that the
// index no longer names (a deleted entry, a put that lost, a moved shard).
//
// A key's shards are reused: once an index delete commits, another writer
// may put the same key again with other bytes (object slots do, see
// ctxstore/object), and its shard can land on a node before this cleanup's
// delete reaches it. A delete by key would then remove the new version's
// shard (lost until repair), or let a straggling older copy sit where the
// index names the new one. So a cleanup deletes a node's copy only while
// it holds the bytes of the version it meant to delete: the CRC-32C of that
// shard travels with the delete (DELETE_IF on the native protocol,
// ctxstore.DeleteTierIf locally) and the holder compares it with its stored
// copy under its per-key lock.

// version identifies the bytes a cleanup means to delete: the CRC-32C of
// each of its shards. A replica (k=1) is the whole block, so every copy has
// the block's CRC. Erasure shards each have their own, known only to whoever
// holds the shards' bytes; an unknown one falls back to a delete by key.
type version struct {
	replica bool
	whole   uint32            // k=1: the block's CRC-32C
	shards  map[uint16]uint32 // k>1: shard index → CRC-32C of that shard
}

// replicaVersion is the version of a block whose CRC-32C is sum: known for
// every copy when c replicates, unknown for erasure shards.
func replicaVersion(c *erasure.Code, sum uint32) version {
	if c.K == 1 {
		return version{replica: true, whole: sum}
	}
	return version{}
}

// shardVersion is the version whose shards are shards (nil entries
// unknown); sum is the whole block's CRC-32C.
func shardVersion(c *erasure.Code, sum uint32, shards [][]byte) version {
	v := replicaVersion(c, sum)
	if c.K == 1 {
		return v
	}
	v.shards = make(map[uint16]uint32, len(shards))
	for i, s := range shards {
		if s != nil {
			v.shards[uint16(i)] = block.Checksum(s)
		}
	}
	return v
}

// sum returns the CRC-32C of shard index i of v, if known.
func (v version) sum(i uint16) (uint32, bool) {
	if v.replica {
		return v.whole, true
	}
	s, ok := v.shards[i]
	return s, ok
}

// entryVersion is the version e names. For erasure-coded blocks it reads
// the block (verified against e's CRC) and re-encodes it to learn each
// shard's CRC: deletes of such blocks are rare, and a shard deleted by key
// is the hazard above. When the block cannot be read it is unknown.
func (b *Backend) entryVersion(ctx context.Context, key block.Key, e fsm.Entry, c *erasure.Code) version {
	if c.K == 1 {
		return replicaVersion(c, e.Sum)
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.ShardTimeout)
	defer cancel()
	data, err := b.reads.getCoded(ctx, key, e, c, 0)
	if err == nil {
		var shards [][]byte
		if shards, err = c.Encode(data); err == nil {
			return shardVersion(c, e.Sum, shards)
		}
	}
	b.log.Debug("shard cleanup: block unreadable, its shards are deleted by key", "key", key.String(), "err", err)
	return version{}
}

// deleteShard deletes shard sk from a node: only while the node holds
// the bytes whose CRC-32C is sum when known, else whatever it holds.
func (b *Backend) deleteShard(ctx context.Context, nodeID string, sk block.Key, sum uint32, known bool) error {
	if nodeID == b.cfg.NodeID {
		if known {
			return ctxstore.DeleteTierIf(ctx, b.local, sk, sum)
		}
		return b.local.Delete(ctx, sk)
	}
	m, ok := b.node.FSM().Member(nodeID)
	if !ok {
		return fmt.Errorf("%w: unknown member %q", block.ErrUnavailable, nodeID)
	}
	if known {
		return b.peers.DeleteShardIf(ctx, m, sk, sum)
	}
	return b.peers.DeleteShard(ctx, m, sk)
}

// cleanup deletes (best effort) the written shards of version v that keep
// does not hold.
func (b *Backend) cleanup(key block.Key, c *erasure.Code, written, keep []fsm.Shard, v version) {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.ShardTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, w := range written {
		sk := shardKey(key, c, int(w.Index))
		if slices.ContainsFunc(keep, func(s fsm.Shard) bool {
			return s.NodeID == w.NodeID && shardKey(key, c, int(s.Index)) == sk
		}) {
			continue
		}
		sum, known := v.sum(w.Index)
		if !known {
			b.met.cleanupByKey.Inc()
		}
		wg.Go(func() {
			if err := b.deleteShard(ctx, w.NodeID, sk, sum, known); err != nil && !errors.Is(err, block.ErrNotFound) {
				b.log.Debug("shard cleanup failed", "key", sk.String(), "node", w.NodeID, "err", err)
			}
		})
	}
	wg.Wait()
}
