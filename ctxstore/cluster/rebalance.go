package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/erasure"
	"github.com/ctxtier/ctxtier/ctxstore/placement"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// Rebalancing moves shards to the members rendezvous hashing picks now,
// after the set of alive members changed (a member joined, came back, was
// drained or removed). It runs on the leader, in the repair loop, one page
// at a time, after the repair pass whenever one is due (periodic repair
// scans take at most a tenth of the leader's time; a member's state
// change or a drain asks for one at once), so repair goes first; a block
// that repair would touch (a shard on a member that is not alive, or
// still restoring; fewer shards than its code) is left alone ("deferred")
// until repair has made it whole.
//
// A page is up to Config.RebalanceBatch blocks whose placement names a
// member that placement.Pick, over the alive members, no longer picks.
// For each such shard the page reads it from its holder (a replica is
// checked against the block's CRC; an erasure shard against the checksum
// stored with it, and rebuilt from the other shards when that read fails),
// writes it to the member that placement picks now, with at most
// Config.RebalanceInflight copies at once and at most
// Config.RebalanceBytesPerSec bytes per second, then commits the new
// placements of the whole page in one Raft proposal (OpPlace per block)
// and only then deletes the copies left behind. A block keeps every shard
// it had throughout: the new copy exists before the index names it, and
// the old one is deleted only once the index no longer does.
//
// Pages follow each other until a scan finds nothing to move. A pass's
// first page scans the whole index (to count what is pending); the next
// ones resume after the last page's last task and stop at their own last,
// so a pass reads the index about twice however many pages it takes; when
// a page finds nothing more, a counting scan starts the next pass (which
// retries what failed) or finds the placement clean. The scan is skipped
// while the alive membership is the one the last clean scan saw, so a
// stable cluster pays nothing. Nothing moves while a member is
// suspect (it may come back: moving its blocks' shards would be undone).

// RebalanceStatus is the rebalancing progress, for ctxctl and
// /v1/cluster/status.
type RebalanceStatus struct {
	// Active: this node is the leader and runs rebalancing; the fields
	// below are its view (zero on other nodes, and reset on a new leader).
	Active bool `json:"active"`
	// Running: the last scan found shards to move.
	Running bool `json:"running"`
	// Pending shards found by the last scan: shards on a member that
	// placement no longer picks for their block (DeferredBlocks included).
	Pending int `json:"pending"`
	// DeferredBlocks are blocks of the last scan that need repair first.
	DeferredBlocks int `json:"deferred_blocks"`
	// Failed counts the shard moves that failed since the last clean scan
	// (they are retried).
	Failed      int    `json:"failed"`
	MovedShards uint64 `json:"moved_shards"`
	MovedBytes  uint64 `json:"moved_bytes"`
	// RateBytesPerSec and RateShardsPerSec are measured over the current
	// run (from the scan that found something to move to now), or the last
	// one (to the scan that found nothing left); LimitBytesPerSec is
	// Config.RebalanceBytesPerSec.
	RateBytesPerSec  float64 `json:"rate_bytes_per_sec"`
	RateShardsPerSec float64 `json:"rate_shards_per_sec"`
	LimitBytesPerSec int64   `json:"limit_bytes_per_sec"`
	// ETASeconds is Pending over the measured shard rate (0 when idle or
	// when nothing has moved yet in this run).
	ETASeconds float64 `json:"eta_seconds"`
	// LastScan is when the last scan began; ScannedBlocks how many index
	// entries it read (the whole index for a pass's first page, from where
	// the last page stopped for the others). Pending and DeferredBlocks
	// come from the pass's first page, Pending less what moved since.
	LastScan      time.Time `json:"last_scan,omitzero"`
	ScannedBlocks int       `json:"scanned_blocks"`
	// RunStarted is when the current (or last) run began, RunEnded when
	// the last one ended (zero while one runs).
	RunStarted time.Time `json:"run_started,omitzero"`
	RunEnded   time.Time `json:"run_ended,omitzero"`
}

