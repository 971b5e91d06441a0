package cluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/erasure"
	"github.com/ctxtier/ctxtier/ctxstore/placement"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// The write half of a put: shards to their members, a spare member for a
// shard its member does not take, and the write quorum.

// stragglerGrace is how long a put waits for the remaining shards once
// enough of them are written (redundantWrites): a slow or partitioned peer
// then costs a put this much, not a whole ShardTimeout. Shards that land
// later are not in the index (they are evicted in time); repair restores
// full redundancy.
const stragglerGrace = 200 * time.Millisecond

// redundantWrites is how many of a put's n shards must be written before it
// stops waiting for a slow member after stragglerGrace: k+1 (all n when
// there are no more), so that the block survives losing any one holder. A
// write quorum below it (RS(2,1)'s is its two data shards) is accepted only
// once the other writes have failed (a member that died refuses at once):
// a live member that is merely slow is waited for, up to ShardTimeout. A
// block acknowledged on k shards has no redundancy, and a holder restarted
// before repair completes it (a rolling restart: SIGKILL, empty DRAM)
// loses it for good; waiting for repair cannot help either, since the
// shard can be cut off after the operator's last look at pending repair.
func redundantWrites(c *erasure.Code, n int) int {
	return min(c.K+1, n)
}

// writeQuorum is how many of a put's n shards must be written before it is
// acknowledged: k plus half the parity, rounded up, but never all n when
// there is parity, so that a put survives one member that has died and is
// not yet marked suspect. Repair writes the missing shard once a member
// can take it.
func writeQuorum(c *erasure.Code, n int) int {
	q := c.K + (c.M+1)/2
	if n > c.K {
		q = min(q, n-1)
	}
	return max(min(q, n), 1)
}

// writeSpares writes the shards of place that written lacks to alive
// members that hold none of the block's shards, and returns written with
// those that succeeded added.
func (b *Backend) writeSpares(ctx context.Context, key block.Key, c *erasure.Code, shards [][]byte, place, written []fsm.Shard, opts block.PutOptions) []fsm.Shard {
	exclude := map[string]bool{}
	var failed []fsm.Shard
	for _, p := range place {
		exclude[p.NodeID] = true
		if !slices.Contains(written, p) {
			failed = append(failed, p)
		}
	}
	spares := b.candidates(exclude)
	if len(failed) == 0 || len(spares) == 0 {
		return written
	}
	picked, err := placement.Pick(key, spares, min(len(failed), len(spares)))
	if err != nil {
		return written
	}
	moved := make([]fsm.Shard, len(picked))
	for i, p := range picked {
		moved[i] = fsm.Shard{NodeID: p.ID, Index: failed[i].Index}
	}
	ok, err := b.writeShards(ctx, key, c, shards, moved, opts, len(moved))
	if err != nil {
		b.log.Debug("spare shard write failed", "key", key.String(), "err", err)
	}
	b.met.spareWrites.Add(float64(len(ok)))
	return append(written, ok...)
}

// writeShards writes shards[p.Index] to each placement entry in parallel
// (shards bound for one member in one request: sendShards) and returns the
// entries that succeeded: all of them, or those done within stragglerGrace
// of the enough'th success.
func (b *Backend) writeShards(ctx context.Context, key block.Key, c *erasure.Code, shards [][]byte, place []fsm.Shard, opts block.PutOptions, enough int) ([]fsm.Shard, error) {
	results := make(chan shardResult, len(place))
	b.sendShards(ctx, appendShardWrites(nil, 0, key, c, shards, place, opts), func(w *shardWrite, err error) {
		results <- shardResult{w.i, err}
	})
	return collectShards(results, place, enough)
}

// collectShards gathers the outcomes of a block's writes to place from
// results (one per entry, buffered so that late ones never block) and
// returns the entries that succeeded: all of them, or those done within
// stragglerGrace of the enough'th success; first is the first failure.
func collectShards(results <-chan shardResult, place []fsm.Shard, enough int) (ok []fsm.Shard, first error) {
	t := newShardTally(place, enough)
	var grace <-chan time.Time
	for !t.complete() {
		select {
		case r := <-results:
			if t.add(r) {
				grace = time.After(stragglerGrace)
			}
		case <-grace:
			return t.outcome()
		}
	}
	return t.outcome()
}

// shardTally is one block's shard outcomes as they arrive.
type shardTally struct {
	place          []fsm.Shard
	enough         int
	errs           []error
	done           []bool
	got, succeeded int
	// For collectBatch: when the block stops waiting (stragglerGrace
	// after its enough'th success), and whether it has.
	graceAt time.Time
	closed  bool
}

