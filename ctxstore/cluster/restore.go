package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/erasure"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// A start is an event the cluster sees. Each time a Backend starts it
// records a new incarnation of its member, flagged restoring
// (fsm.CmdIncarnation). It then brings its index up to the leader's, and
// checks every shard the index places on this node against the local tier
// stack: a node that restarted with an empty DRAM tier, or with its NVMe
// directory lost, holds less than the index says. Each missing shard is
// rebuilt from the other holders (a replica copied, an erasure shard
// reconstructed from k others and verified against the block's CRC) and
// written locally. Only then is the restoring flag cleared: until then the
// node is not ready (/readyz) and the leader counts its shards in
// ctxtier_repair_shards_pending, so a rolling restart that waits for
// either never takes down the last holder of a block.
//
// A shard that no other holder can supply is given up (the node leaves the
// block's placement, as a capacity drop does) only when every other holder
// answered that it does not have it either; a holder that does not answer
// keeps the restore waiting, and a later pass tries again. A shard this
// node's own tier evicted since the start (a DRAM-only node filling up, the
// restore's own writes included) is not rebuilt: its capacity drop is
// queued and will take the node out of the placement (errDropQueued).
//
// A restore writes a shard only while this node's index still places it
// here, but that index may lag the leader's: a move off this node (repair,
// drain, rebalance) may have committed, and deleted this node's copy (the
// very one the pass found missing), before this node applied it. The
// restore would then write the copy back where no one names it or ever
// deletes it. So a pass that wrote shards catches up with the leader
// (SyncRead) and deletes those the index no longer places here
// (dropMovedOff). A move that commits after that catch-up deletes the copy
// itself: the copy was written before its commit.

// RestoreStatus is this node's restore progress, for /readyz and
// /v1/cluster/status.
type RestoreStatus struct {
	// Incarnation of this start.
	Incarnation uint64 `json:"incarnation"`
	// Done: every shard the index placed on this node at the last pass is
	// held locally, restored, or given up.
	Done bool `json:"done"`
	// Checked is the number of shards the index placed on this node at the
	// last pass; Missing those not held locally when the pass began.
	Checked int `json:"checked"`
	Missing int `json:"missing"`
	// Restored shards and their bytes, since start.
	Restored      uint64 `json:"restored"`
	RestoredBytes uint64 `json:"restored_bytes"`
	// Lost: shards no holder had any more; this node left their placement.
	Lost uint64 `json:"lost"`
	// Skipped: missing shards not rebuilt because this node's own tier gave
	// them up (a capacity drop queued or committing, which takes this node
	// out of their placement), since start.
	Skipped uint64 `json:"skipped"`
	// Waiting: shards of the last pass that could not be rebuilt yet (a
	// holder that does not answer); the next pass tries again.
	Waiting int `json:"waiting"`
	// Passes run so far; Scans, those of them that scanned the whole index
	// (the first, and any whose record of new entries fell short); the
	// others checked only the entries created since the previous pass.
	Passes int `json:"passes"`
	Scans  int `json:"scans"`
	// Err is the last pass's first failure.
	Err string `json:"error,omitempty"`
}

// restoreBook is this start's restore progress: the status /readyz and
// /v1/cluster/status report (under its own lock), whether the restore has
// finished, and the applied index the last pass covered (touched by the
// restore goroutine only).
type restoreBook struct {
	mu      sync.Mutex
	st      RestoreStatus
	done    atomic.Bool
	applied uint64
}

// status returns a copy of the progress.
func (r *restoreBook) status() RestoreStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st
}

// noteErr records a pass's failure.
func (r *restoreBook) noteErr(err error) {
	r.mu.Lock()
	r.st.Err = err.Error()
	r.mu.Unlock()
}

// RestoreStatus returns this node's restore progress.
func (b *Backend) RestoreStatus() RestoreStatus { return b.restore.status() }

// Restored reports whether this start's restore has finished.
func (b *Backend) Restored() bool { return b.restore.done.Load() }

// restoreParallel bounds the shards rebuilt at once.
const restoreParallel = 4

// restoreTrackedPuts bounds the new shards on this node the FSM records for
// the restore passes (fsm.TrackPuts): about 5 MiB while a node is within
// its check window after a start. More than this between two passes (a
// second apart) make the next pass scan the whole index instead.
const restoreTrackedPuts = 1 << 17