// rebalanceState is the leader's rebalancing account (b.rebalMu).
type rebalanceState struct {
	st RebalanceStatus
	// cleanSig is the alive membership a clean scan (nothing pending)
	// covered; sig and sigSince the membership the last page saw, and
	// since when.
	cleanSig, sig string
	sigSince      time.Time
	// cursor is where the next page of the current pass resumes, valid
	// while the alive membership is cursorSig.
	cursor    scanCursor
	cursorSig string
	// failed are the blocks whose move failed in this pass: later pages
	// skip them; the next pass (a tick later) retries them.
	failed map[block.Key]bool
	// runMovedShards and runMovedBytes are this run's moves.
	runMovedShards, runMovedBytes uint64
	wasLeader                     bool
}

// RebalanceStatus returns the rebalancing progress.
func (b *Backend) RebalanceStatus() RebalanceStatus {
	b.rebalMu.Lock()
	defer b.rebalMu.Unlock()
	s := b.rebal.st
	s.Active = b.node.IsLeader()
	if !s.Active {
		return RebalanceStatus{LimitBytesPerSec: b.cfg.RebalanceBytesPerSec}
	}
	s.LimitBytesPerSec = b.cfg.RebalanceBytesPerSec
	if !s.RunStarted.IsZero() {
		end := s.RunEnded
		if s.Running {
			end = time.Now()
		}
		if el := end.Sub(s.RunStarted).Seconds(); el > 0 {
			s.RateBytesPerSec = float64(b.rebal.runMovedBytes) / el
			s.RateShardsPerSec = float64(b.rebal.runMovedShards) / el
		}
		if s.Running && s.RateShardsPerSec > 0 {
			s.ETASeconds = float64(s.Pending) / s.RateShardsPerSec
		}
	}
	return s
}

// move is one shard of a block going from one member to another.
type move struct {
	from fsm.Shard
	to   string
}

// rebalanceTask is one block of a page.
type rebalanceTask struct {
	key   block.Key
	entry fsm.Entry
	code  *erasure.Code
	moves []move
}

// memberSig is the alive membership placement picks from, and whether a
// member is suspect.
func memberSig(ms []fsm.Member) (sig string, suspect bool) {
	var parts []string
	for _, m := range ms {
		switch m.State {
		case fsm.MemberAlive:
			parts = append(parts, fmt.Sprintf("%s/%s/%d", m.ID, m.Zone, m.Capacity))
		case fsm.MemberSuspect:
			suspect = true
		}
	}
	return strings.Join(parts, ","), suspect
}

// planMoves returns the moves that bring e's placement to what
// placement.Pick chooses among nodes, and whether the block may move now
// (every holder alive and restored, full redundancy, one shard per node).
// A block that may not move is repair's first.
func planMoves(key block.Key, e fsm.Entry, c *erasure.Code, ms map[string]fsm.Member, nodes []placement.Node, usable int, scratch *placement.Scratch) (moves []move, ok bool) {
	want := min(c.N(), len(nodes))
	if want == 0 {
		return nil, true
	}
	picked, err := placement.PickReusing(key, nodes, want, scratch)
	if err != nil {
		return nil, true
	}
	// A placement has a handful of shards and picked as many members:
	// linear scans, no maps (this runs for every entry of the index).
	ok = true
	for i, s := range e.Placement {
		m, known := ms[s.NodeID]
		if !known || m.State != fsm.MemberAlive || m.Restoring || holds(e.Placement[:i], s.NodeID) {
			ok = false
		}
	}
	if c.K == 1 {
		ok = ok && len(e.Placement) >= min(c.N(), usable)
	} else {
		ok = ok && distinctIndexes(e.Placement) == c.N()
	}
	var in []string // picked members that hold no shard of the block
	for _, p := range picked {
		if !holds(e.Placement, p.ID) {
			in = append(in, p.ID)
		}
	}
	for _, s := range e.Placement {
		if len(in) == 0 {
			break
		}
		if !slices.ContainsFunc(picked, func(p placement.Node) bool { return p.ID == s.NodeID }) {
			moves = append(moves, move{from: s, to: in[0]})
			in = in[1:]
		}
	}
	return moves, ok
}

// holds reports whether a shard of p is on member id.
func holds(p []fsm.Shard, id string) bool {
	for _, s := range p {
		if s.NodeID == id {
			return true
		}
	}
	return false
}

// distinctIndexes counts the distinct shard indexes of p.
func distinctIndexes(p []fsm.Shard) int {
	n := 0
	for i, s := range p {
		if !slices.ContainsFunc(p[:i], func(o fsm.Shard) bool { return o.Index == s.Index }) {
			n++
		}
	}
	return n
}

