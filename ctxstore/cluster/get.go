package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/erasure"
	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// blockReader reads blocks from their holders: the local replica first,
// remote replicas hedged (another asked after hedgeDelay), erasure shards
// fetched k at a time and decoded; every answer is checked against the
// index entry's size and CRC. Repair, restore and rebalance read shards
// through it too (fetch, readOrder, getCoded). It holds no state of its
// own: the index, the local tier and the peers are the Backend's.
type blockReader struct {
	cfg   Config
	node  *raft.Node
	local ctxstore.Tier
	peers Peers
	met   *metrics
	// syncRead brings this node's index up to the leader's
	// (Backend.SyncRead); dropped reports a local replica gone
	// (Backend.Dropped).
	syncRead func(context.Context) error
	dropped  func(block.Key)
}

// hedgeDelay is how long a read waits for one remote replica before it
// also asks the next one.
const hedgeDelay = 250 * time.Millisecond

// Get reads the block's data shards in parallel (a local replica first),
// reconstructing from parity only when a shard is missing or bad; the
// result is checked against the block's CRC, so wrong bytes are never served.
// The erasure code comes from opts.Namespace when the caller resolved it
// (the Store does), from the FSM otherwise; opts.ReaderVerifies applies to
// a whole local replica only (every other read consumes the bytes here),
// and opts.Retain goes with every shard read, local or remote.
func (b *Backend) Get(ctx context.Context, key block.Key, opts block.GetOptions) (*block.Ref, error) {
	key = key.Block()
	e, ok := b.own.lookup(ctx, key)
	if !ok {
		return nil, fmt.Errorf("%w: %s", block.ErrNotFound, key)
	}
	c, err := b.codeOf(key.Namespace, &opts)
	if err != nil {
		return nil, err
	}
	return b.reads.readEntry(ctx, key, e, c, opts)
}

// readEntry reads key from the placement of e, the entry Get looked up,
// and from a newer entry when that read failed because the index changed
// since: the shards moved (rebalance.go, repair, drain: the old holder
// deleted its copy once the new placement committed), or the key was
// deleted, or deleted and put again with other bytes (object slots are
// reused: a holder then has the new version's bytes, which do not match
// e). A deleted key is NotFound; otherwise the newer entry is read, after
// asking the leader first when this node's index has not seen one yet.
func (rd *blockReader) readEntry(ctx context.Context, key block.Key, e fsm.Entry, c *erasure.Code, opts block.GetOptions) (*block.Ref, error) {
	for try := 0; ; try++ {
		ref, err := rd.getEntry(ctx, key, e, c, opts)
		if err == nil || try == 2 || ctx.Err() != nil {
			return ref, err
		}
		next, ok := rd.node.FSM().Lookup(key)
		if ok && next.Generation == e.Generation && slices.Equal(next.Placement, e.Placement) && rd.syncBriefly(ctx) == nil {
			next, ok = rd.node.FSM().Lookup(key)
		}
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: %s: deleted while it was read (%v)", block.ErrNotFound, key, err)
		case next.Generation == e.Generation && slices.Equal(next.Placement, e.Placement):
			return nil, err
		}
		rd.met.relookups.Inc()
		e = next
	}
}

// relookupSync bounds the leader round trip of a read that failed on the
// placement it looked up: a read that fails for want of holders must not
// wait a whole ProposeTimeout more for a leader that may be gone too.
const relookupSync = time.Second

func (rd *blockReader) syncBriefly(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, relookupSync)
	defer cancel()
	return rd.syncRead(ctx)
}

// getEntry reads the block from the placement of e.
func (rd *blockReader) getEntry(ctx context.Context, key block.Key, e fsm.Entry, c *erasure.Code, opts block.GetOptions) (*block.Ref, error) {
	if c.K == 1 {
		return rd.getReplica(ctx, key, e, opts)
	}
	data, err := rd.getCoded(ctx, key, e, c, opts.Retain)
	if err != nil {
		return nil, err
	}
	rd.met.readDecoded.Inc()
	rd.met.readDecodedBytes.Add(float64(len(data)))
	return block.NewRef(data, e.Sum, TierPeer, nil), nil
}

// readOrder sorts placement entries: this node first, then alive, then
// restoring, suspect and draining, then the rest.
func (rd *blockReader) readOrder(place []fsm.Shard) []fsm.Shard {
	rank := func(s fsm.Shard) int {
		if s.NodeID == rd.cfg.NodeID {
			return 0
		}
		m, ok := rd.node.FSM().Member(s.NodeID)
		switch {
		case !ok:
			return 4
		case m.State == fsm.MemberAlive && !m.Restoring:
			return 1
		case m.State == fsm.MemberAlive:
			return 2 // restarted, and may lack the shard until restored
		case m.State == fsm.MemberSuspect || m.State == fsm.MemberDraining:
			return 2
		}
		return 3
	}
	if len(place) < 2 {
		return place // one copy: nothing to order (and nothing to allocate on every read)
	}
	out := slices.Clone(place)
	sort.SliceStable(out, func(i, j int) bool { return rank(out[i]) < rank(out[j]) })
	return out
}

