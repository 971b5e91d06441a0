package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// Pin: the pin commits in the index, then the holders pin their shards
// (best effort). PinBatch is in batch.go.

// Pin commits the pin in the index and pins the shards (best effort).
func (b *Backend) Pin(ctx context.Context, key block.Key, until time.Time) error {
	key = key.Block()
	res, err := b.propose(ctx, fsm.PinOp(key, until))
	if err != nil {
		return err
	}
	if err := res[0].Err(); err != nil {
		return fmt.Errorf("%w: %s", err, key)
	}
	b.pinShards(ctx, key, until)
	return nil
}

// pinShards pins the shards of key's committed entry (best effort).
func (b *Backend) pinShards(ctx context.Context, key block.Key, until time.Time) {
	e, ok := b.node.FSM().Lookup(key)
	c, cerr := b.code(key.Namespace)
	if !ok || cerr != nil {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, b.cfg.ShardTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, s := range e.Placement {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sk := shardKey(key, c, int(s.Index))
			if s.NodeID == b.cfg.NodeID {
				_ = b.local.Pin(pctx, sk, until)
			} else if m, ok := b.node.FSM().Member(s.NodeID); ok {
				_ = b.peers.PinShard(pctx, m, sk, until)
			}
		}()
	}
	wg.Wait()
}