// rebalanceScan reads the whole index: it counts the shards to move and
// the blocks deferred to repair, and returns up to limit blocks that can
// move now and are not in skip.
func (b *Backend) rebalanceScan(limit int, skip map[block.Key]bool, from scanCursor, count bool) rebalanceScanResult {
	return rebalanceScanIndex(b.node.FSM(), limit, skip, from, count)
}

// scanCursor is where a rebalancing scan stopped: after key in namespace
// ns (unset: from the start of the index).
type scanCursor struct {
	set bool
	ns  string
	key block.Key
}

// rebalanceScanResult is what a rebalancing scan found.
type rebalanceScanResult struct {
	tasks []rebalanceTask
	// pending shards and deferred blocks: over the whole index for a
	// counting scan, else over the entries this scan read.
	pending, deferred, scanned int
	// next is where the next page resumes (after the last task); end
	// says the scan ran to the end of the index.
	next scanCursor
	end  bool
}

// rebalanceScanIndex is rebalanceScan over the index f. It reads the
// index in order from after the cursor from, and collects up to limit
// tasks. A counting scan (from the start) reads on to the end, to count
// what is pending; any other stops at its limit-th task, so that paging
// through the index costs one pass over it, not one per page.
func rebalanceScanIndex(f *fsm.FSM, limit int, skip map[block.Key]bool, from scanCursor, count bool) rebalanceScanResult {
	ms, usable := memberView(f)
	nodes := candidatesOf(f, nil)
	var scratch placement.Scratch
	var r rebalanceScanResult
	stopped := false
	for _, ns := range f.Namespaces() {
		if stopped {
			break
		}
		if from.set && ns.Name < from.ns {
			continue
		}
		c, err := erasure.New(ns.DataShards, ns.ParityShards)
		if err != nil {
			continue
		}
		start, resume := block.Key{}, from.set && ns.Name == from.ns
		if resume {
			start = from.key
		}
		f.ScanReusingFrom(ns.Name, start, func(k block.Key, e fsm.Entry) bool {
			if resume && k == from.key {
				return true // the last page's last task
			}
			r.scanned++
			moves, ok := planMoves(k, e, c, ms, nodes, usable, &scratch)
			if len(moves) == 0 {
				return true
			}
			r.pending += len(moves)
			if !ok {
				r.deferred++
				return true
			}
			if len(r.tasks) < limit && !skip[k] {
				e.Placement = slices.Clone(e.Placement) // the task keeps it
				r.tasks = append(r.tasks, rebalanceTask{key: k, entry: e, code: c, moves: moves})
				r.next = scanCursor{set: true, ns: ns.Name, key: k}
				if len(r.tasks) == limit && !count {
					stopped = true
					return false
				}
			}
			return true
		})
	}
	r.end = !stopped
	return r
}

