package cluster

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// The calls answered from this node's copy of the index alone, with no
// shard read: Stat, Contains, List; and Retain, which re-arms this node's
// own copy.

// Stat returns the block's metadata from the local index.
func (b *Backend) Stat(ctx context.Context, key block.Key) (block.Info, error) {
	key = key.Block()
	e, ok := b.own.lookup(ctx, key)
	if !ok {
		return block.Info{}, fmt.Errorf("%w: %s", block.ErrNotFound, key)
	}
	return info(key, e), nil
}

func info(key block.Key, e fsm.Entry) block.Info {
	return block.Info{Key: key, Size: e.Size, Sum: e.Sum, Tier: TierPeer, Created: e.Created, PinnedUntil: e.PinUntil}
}

// Contains answers from the local index (no network hop; a miss may wait,
// bounded, for this node's own forwarded writes, see ownwrites.go).
func (b *Backend) Contains(key block.Key) bool {
	_, ok := b.own.lookup(context.Background(), key.Block())
	return ok
}

// List answers from the local index, in object-name order.
func (b *Backend) List(_ context.Context, ns, prefix, after string, limit int) ([]block.Info, error) {
	hexPrefix := prefix
	if len(hexPrefix) > block.HashHexLen {
		hexPrefix = hexPrefix[:block.HashHexLen]
	}
	for i := 0; i < len(hexPrefix); i++ {
		if c := hexPrefix[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return nil, nil // object names are lowercase hex: nothing matches
		}
	}
	var out []block.Info
	lastHash, full := uint64(0), false
	err := b.node.FSM().Scan(ns, hexPrefix, func(k block.Key, e fsm.Entry) bool {
		// Entries come in (hash, part) order; name order differs only among
		// the parts of one hash, so finish that hash before stopping.
		if full && k.Hash != lastHash {
			return false
		}
		name := k.ObjectName()
		if name <= after || !strings.HasPrefix(name, prefix) {
			return true
		}
		out = append(out, info(k, e))
		lastHash = k.Hash
		if limit > 0 && len(out) >= limit {
			full = true
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key.ObjectName() < out[j].Key.ObjectName() })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Retain re-arms the retain window of this node's own copy of key (a
// LOOKUP's read hint); copies on other nodes are not reached.
func (b *Backend) Retain(key block.Key, d time.Duration) bool {
	r, ok := b.local.(interface {
		Retain(block.Key, time.Duration) bool
	})
	return ok && r.Retain(key.Block(), d)
}