func (b *Backend) restoreLoop() {
	defer b.wg.Done()
	inc := b.cfg.Incarnation
	// Record the entries created from now on, so that a pass after the
	// first checks those instead of scanning the whole index (restorePass).
	f := b.node.FSM()
	f.TrackPuts(b.cfg.NodeID, restoreTrackedPuts)
	defer f.TrackPuts("", 0)
	b.restore.mu.Lock()
	b.restore.st.Incarnation = inc
	b.restore.mu.Unlock()
	backoff := 50 * time.Millisecond
	wait := func() bool {
		select {
		case <-b.stop:
			return false
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, time.Second)
		return true
	}
	// 1. The member record must be committed (by the join, or by
	// registerLoop) before an incarnation can be recorded for it, and with
	// this start's addresses: until then shard writes meant for this node
	// go to its previous start's address and fail, so puts commit without
	// its shard. A node reported ready (restored) while that lasts would let
	// an operator restart the next holder of such a block.
	for !b.SelfRegistered() {
		select {
		case <-b.stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	// 2. Say that this start is restoring. An older leader that does not know
	// the command refuses it: restore anyway, unrecorded.
	recorded := b.recordIncarnation(inc, true)
	// 3. Restore passes until one leaves nothing waiting.
	backoff = 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), b.cfg.ProposeTimeout)
		err := b.SyncRead(ctx)
		cancel()
		if err == nil {
			if b.restorePass() {
				break
			}
		} else {
			b.restore.noteErr(fmt.Errorf("syncing the index: %w", err))
		}
		if !wait() {
			return
		}
	}
	b.restore.done.Store(true)
	if recorded {
		b.recordIncarnation(inc, false)
	}
	st := b.RestoreStatus()
	b.log.Info("restore done", "incarnation", inc, "checked", st.Checked, "restored", st.Restored, "lost", st.Lost)
	// A put that wrote its shard to the previous incarnation just before it
	// died may commit only now. Such puts end (commit or fail) within a
	// shard write and a proposal of their start, so new entries are checked
	// for that long after the start.
	until := b.started.Add(b.cfg.ShardTimeout + b.cfg.ProposeTimeout)
	for time.Now().Before(until) {
		select {
		case <-b.stop:
			return
		case <-time.After(time.Second):
		}
		b.restorePass()
	}
}

// recordIncarnation commits this node's incarnation and restoring flag,
// retrying until it succeeds, the backend closes, or the leader refuses it
// (an older version); it reports whether it was recorded.
func (b *Backend) recordIncarnation(inc uint64, restoring bool) bool {
	backoff := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), b.cfg.ProposeTimeout)
		err := b.setIncarnation(ctx, inc, restoring)
		cancel()
		if err == nil {
			return true
		}
		if errors.Is(err, block.ErrInvalidArgument) {
			b.log.Warn("the leader does not record incarnations (an older version?); restoring unrecorded", "err", err)
			return false
		}
		b.log.Debug("recording this node's incarnation", "restoring", restoring, "err", err)
		select {
		case <-b.stop:
			return false
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, time.Second)
	}
}

func (b *Backend) setIncarnation(ctx context.Context, inc uint64, restoring bool) error {
	if b.node.IsLeader() {
		return b.node.SetIncarnation(ctx, b.cfg.NodeID, inc, restoring)
	}
	leader, ok := b.node.LeaderMember()
	if !ok || leader.ID == b.cfg.NodeID || b.fwd == nil {
		return fmt.Errorf("%w: no leader to record the incarnation with", block.ErrUnavailable)
	}
	out, err := b.fwd.Forward(ctx, leader, fsm.EncodeIncarnation(fsm.IncarnationCommand{ID: b.cfg.NodeID, Incarnation: inc, Restoring: restoring}))
	if err != nil {
		return err
	}
	_, err = DecodeResults(out, 0)
	return err
}

// indexLoader is a local tier stack that may still be loading a tier's
// index (tiers.Manager: the S3 tier rebuilding from its bucket).
type indexLoader interface{ IndexLoaded() bool }

// restoreTask is one shard the index places on this node.
type restoreTask struct {
	key   block.Key
	entry fsm.Entry
	code  *erasure.Code
	index int
}