// rebalancePage runs one page of rebalancing (on the leader) and reports
// whether another page should follow at once.
func (b *Backend) rebalancePage() bool {
	leader := b.node.IsLeader()
	b.rebalMu.Lock()
	if leader && !b.rebal.wasLeader {
		// A new leader starts from a full scan and fresh counters.
		b.rebal = rebalanceState{}
	}
	was := b.rebal.wasLeader
	b.rebal.wasLeader = leader
	b.rebalMu.Unlock()
	if !leader {
		if was {
			// The leader's gauges: another node reports them now.
			b.met.rebalPending.Set(0)
			b.met.rebalDeferred.Set(0)
		}
		return false
	}
	sig, suspect := memberSig(b.node.FSM().Members())
	now := time.Now()
	b.rebalMu.Lock()
	if sig != b.rebal.sig {
		b.rebal.sig, b.rebal.sigSince = sig, now
	}
	clean := sig == b.rebal.cleanSig
	sigSince := b.rebal.sigSince
	if b.rebal.failed == nil {
		b.rebal.failed = map[block.Key]bool{}
	}
	skip := b.rebal.failed
	cursor := b.rebal.cursor
	if b.rebal.cursorSig != sig {
		cursor = scanCursor{} // pages of another membership: start over
	}
	b.rebalMu.Unlock()
	if clean || suspect {
		return false
	}
	// A pass pages through the index: its first page counts what is
	// pending over the whole index, the next ones resume after the last
	// page's last task and stop at their own last; when one finds nothing
	// more, a counting scan starts the next pass (or finds the placement
	// clean).
	var r rebalanceScanResult
	if cursor.set {
		if r = b.rebalanceScan(b.cfg.RebalanceBatch, skip, cursor, false); len(r.tasks) == 0 {
			cursor = scanCursor{}
		}
	}
	counted := !cursor.set
	if counted {
		r = b.rebalanceScan(b.cfg.RebalanceBatch, skip, scanCursor{}, true)
	}
	tasks := r.tasks
	b.met.rebalLastScan.Set(float64(now.UnixNano()) / 1e9)
	b.rebalMu.Lock()
	b.rebal.cursor, b.rebal.cursorSig = scanCursor{}, ""
	if len(tasks) == b.cfg.RebalanceBatch {
		b.rebal.cursor, b.rebal.cursorSig = r.next, sig
	}
	st := &b.rebal.st
	st.LastScan, st.ScannedBlocks = now, r.scanned
	if !counted {
		// A resumed page: the pass's counts stand (less what it moves).
		b.rebalMu.Unlock()
		return b.rebalanceRun(tasks)
	}
	pending, deferred := r.pending, r.deferred
	b.met.rebalPending.Set(float64(pending))
	b.met.rebalDeferred.Set(float64(deferred))
	if pending > 0 && !st.Running {
		st.RunStarted, st.RunEnded = now, time.Time{}
		b.rebal.runMovedShards, b.rebal.runMovedBytes = 0, 0
	} else if pending == 0 && st.Running {
		st.RunEnded = now
		b.log.Info("rebalancing done", "moved_shards", b.rebal.runMovedShards, "moved_bytes", b.rebal.runMovedBytes, "seconds", now.Sub(st.RunStarted).Seconds())
	}
	st.Running, st.Pending, st.DeferredBlocks = pending > 0, pending, deferred
	if pending == 0 && now.Sub(sigSince) > b.cfg.ShardTimeout+b.cfg.ProposeTimeout {
		// Puts that picked their placement before the membership changed
		// have committed (or failed) by now: nothing is left to find.
		b.rebal.cleanSig = sig
		st.Failed = 0
	}
	if len(tasks) == 0 {
		// This pass is over: what failed is retried by the next one.
		b.rebal.failed = map[block.Key]bool{}
		b.rebalMu.Unlock()
		return false
	}
	b.rebalMu.Unlock()
	return b.rebalanceRun(tasks)
}

// rebalanceRun moves a page's tasks and accounts for them; it reports
// that another page should follow.
func (b *Backend) rebalanceRun(tasks []rebalanceTask) bool {
	moved, bytes, failed := b.rebalanceTasks(tasks)
	b.met.rebalMoved.Add(float64(moved))
	b.met.rebalBytes.Add(float64(bytes))
	b.rebalMu.Lock()
	st := &b.rebal.st
	st.MovedShards += uint64(moved)
	st.MovedBytes += uint64(bytes)
	st.Failed += len(failed)
	st.Pending = max(st.Pending-moved, 0)
	b.rebal.runMovedShards += uint64(moved)
	b.rebal.runMovedBytes += uint64(bytes)
	for _, k := range failed {
		b.rebal.failed[k] = true
	}
	pending := st.Pending
	b.rebalMu.Unlock()
	b.met.rebalPending.Set(float64(pending))
	return true
}

// copied is a shard written to its new holder.
type copied struct {
	task  int
	m     move
	bytes int64
	sum   uint32 // the shard's CRC-32C (old and new copy alike)
}

