package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/erasure"
	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// Dropped is the local tier stack's drop hook (tiers.Config.OnDrop): this
// node lost a shard to capacity pressure. The index is corrected in the
// background, in batches: the node leaves the block's placement, and a
// block left with too few shards to read is deleted. It never blocks; when
// the queue is full the drop is lost from the index's view until repair or
// a read notices.
func (b *Backend) Dropped(key block.Key) { b.drops.add(key) }

// dropBatcher turns this node's capacity drops into index corrections:
// queued, batched by DropBatch/DropLinger, committed in one proposal per
// batch. gap is what a put of a dropped block checks (refillDropped).
type dropBatcher struct {
	cfg   Config
	node  *raft.Node
	local ctxstore.Tier
	log   *slog.Logger
	met   *metrics
	queue chan block.Key
	gap   dropGap
	// propose commits index operations (Backend.propose); cleanup deletes
	// by key the shards left of an entry a drop deleted (Backend.cleanup).
	propose func(context.Context, ...fsm.Op) ([]fsm.OpResult, error)
	// catchUp waits until this node's index shows the placement changes
	// planned from the placements given (Backend.catchUp); syncRead makes
	// this node's index current (Backend.SyncRead).
	catchUp  func(context.Context, map[block.Key][]fsm.Shard)
	syncRead func(context.Context) error
	cleanup  func(key block.Key, c *erasure.Code, place []fsm.Shard)
}

func newDropBatcher(cfg Config, node *raft.Node, local ctxstore.Tier, log *slog.Logger, met *metrics) *dropBatcher {
	return &dropBatcher{cfg: cfg, node: node, local: local, log: log, met: met, queue: make(chan block.Key, 4096)}
}

// add queues a dropped shard; it never blocks.
func (d *dropBatcher) add(key block.Key) {
	d.gap.queue(key.Block())
	select {
	case d.queue <- key:
	default:
		d.gap.unqueue(key.Block())
		d.log.Warn("drop queue full; index not corrected", "key", key.String())
	}
}

// A block's index entry outlives its dropped local shard until the drop's
// batch commits. A put of the same block in that gap finds the entry and
// would answer "already stored" while the entry is about to lose this
// node's shard (or, for a single copy, be deleted). So the node remembers
// the blocks it has queued for drop: a put through it of such a block
// writes the missing local shards again (and the flush, which checks the
// local tier, then leaves them in the placement), or, when the block's
// drop is already committing, waits for it and starts over. A put of any
// other block that the index holds costs a map lookup, no round trip.

// dropGap is the set of blocks with a drop queued or committing.
type dropGap struct {
	mu   sync.Mutex
	keys map[block.Key]*gapState
	n    atomic.Int64 // len(keys): the common case skips the lock
}

type gapState struct {
	queued    int           // drops queued and not yet taken by a flush
	refilling int           // puts rewriting its shards now
	flushing  chan struct{} // closed when the flush committing it is done
}

func (g *dropGap) queue(k block.Key) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.keys == nil {
		g.keys = map[block.Key]*gapState{}
	}
	st := g.keys[k]
	if st == nil {
		st = &gapState{}
		g.keys[k] = st
		g.n.Add(1)
	}
	st.queued++
}

// has reports whether a drop of block k is queued or committing: the local
// tier gave up a shard of it and the index is about to say so.
func (g *dropGap) has(k block.Key) bool {
	if g.n.Load() == 0 {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.keys[k]
	return ok
}

// which marks the items of a put batch whose block has a drop queued or
// committing; nil when none has (the common case costs an atomic load).
func (g *dropGap) which(items []ctxstore.TierPut) []bool {
	if g.n.Load() == 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var marked []bool
	for i, it := range items {
		if _, ok := g.keys[it.Key.Block()]; ok {
			if marked == nil {
				marked = make([]bool, len(items))
			}
			marked[i] = true
		}
	}
	return marked
}

func (g *dropGap) unqueue(k block.Key) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if st := g.keys[k]; st != nil {
		st.queued--
		g.forget(k, st)
	}
}

// forget removes k once nothing is queued or committing for it. g.mu held.
func (g *dropGap) forget(k block.Key, st *gapState) {
	if st.queued <= 0 && st.refilling == 0 && st.flushing == nil {
		delete(g.keys, k)
		g.n.Add(-1)
	}
}