// restorePass checks every shard the index places on this node and
// rebuilds the missing ones; it reports whether nothing is left waiting.
func (b *Backend) restorePass() bool {
	f := b.node.FSM()
	if m, ok := f.Member(b.cfg.NodeID); ok && m.State == fsm.MemberDraining {
		// Its shards are being moved off it: repair reads them from the
		// other holders where this node lacks them.
		b.restore.mu.Lock()
		b.restore.st.Passes++
		b.restore.st.Done, b.restore.st.Err = true, ""
		b.restore.mu.Unlock()
		return true
	}
	// A local tier still loading its index (the S3 tier rebuilding from its
	// bucket after a lost disk) would make shards it holds look missing, and
	// a shard no other member has would then leave the placement: wait.
	if l, ok := b.local.(indexLoader); ok && !l.IndexLoaded() {
		b.restore.noteErr(errors.New("waiting for the local tiers to load their indexes"))
		return false
	}
	// Entries up to the index applied now are checked by this pass; a later
	// pass checks only newer ones (a new entry's generation is its log
	// index).
	applied := f.AppliedIndex()
	minGen := b.restore.applied
	b.restore.applied = applied
	var missing []restoreTask
	checked, skipped := 0, 0
	if !b.checkNewPuts(f, minGen, &checked, &skipped, &missing) {
		b.restore.mu.Lock()
		b.restore.st.Scans++
		b.restore.mu.Unlock()
		for _, ns := range f.Namespaces() {
			c, err := erasure.New(ns.DataShards, ns.ParityShards)
			if err != nil {
				continue
			}
			f.ScanReusing(ns.Name, func(k block.Key, e fsm.Entry) bool {
				if e.Generation <= minGen {
					return true
				}
				for _, s := range e.Placement {
					if s.NodeID != b.cfg.NodeID {
						continue
					}
					checked++
					switch {
					case b.local.Contains(shardKey(k, c, int(s.Index))):
					case b.drops.gap.has(k):
						skipped++
					default:
						kept := e
						kept.Placement = slices.Clone(e.Placement) // the task keeps it
						missing = append(missing, restoreTask{key: k, entry: kept, code: c, index: int(s.Index)})
					}
					if c.K == 1 {
						break // one replica per node
					}
				}
				return true
			})
		}
	}
	b.restore.mu.Lock()
	if minGen == 0 {
		b.restore.st.Checked, b.restore.st.Missing = checked, len(missing)
	} else {
		b.restore.st.Checked += checked
		b.restore.st.Missing += len(missing)
	}
	b.restore.st.Skipped += uint64(skipped)
	b.restore.mu.Unlock()
	var (
		mu       sync.Mutex
		waiting  int
		firstErr error
		wg       sync.WaitGroup
		written  []restoredShard
		gone     []goneShard
	)
	sem := make(chan struct{}, restoreParallel)
	for _, t := range missing {
		select {
		case <-b.stop:
			return false
		case sem <- struct{}{}:
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			w, err := b.restoreOne(t)
			mu.Lock()
			defer mu.Unlock()
			b.restore.mu.Lock()
			defer b.restore.mu.Unlock()
			switch {
			case err == nil:
				if w.size > 0 {
					written = append(written, w)
				}
				b.restore.st.Restored++
				b.restore.st.RestoredBytes += uint64(w.size)
				b.met.restored.Inc()
			case errors.Is(err, errDropQueued):
				b.restore.st.Skipped++
			case errors.Is(err, errBlockGone):
				gone = append(gone, goneShard{t, err})
			default:
				waiting++
				if firstErr == nil {
					firstErr = err
				}
			}
		}()
	}
	wg.Wait()
	lost, unsure := b.checkPass(written, gone)
	waiting += unsure
	if unsure > 0 && firstErr == nil {
		firstErr = fmt.Errorf("%d shard(s) no holder had: their entries changed meanwhile, or this node could not catch up to check", unsure)
	}
	b.restore.mu.Lock()
	defer b.restore.mu.Unlock()
	b.restore.st.Lost += uint64(lost)
	b.met.restoreLost.Add(float64(lost))
	b.restore.st.Passes++
	if waiting > 0 {
		b.restore.applied = minGen // check these entries again next pass
	}
	b.restore.st.Waiting = waiting
	b.restore.st.Done = waiting == 0 || b.restore.st.Done
	b.restore.st.Err = ""
	if firstErr != nil {
		b.restore.st.Err = firstErr.Error()
	}
	return waiting == 0
}