// rebalanceTasks copies the tasks' shards, commits their new placements in
// one proposal and deletes the old copies. It returns the shards moved,
// their bytes, and the blocks that failed.
func (b *Backend) rebalanceTasks(tasks []rebalanceTask) (moved int, bytes int64, failed []block.Key) {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.ShardTimeout*2+b.cfg.ProposeTimeout)
	defer cancel()
	// Before the first copy: the FSM drops copies on members that restart
	// after this (their copy went with the old process).
	began := time.Now()
	var mu sync.Mutex
	var done []copied
	bad := make([]bool, len(tasks))
	sem := make(chan struct{}, b.cfg.RebalanceInflight)
	var wg sync.WaitGroup
	for i, t := range tasks {
		for _, mv := range t.moves {
			select {
			case sem <- struct{}{}:
			case <-b.stop:
				wg.Wait()
				b.cleanupCopies(tasks, done)
				return 0, 0, nil
			}
			wg.Go(func() {
				defer func() { <-sem }()
				n, sum, err := b.copyShard(ctx, t, mv)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					bad[i] = true
					b.log.Debug("rebalance copy failed", "key", t.key.String(), "from", mv.from.NodeID, "to", mv.to, "err", err)
					return
				}
				done = append(done, copied{task: i, m: mv, bytes: n, sum: sum})
			})
		}
	}
	wg.Wait()
	// Commit every block with at least one copy; a block some of whose
	// copies failed commits the ones that worked.
	place := make([][]fsm.Shard, len(tasks))
	var ops []fsm.Op
	var at []int
	f := b.node.FSM()
	byTask := map[int][]copied{}
	for _, d := range done {
		byTask[d.task] = append(byTask[d.task], d)
	}
	for i, t := range tasks {
		cs := byTask[i]
		if len(cs) == 0 {
			continue
		}
		// The entry must still be the one the copies were planned from (a
		// capacity drop or a delete may have changed it meanwhile).
		if cur, ok := f.Lookup(t.key); !ok || cur.Sum != t.entry.Sum || !slices.Equal(cur.Placement, t.entry.Placement) {
			bad[i] = true
			b.cleanupCopies(tasks, cs)
			continue
		}
		p := slices.Clone(t.entry.Placement)
		for _, c := range cs {
			j := slices.Index(p, c.m.from)
			p[j] = fsm.Shard{NodeID: c.m.to, Index: c.m.from.Index}
		}
		place[i] = p
		// Conditional on the placement planned from: the check above is
		// this node's view, and a node that lost the lead during the
		// copies must not overwrite a newer leader's placement.
		ops = append(ops, fsm.MovePlaceOp(t.key, t.entry.Sum, t.entry.Placement, p, began))
		at = append(at, i)
	}
	if len(ops) > 0 {
		res, err := b.propose(ctx, ops...)
		// Read back once this node's index shows the outcome (the
		// proposal may have been forwarded).
		from := make(map[block.Key][]fsm.Shard, len(at))
		for _, i := range at {
			from[tasks[i].key] = tasks[i].entry.Placement
		}
		b.catchUp(ctx, from)
		for j, i := range at {
			t, cs := tasks[i], byTask[i]
			var now []fsm.Shard
			if cur, ok := f.Lookup(t.key); ok {
				now = cur.Placement
			}
			status := fsm.StatusUpdated // committed, its answer lost
			if err == nil {
				status = res[j].Status
			} else if !slices.Equal(now, place[i]) {
				// The outcome is unknown: both copies stay (the one the
				// index does not name is garbage, never a lost shard).
				bad[i] = true
				continue
			}
			if status != fsm.StatusUpdated {
				// Refused (the block was deleted, re-put or moved by
				// another writer meanwhile, or the copies went to members
				// that restarted since they were written: stale-holder):
				// keep what the index names now, which still includes the
				// old copies.
				bad[i] = true
				b.cleanup(t.key, t.code, shardsTo(cs), now, copiesVersion(t, cs))
				continue
			}
			// The FSM may have dropped a copy whose member restarted
			// since it was written: that move's old copy is not deleted
			// (repair rebuilds what the placement lacks, and the copy it
			// keeps is never a lost shard).
			var old []fsm.Shard
			for _, c := range cs {
				if !slices.Contains(now, fsm.Shard{NodeID: c.m.to, Index: c.m.from.Index}) {
					bad[i] = true
					b.log.Info("rebalance copy dropped at commit: old copy kept", "key", t.key.String(), "from", c.m.from.NodeID, "to", c.m.to)
					continue
				}
				old = append(old, c.m.from)
				moved++
				bytes += c.bytes
			}
			b.cleanup(t.key, t.code, old, now, copiesVersion(t, cs))
		}
	}
	for i, t := range tasks {
		if bad[i] {
			failed = append(failed, t.key)
		}
	}
	return moved, bytes, failed
}