// refillDropped is writePut's check for a block the index already holds
// (with the same bytes). It returns again when the block's drop was
// committing (the caller looks the block up again); otherwise it has
// rewritten any shard of e placed on this node that the local tier lost to
// a drop still queued. The write runs without the lock (a local put may
// evict, and the tier's drop hook calls Dropped); a flush meanwhile defers
// the block to its next batch.
func (b *Backend) refillDropped(ctx context.Context, key block.Key, e fsm.Entry, data []byte, opts block.PutOptions) (again bool, err error) {
	g := &b.drops.gap
	if g.n.Load() == 0 {
		return false, nil
	}
	g.mu.Lock()
	st := g.keys[key]
	if st == nil {
		g.mu.Unlock()
		return false, nil
	}
	if ch := st.flushing; ch != nil {
		g.mu.Unlock()
		select {
		case <-ch:
			return true, nil
		case <-ctx.Done():
			return false, fmt.Errorf("%w: %s: waiting for its drop to commit: %v", block.ErrUnavailable, key, ctx.Err())
		}
	}
	st.refilling++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		st.refilling--
		g.forget(key, st)
		g.mu.Unlock()
	}()
	c, err := b.code(key.Namespace)
	if err != nil {
		return false, err
	}
	var shards [][]byte
	for _, s := range e.Placement {
		sk := shardKey(key, c, int(s.Index))
		if s.NodeID != b.cfg.NodeID || b.local.Contains(sk) {
			continue
		}
		if shards == nil {
			if shards, err = c.Encode(data); err != nil {
				return false, err
			}
		}
		if err := b.writeShard(ctx, b.cfg.NodeID, sk, shards[s.Index], opts); err != nil {
			// The shard is still gone: its drop must still reach the index.
			b.Dropped(sk)
			return false, fmt.Errorf("%s: rewriting a shard dropped a moment ago: %w", key, err)
		}
		b.log.Debug("put rewrote a shard whose drop was queued", "key", sk.String())
	}
	return false, nil
}

// takeForFlush marks the blocks of keys as committing and returns the keys
// whose shards the local tier still lacks (a put may have rewritten them),
// the keys of blocks a put is rewriting now (for the next batch), and the
// channel doneFlush closes once the batch committed.
func (g *dropGap) takeForFlush(keys []block.Key, has func(block.Key) bool) (left, deferred []block.Key, done chan struct{}) {
	done = make(chan struct{})
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, sk := range keys {
		st := g.keys[sk.Block()]
		if st != nil && st.refilling > 0 {
			deferred = append(deferred, sk)
			continue
		}
		if st != nil {
			st.queued--
			st.flushing = done
		}
		if !has(sk) {
			left = append(left, sk)
		}
	}
	return left, deferred, done
}

// doneFlush ends a flush taken by takeForFlush.
func (g *dropGap) doneFlush(keys []block.Key, done chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, sk := range keys {
		k := sk.Block()
		if st := g.keys[k]; st != nil && st.flushing == done {
			st.flushing = nil
			g.forget(k, st)
		}
	}
	close(done)
}

// run batches queued drops and flushes each batch, until stop closes.
func (d *dropBatcher) run(stop <-chan struct{}) {
	var batch []block.Key
	var timer <-chan time.Time
	for {
		select {
		case <-stop:
			return
		case k := <-d.queue:
			batch = append(batch, k)
			if timer == nil {
				timer = time.After(d.cfg.DropLinger)
			}
			if len(batch) < d.cfg.DropBatch {
				continue
			}
		case <-timer:
		}
		deferred := d.flush(batch)
		batch, timer = append(batch[:0], deferred...), nil
		if len(batch) > 0 {
			timer = time.After(d.cfg.DropLinger)
		}
	}
}

