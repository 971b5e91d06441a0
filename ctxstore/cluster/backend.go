package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/erasure"
	"github.com/ctxtier/ctxtier/ctxstore/placement"
	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// TierPeer is the tier reported for a block served by the cluster rather
// than from this node's own memory.
const TierPeer block.Tier = "peer"

// Backend is the clustered tier: ctxstore.New(cfg, node.Catalog(), backend,
// log) is the cluster's Store.
type Backend struct {
	cfg   Config
	node  *raft.Node
	local ctxstore.Tier
	peers Peers
	fwd   Forwarder
	log   *slog.Logger
	met   *metrics

	drops chan block.Key
	// gap holds the blocks whose local shards were dropped and whose index
	// correction has not committed yet (drop.go).
	gap  dropGap
	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once

	repairMu sync.Mutex
	repair   RepairStatus
	// wake makes the repair loop scan now (a member state changed).
	wake chan struct{}
	// ownWrites is the highest log index of a write this node forwarded to
	// the leader (ownwrites.go).
	ownWrites atomic.Uint64

	drainMu sync.Mutex
	// drains is the leader's progress of each draining member.
	drains map[string]*drainProgress
	// unreachable holds the draining members that do not answer.
	unreachable map[string]bool
	heldCache   heldCache
	// readIndex shares a follower's read-index requests to the leader
	// (read.go).
	readIndex *raft.Coalescer

	// restore is this start's restore progress (restore.go); restored is
	// set once it is done.
	restoreMu sync.Mutex
	restore   RestoreStatus
	restored  atomic.Bool
	// sessions ends agent sessions on the other members (session.go).
	sessions atomic.Pointer[sessionPeersRef]
	// restoreApplied is the applied index the last restore pass covered
	// (only the restore goroutine touches it); started is when New ran.
	restoreApplied uint64
	started        time.Time

	// rebal is the leader's rebalancing account (rebalance.go), rebalLimit
	// its byte budget.
	rebalMu    sync.Mutex
	rebal      rebalanceState
	rebalLimit *byteLimiter
}

var _ ctxstore.Tier = (*Backend)(nil)

// New builds the backend over a running Raft node, this node's own tier
// stack (local), the shard transport to the other members, and the
// forwarder to the leader (nil on a node that is always leader). It starts
// the failure detector, repair and drop-batching loops; Close stops them.
func New(cfg Config, node *raft.Node, local ctxstore.Tier, peers Peers, fwd Forwarder, log *slog.Logger, reg prometheus.Registerer) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if node == nil || local == nil || peers == nil {
		return nil, fmt.Errorf("%w: cluster: node, local tier and peers are required", block.ErrInvalidArgument)
	}
	if log == nil {
		log = slog.Default()
	}
	met, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	b := &Backend{
		cfg: cfg, node: node, local: local, peers: peers, fwd: fwd, log: log.With("node_id", cfg.NodeID), met: met,
		drops: make(chan block.Key, 4096), stop: make(chan struct{}), wake: make(chan struct{}, 1),
		drains: map[string]*drainProgress{}, unreachable: map[string]bool{}, started: time.Now(),
		rebalLimit: newByteLimiter(cfg.RebalanceBytesPerSec),
	}
	b.readIndex = raft.NewCoalescer(b.fetchReadIndex)
	if b.cfg.Incarnation == 0 {
		b.cfg.Incarnation = uint64(time.Now().UnixNano())
	}
	// Before the peer listener serves: peers check it on every connection.
	ictx, cancel := context.WithTimeout(context.Background(), cfg.ShardTimeout)
	if err := b.putIdentity(ictx); err != nil {
		b.log.Error("no identity block: other members cannot tell this node from a stale address", "err", err)
	}
	cancel()
	b.met.restoring.Set(1)
	b.wg.Add(1)
	go func() {
		b.restoreLoop()
		if b.Restored() {
			b.met.restoring.Set(0)
		}
	}()
	if cfg.Self.RaftAddr != "" {
		b.wg.Add(1)
		go b.registerLoop()
	}
	b.wg.Add(3)
	go b.detectLoop()
	go b.repairLoop()
	go b.dropLoop()
	return b, nil
}