func newShardTally(place []fsm.Shard, enough int) *shardTally {
	return &shardTally{place: place, enough: enough, errs: make([]error, len(place)), done: make([]bool, len(place))}
}

// add records r and reports whether it is the enough'th success.
func (t *shardTally) add(r shardResult) bool {
	t.errs[r.i], t.done[r.i] = r.err, true
	t.got++
	if r.err != nil {
		return false
	}
	t.succeeded++
	return t.succeeded == t.enough
}

// complete reports whether every entry's outcome is in.
func (t *shardTally) complete() bool { return t.got == len(t.place) }

// outcome is the entries that succeeded and the first failure; an entry
// with no outcome yet failed (still writing after the grace). When every
// entry succeeded, ok is the placement itself, capped so that an append
// copies it.
func (t *shardTally) outcome() (ok []fsm.Shard, first error) {
	if t.succeeded == len(t.place) {
		return t.place[:len(t.place):len(t.place)], nil
	}
	for i := range t.errs {
		if !t.done[i] {
			t.errs[i] = fmt.Errorf("%w: still writing %v after the other shards were written", block.ErrUnavailable, stragglerGrace)
		}
	}
	for i, err := range t.errs {
		if err == nil {
			ok = append(ok, t.place[i])
		} else if first == nil {
			first = fmt.Errorf("shard %d on %s: %w", t.place[i].Index, t.place[i].NodeID, err)
		}
	}
	return ok, first
}

// batchShard is the outcome of one shard write of a batch: blk is the
// block's position in the batch.
type batchShard struct {
	blk int
	r   shardResult
}

// collectBatch is collectShards for the blocks of a batch at once, in the
// calling goroutine: it reads every block's outcomes from results (one per
// write, buffered so that late ones never block) into tallies[blk] until
// each block of idx is complete or grace (stragglerGrace) past its
// enough'th success. One timer serves all the blocks' graces.
func collectBatch(results <-chan batchShard, tallies []*shardTally, idx []int, grace time.Duration) {
	open := 0
	for _, i := range idx {
		if tallies[i].complete() { // nothing to wait for (no placement)
			tallies[i].closed = true
		} else {
			open++
		}
	}
	var (
		timer   *time.Timer
		expired <-chan time.Time
		waiting []int // blocks in their grace, by deadline (each is now+grace when set)
	)
	arm := func(now time.Time) {
		for len(waiting) > 0 && tallies[waiting[0]].closed {
			waiting = waiting[1:]
		}
		if len(waiting) == 0 {
			expired = nil
			return
		}
		d := tallies[waiting[0]].graceAt.Sub(now)
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		expired = timer.C
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for open > 0 {
		select {
		case s := <-results:
			t := tallies[s.blk]
			if t.closed {
				continue // a straggler after its block's grace
			}
			if t.add(s.r) && !t.complete() {
				now := time.Now()
				t.graceAt = now.Add(grace)
				waiting = append(waiting, s.blk)
				if expired == nil {
					arm(now)
				}
			}
			if t.complete() {
				t.closed = true
				open--
			}
		case now := <-expired:
			for len(waiting) > 0 {
				t := tallies[waiting[0]]
				if !t.closed && t.graceAt.After(now) {
					break
				}
				if !t.closed {
					t.closed = true
					open--
				}
				waiting = waiting[1:]
			}
			arm(now)
		}
	}
}

// writeShard stores one shard on a node. A conflict (the node holds other
// bytes under the key) fails the shard: it may be a concurrent put of the
// same key that has not committed yet, whose shard must not be touched.
func (b *Backend) writeShard(ctx context.Context, nodeID string, sk block.Key, data []byte, opts block.PutOptions) error {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.ShardTimeout)
	defer cancel()
	o := shardOpts(sk, data, opts)
	if nodeID == b.cfg.NodeID {
		return b.local.Put(ctx, sk, data, o.Sum, o)
	}
	m, ok := b.node.FSM().Member(nodeID)
	if !ok {
		return fmt.Errorf("%w: unknown member %q", block.ErrUnavailable, nodeID)
	}
	err := b.peers.PutShard(ctx, m, sk, data, o.Sum, o)
	if err != nil {
		// A member that restarted on another address registers it a
		// moment after it serves: when its record changed while this
		// write failed at the old address, write once more to the new
		// one rather than leave the put short of this shard.
		if cur, ok := b.node.FSM().Member(nodeID); ok && cur.DataAddr != m.DataAddr {
			b.log.Debug("shard write failed at a member's old address; writing to its new one", "node", nodeID, "old", m.DataAddr, "new", cur.DataAddr, "err", err)
			return b.peers.PutShard(ctx, cur, sk, data, o.Sum, o)
		}
	}
	return err
}