// getReplica reads a whole replica: this node's own first, with opts as
// they are (the bytes go to the reader as read), then remote ones, whose
// bytes are checked here.
func (rd *blockReader) getReplica(ctx context.Context, key block.Key, e fsm.Entry, opts block.GetOptions) (*block.Ref, error) {
	var last error // built lazily: the hit path allocates nothing for it
	allGone := len(e.Placement) > 0
	defer func() {
		if allGone {
			for _, s := range e.Placement {
				if s.NodeID == rd.cfg.NodeID {
					rd.dropped(key) // correct the index now
				}
			}
		}
	}()
	var remotes []fsm.Shard
	for _, s := range rd.readOrder(e.Placement) {
		if s.NodeID == rd.cfg.NodeID {
			ref, err := rd.local.Get(ctx, key, opts)
			if err == nil {
				// The tier verified the bytes against the fingerprint it took
				// from bytes that matched this CRC at put time (or, with
				// opts.ReaderVerifies, the reader checks them against
				// this CRC); comparing the recorded sums avoids a second
				// pass over the block.
				if int64(len(ref.Data)) == e.Size && ref.Sum == e.Sum {
					allGone = false
					rd.met.readLocal.Inc()
					rd.met.readLocalBytes.Add(float64(len(ref.Data)))
					return ref, nil
				}
				ref.Release()
				err = fmt.Errorf("%w: local replica does not match the index", block.ErrChecksum)
			}
			last = err
			allGone = allGone && errors.Is(err, block.ErrNotFound)
			continue
		}
		remotes = append(remotes, s)
	}
	// Remote replicas are hedged: if one has not answered within hedgeDelay
	// (a slow or partitioned peer whose connection has not failed yet), the
	// next is asked too, and the first good answer wins.
	type answer struct {
		data []byte
		err  error
	}
	answers := make(chan answer, len(remotes))
	retain := opts.Retain // the goroutines take the window, not opts (which would then live on the heap)
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	launched, pending := 0, 0
	launch := func() {
		s := remotes[launched]
		launched++
		pending++
		go func() {
			// The bytes were checked against sum as they arrived; sum
			// equal to the index's is the same check as summing them here.
			data, sum, err := rd.fetchSum(fctx, s.NodeID, key, retain)
			if err == nil && (int64(len(data)) != e.Size || sum != e.Sum) {
				err = fmt.Errorf("%w: replica on %s does not match the index", block.ErrChecksum, s.NodeID)
			}
			answers <- answer{data, err}
		}()
	}
	hedge := time.NewTimer(hedgeDelay)
	defer hedge.Stop()
	if len(remotes) > 0 {
		launch()
	}
	for pending > 0 {
		select {
		case a := <-answers:
			pending--
			if a.err == nil {
				allGone = false
				rd.met.readRemote.Inc()
				rd.met.readRemoteBytes.Add(float64(len(a.data)))
				return block.NewRef(a.data, e.Sum, TierPeer, nil), nil
			}
			rd.met.shardErrors.Inc()
			last = a.err
			allGone = allGone && errors.Is(a.err, block.ErrNotFound)
			if launched < len(remotes) {
				launch()
				hedge.Reset(hedgeDelay)
			}
		case <-hedge.C:
			if launched < len(remotes) {
				launch()
				hedge.Reset(hedgeDelay)
			}
		case <-ctx.Done():
			allGone = false
			return nil, fmt.Errorf("%w: %s: %v", block.ErrUnavailable, key, ctx.Err())
		}
	}
	if allGone {
		// Every holder answered that it no longer has the block (capacity
		// drops whose index correction is still on its way): it is gone.
		return nil, fmt.Errorf("%w: %s: every replica was dropped", block.ErrNotFound, key)
	}
	if last == nil {
		return nil, fmt.Errorf("%w: %s: no replica placed", block.ErrUnavailable, key)
	}
	if errors.Is(last, block.ErrNotFound) {
		last = fmt.Errorf("%w: %v", block.ErrUnavailable, last)
	}
	return nil, fmt.Errorf("%s: every replica failed: %w", key, last)
}

// fetch reads one shard (a copy) from a node. The copy is used here
// (decoded, or handed on as a replica's bytes), so the tier must verify it
// whatever the reader declared: it is read with
// block.GetOptions.ReaderVerifies false. retain is the read's retain window
// (0: none; repair, restore and rebalance reads carry none).
func (rd *blockReader) fetch(ctx context.Context, nodeID string, sk block.Key, retain time.Duration) ([]byte, error) {
	d, _, err := rd.fetchSum(ctx, nodeID, sk, retain)
	return d, err
}

// fetchSum is fetch that also returns the bytes' CRC-32C, the one they were
// verified against on the way (by this node's tier for a local read, by
// the peer client as they arrived for a remote one): a caller comparing it
// with the index's sum checks the bytes without summing them again.
func (rd *blockReader) fetchSum(ctx context.Context, nodeID string, sk block.Key, retain time.Duration) ([]byte, uint32, error) {
	ctx, cancel := context.WithTimeout(ctx, rd.cfg.ShardTimeout)
	defer cancel()
	if nodeID == rd.cfg.NodeID {
		ref, err := rd.local.Get(ctx, sk, block.GetOptions{ReaderVerifies: false, Retain: retain})
		if err != nil {
			return nil, 0, err
		}
		defer ref.Release()
		return slices.Clone(ref.Data), ref.Sum, nil
	}
	m, ok := rd.node.FSM().Member(nodeID)
	if !ok {
		return nil, 0, fmt.Errorf("%w: unknown member %q", block.ErrUnavailable, nodeID)
	}
	return rd.peers.GetShard(ctx, m, sk, retain)
}