// Close stops the background loops (not the node nor the tiers).
func (b *Backend) Close() error {
	b.once.Do(func() {
		close(b.stop)
		b.wg.Wait()
		b.met.unregister()
	})
	return nil
}

// code returns the erasure code of a namespace.
func (b *Backend) code(ns string) (*erasure.Code, error) {
	n, err := b.node.FSM().Namespace(ns)
	if err != nil {
		return nil, err
	}
	return erasure.New(n.DataShards, n.ParityShards)
}

// shardKey names shard i of key on a node: a replica (k=1) is the block
// itself, an erasure shard carries its index.
func shardKey(key block.Key, c *erasure.Code, i int) block.Key {
	if c.K == 1 {
		return key.Block()
	}
	return key.WithShard(i)
}

// candidates are the members that take new shards: alive ones, minus exclude.
func (b *Backend) candidates(exclude map[string]bool) []placement.Node {
	var out []placement.Node
	b.node.FSM().EachMember(func(m fsm.Member) bool {
		if m.State == fsm.MemberAlive && !exclude[m.ID] {
			out = append(out, placement.Node{ID: m.ID, Zone: m.Zone, Weight: float64(m.Capacity) / float64(1<<30)})
		}
		return true
	})
	return out
}

func sameBlock(key block.Key, e fsm.Entry, size int64, sum uint32) error {
	if e.Sum == sum && e.Size == size {
		return nil
	}
	return fmt.Errorf("%w: %s: stored block has %d bytes, crc32c %08x; put has %d bytes, crc32c %08x", block.ErrConflict, key, e.Size, e.Sum, size, sum)
}

// hedgeDelay is how long a read waits for one remote replica before it
// also asks the next one.
const hedgeDelay = 250 * time.Millisecond

// Get reads the block's data shards in parallel (a local replica first),
// reconstructing from parity only when a shard is missing or bad; the
// result is checked against the block's CRC, so wrong bytes are never served.
func (b *Backend) Get(ctx context.Context, key block.Key) (*block.Ref, error) {
	key = key.Block()
	e, ok := b.lookup(ctx, key)
	if !ok {
		return nil, fmt.Errorf("%w: %s", block.ErrNotFound, key)
	}
	c, err := b.code(key.Namespace)
	if err != nil {
		return nil, err
	}
	return b.readEntry(ctx, key, e, c)
}

// readEntry reads key from the placement of e, the entry Get looked up,
// and from a newer entry when that read failed because the index changed
// since: the shards moved (rebalance.go, repair, drain: the old holder
// deleted its copy once the new placement committed), or the key was
// deleted, or deleted and put again with other bytes (object slots are
// reused: a holder then has the new version's bytes, which do not match
// e). A deleted key is NotFound; otherwise the newer entry is read, after
// asking the leader first when this node's index has not seen one yet.
func (b *Backend) readEntry(ctx context.Context, key block.Key, e fsm.Entry, c *erasure.Code) (*block.Ref, error) {
	for try := 0; ; try++ {
		ref, err := b.getEntry(ctx, key, e, c)
		if err == nil || try == 2 || ctx.Err() != nil {
			return ref, err
		}
		next, ok := b.node.FSM().Lookup(key)
		if ok && next.Generation == e.Generation && slices.Equal(next.Placement, e.Placement) && b.syncBriefly(ctx) == nil {
			next, ok = b.node.FSM().Lookup(key)
		}
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: %s: deleted while it was read (%v)", block.ErrNotFound, key, err)
		case next.Generation == e.Generation && slices.Equal(next.Placement, e.Placement):
			return nil, err
		}
		b.met.relookups.Inc()
		e = next
	}
}