// checkNewPuts checks every shard on this node of the entries created above
// generation minGen that the FSM's record of new puts (fsm.TrackPuts) names,
// as check would, adding the missing ones to missing, and reports whether
// the record covered them all; false (the first pass, an overflowed record,
// a snapshot installed meanwhile) leaves the caller to scan the index. A
// shard held locally needs no lookup; a missing one is looked up, and kept
// only while its entry still places it here at a generation above minGen.
func (b *Backend) checkNewPuts(f *fsm.FSM, minGen uint64, checked, skipped *int, missing *[]restoreTask) bool {
	if minGen == 0 {
		return false
	}
	type shard struct {
		key   block.Key
		index int
	}
	// Copied out under the record's lock, checked after it: the FSM's
	// applies wait on that lock, and a tier's Contains per shard would hold
	// them up.
	var recorded []shard
	if !f.PutsSince(minGen, func(k block.Key, i int) { recorded = append(recorded, shard{k, i}) }) {
		return false
	}
	var lack []shard
	codes := make(map[string]*erasure.Code)
	code := func(ns string) *erasure.Code {
		c, ok := codes[ns]
		if !ok {
			if n, err := f.Namespace(ns); err == nil {
				c, _ = erasure.New(n.DataShards, n.ParityShards)
			}
			codes[ns] = c
		}
		return c
	}
	for _, s := range recorded {
		c := code(s.key.Namespace)
		if c == nil {
			continue
		}
		*checked++
		switch {
		case b.local.Contains(shardKey(s.key, c, s.index)):
		case b.drops.gap.has(s.key):
			*skipped++
		default:
			lack = append(lack, s)
		}
	}
	seen := make(map[shard]bool, len(lack)) // a key put, deleted and put again is restored once
	for _, s := range lack {
		if seen[s] {
			continue
		}
		seen[s] = true
		e, ok := f.Lookup(s.key) // the entry is the caller's own
		if !ok || e.Generation <= minGen {
			continue
		}
		c := code(s.key.Namespace)
		if c.K == 1 { // a replica: any index on this node is the same copy
			i := slices.IndexFunc(e.Placement, func(p fsm.Shard) bool { return p.NodeID == b.cfg.NodeID })
			if i < 0 {
				continue
			}
			s.index = int(e.Placement[i].Index)
		} else if !placedOn(e.Placement, b.cfg.NodeID, s.index) {
			continue
		}
		*missing = append(*missing, restoreTask{key: s.key, entry: e, code: c, index: s.index})
	}
	return true
}

// restoredShard is a shard a restore pass wrote to the local tier stack:
// its key, the CRC-32C it was stored with, and its size (0: none written).
type restoredShard struct {
	key  block.Key
	sum  uint32
	size int
}

// restoreOne rebuilds shard t.index of t.key from the other holders and
// writes it to the local tier stack; it returns what it wrote. The entry
// may have changed meanwhile: a block deleted or moved off this node, as
// far as this node's index shows, needs nothing.
func (b *Backend) restoreOne(t restoreTask) (restoredShard, error) {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.ShardTimeout+b.cfg.ProposeTimeout)
	defer cancel()
	c := t.code
	sk := shardKey(t.key, c, t.index)
	if b.local.Contains(sk) {
		return restoredShard{}, nil
	}
	if b.drops.gap.has(t.key) {
		return restoredShard{}, errDropQueued
	}
	var others []fsm.Shard
	for _, s := range t.entry.Placement {
		if s.NodeID != b.cfg.NodeID {
			others = append(others, s)
		}
	}
	var shard []byte
	if c.K == 1 {
		data, err := b.readReplica(ctx, t, others)
		if err != nil {
			return restoredShard{}, err
		}
		shard = data
	} else {
		data, err := b.readCoded(ctx, t, others)
		if err != nil {
			return restoredShard{}, err
		}
		all, err := c.Encode(data)
		if err != nil {
			return restoredShard{}, err
		}
		shard = all[t.index]
	}
	// Still placed here? A delete or a move meanwhile makes the copy garbage.
	if e, ok := b.node.FSM().Lookup(t.key); !ok || e.Generation != t.entry.Generation || !placedOn(e.Placement, b.cfg.NodeID, t.index) {
		return restoredShard{}, nil
	}
	opts := block.PutOptions{Sum: block.Checksum(shard), HasSum: true}
	if c.K == 1 {
		opts.Sum = t.entry.Sum
	}
	if ttl := time.Until(t.entry.PinUntil); ttl > 0 {
		opts.PinTTL = ttl
	}
	if err := b.local.Put(ctx, sk, shard, opts.Sum, opts); err != nil && !errors.Is(err, block.ErrConflict) {
		return restoredShard{}, fmt.Errorf("restore: writing %s locally: %w", sk, err)
	}
	return restoredShard{key: sk, sum: opts.Sum, size: len(shard)}, nil
}