// flush commits the index corrections of a batch of dropped shards and
// returns the ones to retry with the next batch.
//
// Each placement change is conditional on the placement it was computed
// from (fsm.MovePlaceOp): a repair or a rebalance may move the block
// between the lookup and the commit, and an unconditional change, planned
// from the older placement, would name the copies that writer deleted and
// leave the ones it wrote unnamed. A refused change is computed again from
// the entry as read once caught up, up to dropRetries times; after that
// the drop is left to repair (a read or a repair pass finds the shard
// missing). The drop writes no copy, so a refusal deletes nothing.
//
// The batch is computed from this node's index once it has caught up with
// the leader's (syncRead). A shard reported missing may have been moved
// off this node: the mover commits the new placement, then deletes this
// node's copy, and a read or a restore pass that finds the copy gone
// reports it here while this node's index may still show the old
// placement. Computed from that, a lone copy's correction is a delete of
// the entry (conditioned on its generation, which a move keeps), and it
// deleted the entry of a block the new holder had. Caught up, the index
// shows the move and the batch leaves the block alone. When this node
// cannot catch up, the batch is computed from its index as it is.
func (d *dropBatcher) flush(all []block.Key) (deferred []block.Key) {
	keys, deferred, done := d.gap.takeForFlush(all, d.local.Contains)
	defer d.gap.doneFlush(all, done)
	if len(keys) > 0 && d.syncRead != nil {
		if err := d.syncRead(context.Background()); err != nil {
			d.log.Warn("index correction for dropped shards: cannot catch up with the leader; computed from this node's index", "blocks", len(keys), "err", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.ProposeTimeout)
	defer cancel()
	for try := 0; len(keys) > 0; try++ {
		if try > dropRetries {
			d.log.Warn("index correction for dropped shards refused again and again; left to repair", "blocks", len(keys))
			return deferred
		}
		refused, err := d.commit(ctx, keys)
		if err != nil {
			d.log.Warn("index correction for dropped shards failed", "blocks", len(keys), "err", err)
			return deferred
		}
		keys = refused
	}
	return deferred
}

// dropRetries bounds how often a batch computes a refused placement change
// again (each refusal means another writer moved the block meanwhile).
const dropRetries = 3

// commit proposes the index corrections of keys (shards the local tier
// dropped) in one batch, deletes the remaining shards of the entries it
// deleted, and returns the keys whose placement change was refused (the
// block moved meanwhile), to be computed again.
func (d *dropBatcher) commit(ctx context.Context, keys []block.Key) (refused []block.Key, err error) {
	f := d.node.FSM()
	var ops []fsm.Op
	var opKeys []block.Key // each op's dropped shard
	var orphans []fsm.Op   // deleted entries whose other shards are garbage now
	var orphanAt []int     // each orphan's op in ops
	from := map[block.Key][]fsm.Shard{}
	seen := map[block.Key]bool{}
	for _, sk := range keys {
		key := sk.Block()
		e, ok := f.Lookup(key)
		if !ok || d.local.Contains(sk) {
			continue
		}
		c, err := namespaceCode(f, key.Namespace)
		if err != nil {
			continue
		}
		var left []fsm.Shard
		idx := map[uint16]bool{}
		for _, s := range e.Placement {
			if s.NodeID == d.cfg.NodeID && shardKey(key, c, int(s.Index)) == sk {
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
			orphanAt = append(orphanAt, len(ops))
			ops = append(ops, fsm.DeleteOp(key, e.Generation))
			orphans = append(orphans, fsm.Op{Key: key, Placement: left})
		} else {
			ops = append(ops, fsm.MovePlaceOp(key, e.Sum, e.Placement, left, time.Time{}))
			from[key] = e.Placement
		}
		opKeys = append(opKeys, sk)
	}
	if len(ops) == 0 {
		return nil, nil
	}
	res, err := d.propose(ctx, ops...)
	if err != nil {
		return nil, err
	}
	for i, o := range orphans {
		// Only a delete that committed leaves garbage: a refused one (the
		// key was put again meanwhile) leaves shards the index names.
		if res[orphanAt[i]].Status != fsm.StatusDeleted {
			continue
		}
		// Fewer than k shards are left: the block cannot be read to learn
		// its shards' CRCs, so they go by key (see cleanup.go).
		if c, err := namespaceCode(f, o.Key.Namespace); err == nil {
			d.cleanup(o.Key, c, o.Placement)
		}
	}
	for i, o := range ops {
		if o.Kind == fsm.OpPlace && res[i].Status == fsm.StatusConflict {
			refused = append(refused, opKeys[i])
		}
	}
	// A refused change is counted when it is proposed again.
	d.met.drops.Add(float64(len(ops) - len(refused)))
	if len(refused) > 0 {
		// Computed again from the entry as the leader has it: this node
		// may follow, and its FSM not show the other writer's move yet.
		d.catchUp(ctx, from)
	}
	return refused, nil
}