// relookupSync bounds the leader round trip of a read that failed on the
// placement it looked up: a read that fails for want of holders must not
// wait a whole ProposeTimeout more for a leader that may be gone too.
const relookupSync = time.Second

func (b *Backend) syncBriefly(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, relookupSync)
	defer cancel()
	return b.SyncRead(ctx)
}

// getEntry reads the block from the placement of e.
func (b *Backend) getEntry(ctx context.Context, key block.Key, e fsm.Entry, c *erasure.Code) (*block.Ref, error) {
	if c.K == 1 {
		return b.getReplica(ctx, key, e)
	}
	data, err := b.getCoded(ctx, key, e, c)
	if err != nil {
		return nil, err
	}
	b.met.readDecoded.Inc()
	b.met.readDecodedBytes.Add(float64(len(data)))
	return block.NewRef(data, e.Sum, TierPeer, nil), nil
}

// readOrder sorts placement entries: this node first, then alive, then
// restoring, suspect and draining, then the rest.
func (b *Backend) readOrder(place []fsm.Shard) []fsm.Shard {
	rank := func(s fsm.Shard) int {
		if s.NodeID == b.cfg.NodeID {
			return 0
		}
		m, ok := b.node.FSM().Member(s.NodeID)
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

func (b *Backend) getReplica(ctx context.Context, key block.Key, e fsm.Entry) (*block.Ref, error) {
	var last error // built lazily: the hit path allocates nothing for it
	allGone := len(e.Placement) > 0
	defer func() {
		if allGone {
			for _, s := range e.Placement {
				if s.NodeID == b.cfg.NodeID {
					b.Dropped(key) // correct the index now
				}
			}
		}
	}()
	var remotes []fsm.Shard
	for _, s := range b.readOrder(e.Placement) {
		if s.NodeID == b.cfg.NodeID {
			ref, err := b.local.Get(ctx, key)
			if err == nil {
				// The tier verified the bytes against the fingerprint it took
				// from bytes that matched this CRC at put time (or, under
				// block.WithReaderVerify, the reader checks them against
				// this CRC); comparing the recorded sums avoids a second
				// pass over the block.
				if int64(len(ref.Data)) == e.Size && ref.Sum == e.Sum {
					allGone = false
					b.met.readLocal.Inc()
					b.met.readLocalBytes.Add(float64(len(ref.Data)))
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
			data, sum, err := b.fetchSum(fctx, s.NodeID, key)
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
				b.met.readRemote.Inc()
				b.met.readRemoteBytes.Add(float64(len(a.data)))
				return block.NewRef(a.data, e.Sum, TierPeer, nil), nil
			}
			b.met.shardErrors.Inc()
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
// whatever the reader declared (block.WithReaderVerify).
func (b *Backend) fetch(ctx context.Context, nodeID string, sk block.Key) ([]byte, error) {
	d, _, err := b.fetchSum(ctx, nodeID, sk)
	return d, err
}

// fetchSum is fetch that also returns the bytes' CRC-32C, the one they were
// verified against on the way (by this node's tier for a local read, by
// the peer client as they arrived for a remote one): a caller comparing it
// with the index's sum checks the bytes without summing them again.
func (b *Backend) fetchSum(ctx context.Context, nodeID string, sk block.Key) ([]byte, uint32, error) {
	ctx, cancel := context.WithTimeout(block.WithoutReaderVerify(ctx), b.cfg.ShardTimeout)
	defer cancel()
	if nodeID == b.cfg.NodeID {
		ref, err := b.local.Get(ctx, sk)
		if err != nil {
			return nil, 0, err
		}
		defer ref.Release()
		return slices.Clone(ref.Data), ref.Sum, nil
	}
	m, ok := b.node.FSM().Member(nodeID)
	if !ok {
		return nil, 0, fmt.Errorf("%w: unknown member %q", block.ErrUnavailable, nodeID)
	}
	return b.peers.GetShard(ctx, m, sk)
}

// fetchShards reads the given placement entries in parallel into shards.
func (b *Backend) fetchShards(ctx context.Context, key block.Key, c *erasure.Code, want []fsm.Shard, shards [][]byte, size int) {
	var wg sync.WaitGroup
	for _, s := range want {
		if int(s.Index) >= len(shards) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := b.fetch(ctx, s.NodeID, shardKey(key, c, int(s.Index)))
			if err != nil || len(d) != c.ShardSize(size) {
				b.met.shardErrors.Inc()
				return
			}
			shards[s.Index] = d
		}()
	}
	wg.Wait()
}

// fetchFirstK reads the data shards and returns once k shards are in hand
// (or every read has ended). Parity shards are asked for too as soon as a
// data shard fails, or when the data shards have not all answered within
// hedgeDelay: a slow or partitioned holder (whose connection has not failed
// yet) costs a quarter second, not the shard timeout. It reports whether a
// parity read was started. Reads still running when it returns are
// cancelled; only this goroutine writes shards.
func (b *Backend) fetchFirstK(ctx context.Context, key block.Key, c *erasure.Code, data, parity []fsm.Shard, shards [][]byte, size int) bool {
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		idx  int
		data []byte
	}
	answers := make(chan answer, len(data)+len(parity))
	pending := 0
	launch := func(list []fsm.Shard) {
		for _, s := range list {
			if int(s.Index) >= len(shards) {
				continue
			}
			pending++
			go func() {
				d, err := b.fetch(fctx, s.NodeID, shardKey(key, c, int(s.Index)))
				if err != nil || len(d) != c.ShardSize(size) {
					if fctx.Err() == nil {
						b.met.shardErrors.Inc()
					}
					d = nil
				}
				answers <- answer{int(s.Index), d}
			}()
		}
	}
	launch(data)
	hedged := false
	hedge := func() {
		if !hedged {
			hedged = true
			launch(parity)
		}
	}
	timer := time.NewTimer(hedgeDelay)
	defer timer.Stop()
	have := 0
	for pending > 0 && have < c.K {
		select {
		case a := <-answers:
			pending--
			if a.data == nil {
				hedge()
				continue
			}
			if shards[a.idx] == nil {
				shards[a.idx] = a.data
				have++
			}
		case <-timer.C:
			hedge()
		case <-ctx.Done():
			return hedged
		}
	}
	return hedged
}

func (b *Backend) getCoded(ctx context.Context, key block.Key, e fsm.Entry, c *erasure.Code) ([]byte, error) {
	size := int(e.Size)
	shards := make([][]byte, c.N())
	var data, parity []fsm.Shard
	for _, s := range b.readOrder(e.Placement) {
		if int(s.Index) < c.K {
			if !slices.ContainsFunc(data, func(x fsm.Shard) bool { return x.Index == s.Index }) {
				data = append(data, s)
			}
		} else if int(s.Index) < c.N() {
			parity = append(parity, s)
		}
	}
	usedParity := b.fetchFirstK(ctx, key, c, data, parity, shards, size)
	if out, ok := b.tryDecode(c, shards, size, e.Sum); ok {
		if usedParity {
			b.met.reconstructions.Inc()
		}
		return out, nil
	}
	// A shard is missing or wrong: bring in the rest and search.
	b.met.reconstructions.Inc()
	var rest []fsm.Shard
	for _, s := range append(data, parity...) {
		if int(s.Index) < len(shards) && shards[s.Index] == nil {
			rest = append(rest, s)
		}
	}
	b.fetchShards(ctx, key, c, rest, shards, size)
	have := 0
	for _, s := range shards {
		if s != nil {
			have++
		}
	}
	if have < c.K {
		return nil, fmt.Errorf("%w: %s: %d of %d shards readable, need %d", block.ErrUnavailable, key, have, c.N(), c.K)
	}
	if out, ok := b.tryDecode(c, shards, size, e.Sum); ok {
		return out, nil
	}
	// Some shard is bad: leave out subsets of the present shards (at most m
	// of them) until the block's CRC matches.
	present := []int{}
	for i, s := range shards {
		if s != nil {
			present = append(present, i)
		}
	}
	tries := 0
	var found []byte
	var rec func(start, left int, drop []int) bool
	rec = func(start, left int, drop []int) bool {
		if len(drop) > 0 {
			if tries++; tries > 256 {
				return true
			}
			try := slices.Clone(shards)
			for _, d := range drop {
				try[d] = nil
			}
			if out, ok := b.tryDecode(c, try, size, e.Sum); ok {
				found = out
				return true
			}
		}
		if left == 0 {
			return false
		}
		for i := start; i < len(present); i++ {
			if rec(i+1, left-1, append(drop, present[i])) {
				return true
			}
		}
		return false
	}
	rec(0, min(c.M, have-c.K), nil)
	if found != nil {
		return found, nil
	}
	return nil, fmt.Errorf("%w: %s: no combination of shards matches the block's crc32c %08x", block.ErrChecksum, key, e.Sum)
}

// tryDecode decodes a copy of shards (Decode fills missing entries) and
// checks the block CRC.
func (b *Backend) tryDecode(c *erasure.Code, shards [][]byte, size int, sum uint32) ([]byte, bool) {
	try := slices.Clone(shards)
	out, err := c.Decode(try, size)
	if err != nil || block.Checksum(out) != sum {
		return nil, false
	}
	return out, true
}

// Stat returns the block's metadata from the local index.
func (b *Backend) Stat(ctx context.Context, key block.Key) (block.Info, error) {
	key = key.Block()
	e, ok := b.lookup(ctx, key)
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
	_, ok := b.lookup(context.Background(), key.Block())
	return ok
}

// Delete removes the index entry, then (best effort) its shards.
func (b *Backend) Delete(ctx context.Context, key block.Key) error {
	return b.deleteMatching(ctx, key, nil)
}

// deleteMatching removes key's index entry while match accepts it (nil:
// whatever it holds), then (best effort) its shards. The delete is
// committed for the generation that was looked up; if the entry changed
// meanwhile the FSM answers Conflict and the entry is looked up again.
func (b *Backend) deleteMatching(ctx context.Context, key block.Key, match func(fsm.Entry) bool) error {
	key = key.Block()
	accept := func(e fsm.Entry, ok bool) bool { return ok && (match == nil || match(e)) }
	synced := false
	for range 3 {
		e, found := b.lookup(ctx, key)
		ok := accept(e, found)
		if !ok && !synced {
			// The block may have been put, or replaced, through another
			// node a moment ago: a delete is rare enough to ask the leader
			// before it answers NotFound (one read-index round trip).
			synced = true
			if b.SyncRead(ctx) == nil {
				e, found = b.node.FSM().Lookup(key)
				ok = accept(e, found)
			}
		}
		if !ok {
			if match != nil && found {
				return fmt.Errorf("%w: %s does not hold that version", block.ErrNotFound, key)
			}
			return fmt.Errorf("%w: %s", block.ErrNotFound, key)
		}
		res, err := b.propose(ctx, fsm.DeleteOp(key, e.Generation))
		if err != nil {
			return err
		}
		switch res[0].Status {
		case fsm.StatusDeleted:
			if c, err := b.code(key.Namespace); err == nil {
				b.cleanup(key, c, e.Placement, nil, b.entryVersion(ctx, key, e, c))
			}
			return nil
		case fsm.StatusNotFound:
			return fmt.Errorf("%w: %s", block.ErrNotFound, key)
		case fsm.StatusConflict:
			continue // re-put meanwhile: look again, and delete what matches
		default:
			return fmt.Errorf("%w: %s: index says %s", res[0].Err(), key, res[0].Status)
		}
	}
	return fmt.Errorf("%w: %s: the entry kept changing", block.ErrUnavailable, key)
}

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