// errDropQueued: the shard a restore pass found missing is one this node's
// tier gave up a moment ago (a capacity drop), whose index correction is
// queued or committing. Rebuilding it would undo the eviction, and for a
// lone copy there is nothing to rebuild it from: the drop's commit takes
// this node out of the placement, which is all a restore could conclude.
var errDropQueued = errors.New("cluster: the local tier dropped the shard; its index correction is queued")

// goneShard is a shard a restore pass found no holder of.
type goneShard struct {
	task restoreTask
	err  error
}

// checkPass runs after a restore pass's reads and writes, once this node
// has caught up with the leader (SyncRead; see the top of this file). It
// deletes the shards the pass wrote that the index no longer places here
// (dropMovedOff), and gives up (Dropped: this node leaves the placement,
// or a lone copy's entry is deleted) a shard no holder had only while the
// entry is still the one the pass read: the missing copy may have been
// moved elsewhere by then, and giving it up from a stale entry would
// delete the index entry of a block that another member now holds. It
// returns the shards given up, and those it left for the next pass (their
// entry changed, or this node could not catch up).
func (b *Backend) checkPass(written []restoredShard, gone []goneShard) (lost, unsure int) {
	if len(written) == 0 && len(gone) == 0 {
		return 0, 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.ProposeTimeout)
	defer cancel()
	synced := b.SyncRead(ctx)
	if synced != nil {
		b.log.Warn("restore: cannot catch up with the leader to check the pass's outcome; the shards it wrote are checked against this node's index, those no holder had wait", "written", len(written), "gone", len(gone), "err", synced)
	}
	b.dropMovedOff(ctx, written)
	f := b.node.FSM()
	for _, g := range gone {
		t := g.task
		e, ok := f.Lookup(t.key)
		switch {
		case !ok:
			// Deleted meanwhile: nothing to give up.
		case synced != nil || e.Generation != t.entry.Generation || !slices.Equal(e.Placement, t.entry.Placement):
			unsure++
		default:
			lost++
			b.log.Warn("restore: no holder has the shard; leaving its placement", "key", t.key.String(), "shard", t.index,
				"placement", fmt.Sprint(t.entry.Placement), "generation", t.entry.Generation, "err", g.err)
			b.Dropped(shardKey(t.key, t.code, t.index))
		}
	}
	return lost, unsure
}

// dropMovedOff deletes the shards a restore pass wrote whose block, as
// this node's index has it (caught up by checkPass), no longer places that
// copy here. A copy the index still names, under any generation, stays.
// When this node could not catch up, a copy a move committed elsewhere may
// stay: it is garbage the index does not name, never a lost shard.
func (b *Backend) dropMovedOff(ctx context.Context, written []restoredShard) {
	f := b.node.FSM()
	for _, w := range written {
		key := w.key.Block()
		if e, ok := f.Lookup(key); ok {
			c, err := namespaceCode(f, key.Namespace)
			if err != nil || slices.ContainsFunc(e.Placement, func(s fsm.Shard) bool {
				return s.NodeID == b.cfg.NodeID && shardKey(key, c, int(s.Index)) == w.key
			}) {
				continue
			}
		}
		err := b.deleteShard(ctx, b.cfg.NodeID, w.key, w.sum, true)
		if err != nil && !errors.Is(err, block.ErrNotFound) {
			b.log.Warn("restore: deleting a shard moved off this node while it was restored", "key", w.key.String(), "err", err)
			continue
		}
		b.log.Info("restore: shard moved off this node while it was restored; copy deleted", "key", w.key.String())
	}
}