// copiesVersion is the version of t's block whose shards cs copied: a
// move's old copy and its new one hold the same bytes.
func copiesVersion(t rebalanceTask, cs []copied) version {
	v := replicaVersion(t.code, t.entry.Sum)
	if t.code.K > 1 {
		v.shards = make(map[uint16]uint32, len(cs))
		for _, c := range cs {
			v.shards[c.m.from.Index] = c.sum
		}
	}
	return v
}

func shardsTo(cs []copied) []fsm.Shard {
	out := make([]fsm.Shard, len(cs))
	for i, c := range cs {
		out[i] = fsm.Shard{NodeID: c.m.to, Index: c.m.from.Index}
	}
	return out
}

// cleanupCopies deletes copies written for blocks that do not commit them.
func (b *Backend) cleanupCopies(tasks []rebalanceTask, cs []copied) {
	for _, c := range cs {
		t := tasks[c.task]
		var keep []fsm.Shard
		if cur, ok := b.node.FSM().Lookup(t.key); ok {
			keep = cur.Placement
		}
		b.cleanup(t.key, t.code, shardsTo([]copied{c}), keep, copiesVersion(t, []copied{c}))
	}
}

// copyShard reads mv's shard from its holder, checks it, waits for the
// byte budget and writes it to the new holder.
func (b *Backend) copyShard(ctx context.Context, t rebalanceTask, mv move) (int64, uint32, error) {
	c, size := t.code, int(t.entry.Size)
	sk := shardKey(t.key, c, int(mv.from.Index))
	var data []byte
	var err error
	if c.K == 1 {
		// Any replica will do: the moving one first, then the others.
		for _, s := range append([]fsm.Shard{mv.from}, b.reads.readOrder(t.entry.Placement)...) {
			if data, err = b.reads.fetch(ctx, s.NodeID, sk, 0); err == nil && (int64(len(data)) != t.entry.Size || block.Checksum(data) != t.entry.Sum) {
				err = fmt.Errorf("%w: replica on %s does not match the index", block.ErrChecksum, s.NodeID)
			}
			if err == nil {
				break
			}
		}
		if err != nil {
			return 0, 0, err
		}
	} else if data, err = b.reads.fetch(ctx, mv.from.NodeID, sk, 0); err == nil && len(data) != c.ShardSize(size) {
		err = fmt.Errorf("%w: shard %d on %s has %d bytes, want %d", block.ErrChecksum, mv.from.Index, mv.from.NodeID, len(data), c.ShardSize(size))
	}
	if err != nil {
		// Rebuild the erasure shard from the block, checked against its CRC.
		whole, gerr := b.reads.getCoded(ctx, t.key, t.entry, c, 0)
		if gerr != nil {
			return 0, 0, fmt.Errorf("%v; rebuilding it: %w", err, gerr)
		}
		all, eerr := c.Encode(whole)
		if eerr != nil {
			return 0, 0, eerr
		}
		data = all[mv.from.Index]
	}
	if d := b.rebalLimit.reserve(len(data)); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-b.stop:
			return 0, 0, fmt.Errorf("%w: closing", block.ErrUnavailable)
		}
	}
	b.met.rebalInflight.Inc()
	defer b.met.rebalInflight.Dec()
	opts := block.PutOptions{Sum: t.entry.Sum, HasSum: true, PinTTL: max(time.Until(t.entry.PinUntil), 0)}
	if err := b.writeShard(ctx, mv.to, sk, data, opts); err != nil {
		return 0, 0, err
	}
	sum := t.entry.Sum
	if c.K > 1 {
		sum = block.Checksum(data)
	}
	return int64(len(data)), sum, nil
}

// byteLimiter spaces out transfers so that their bytes stay within rate
// per second: each reservation starts when the previous ones' bytes have
// had their time.
type byteLimiter struct {
	mu   sync.Mutex
	rate float64 // bytes per second
	next time.Time
	now  func() time.Time
}

func newByteLimiter(rate int64) *byteLimiter {
	return &byteLimiter{rate: float64(rate), now: time.Now}
}

// reserve books n bytes and returns how long to wait before sending them.
func (l *byteLimiter) reserve(n int) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if l.next.Before(now) {
		l.next = now
	}
	wait := l.next.Sub(now)
	l.next = l.next.Add(time.Duration(float64(n) / l.rate * float64(time.Second)))
	return wait
}