// memberDown reports whether the cluster has marked a member dead or left
// (or forgotten it). Such a member cannot supply a shard now, so a restore
// does not wait for it: giving up this node's own claim on a block it
// lost only takes this node out of the placement; the dead member's entries
// stay, and repair uses them if it comes back with its data.
func (b *Backend) memberDown(id string) bool {
	m, ok := b.node.FSM().Member(id)
	return !ok || m.State == fsm.MemberDead || m.State == fsm.MemberLeft
}

func placedOn(place []fsm.Shard, id string, idx int) bool {
	for _, s := range place {
		if s.NodeID == id && int(s.Index) == idx {
			return true
		}
	}
	return false
}

// readReplica reads a verified copy of the block from another holder. It
// returns errBlockGone only when there is another holder and every one of
// them answered that it does not have the block.
func (b *Backend) readReplica(ctx context.Context, t restoreTask, others []fsm.Shard) ([]byte, error) {
	gone := true
	var last error
	var said []string // holders that answered NotFound
	for _, s := range b.reads.readOrder(others) {
		d, err := b.reads.fetch(ctx, s.NodeID, t.key, 0)
		if err == nil && int64(len(d)) == t.entry.Size && block.Checksum(d) == t.entry.Sum {
			return d, nil
		}
		if err == nil {
			err = fmt.Errorf("%w: replica on %s does not match the index", block.ErrChecksum, s.NodeID)
		}
		switch {
		case errors.Is(err, block.ErrNotFound):
			said = append(said, s.NodeID)
		case !b.memberDown(s.NodeID):
			gone = false
		}
		last = err
	}
	if gone && b.allVerified(ctx, said) {
		return nil, fmt.Errorf("%w: no other holder of %s has it", errBlockGone, t.key)
	}
	return nil, fmt.Errorf("%w: restore %s: %v", block.ErrUnavailable, t.key, last)
}

// readCoded decodes the block from the other holders' shards (verified
// against its CRC). It returns errBlockGone only when so many holders
// answered that they do not have their shard that fewer than k remain.
func (b *Backend) readCoded(ctx context.Context, t restoreTask, others []fsm.Shard) ([]byte, error) {
	c, size := t.code, int(t.entry.Size)
	shards := make([][]byte, c.N())
	var mu sync.Mutex
	notFound := map[int]int{} // shard index -> holders that said NotFound
	holders := map[int]int{}
	var said, errs []string
	var wg sync.WaitGroup
	for _, s := range others {
		if int(s.Index) >= c.N() {
			continue
		}
		holders[int(s.Index)]++
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := b.reads.fetch(ctx, s.NodeID, shardKey(t.key, c, int(s.Index)), 0)
			mu.Lock()
			defer mu.Unlock()
			if err == nil && len(d) == c.ShardSize(size) {
				if shards[s.Index] == nil {
					shards[s.Index] = d
				}
				return
			}
			if errors.Is(err, block.ErrNotFound) {
				notFound[int(s.Index)]++
				said = append(said, s.NodeID)
			} else if err != nil && b.memberDown(s.NodeID) {
				notFound[int(s.Index)]++ // cannot supply it now
			}
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s: %v", s.NodeID, err))
			}
		}()
	}
	wg.Wait()
	have := 0
	for _, s := range shards {
		if s != nil {
			have++
		}
	}
	if have >= c.K {
		if out, ok := tryDecode(c, shards, size, t.entry.Sum); ok {
			return out, nil
		}
		// A surviving shard is bad: the read path searches subsets.
		e := t.entry
		e.Placement = others
		return b.reads.getCoded(ctx, t.key, e, c, 0)
	}
	possible := 0 // indexes some holder may still supply
	for idx, n := range holders {
		if notFound[idx] < n {
			possible++
		}
	}
	if possible < c.K && b.allVerified(ctx, said) {
		return nil, fmt.Errorf("%w: %s: %d of %d shards left on other holders, need %d (%s)", errBlockGone, t.key, possible, c.N(), c.K, strings.Join(errs, "; "))
	}
	return nil, fmt.Errorf("%w: restore %s: %d of %d shards readable, need %d", block.ErrUnavailable, t.key, have, c.N(), c.K)
}
