package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/erasure"
	"github.com/ctxtier/ctxtier/ctxstore/placement"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// RepairStatus is the repair progress, for ctxctl and /v1/cluster/status.
type RepairStatus struct {
	// Active: this node is the leader and runs repair.
	Active bool `json:"active"`
	// Pending shards found by the last scan (on dead, removed, draining or
	// unknown members, or never written), plus the shards placed on members
	// still restoring after a restart (Restoring counts those alone).
	Pending   int `json:"pending"`
	Restoring int `json:"restoring"`
	// Unrepairable blocks of the last scan: too few survivors to rebuild, or
	// no member left to take a shard.
	Unrepairable   int    `json:"unrepairable"`
	RepairedShards uint64 `json:"repaired_shards"`
	RepairedBytes  uint64 `json:"repaired_bytes"`
	// LastScan is when the last scan began: Pending counts every entry
	// committed before then.
	LastScan      time.Time `json:"last_scan"`
	ScannedBlocks int       `json:"scanned_blocks"`
}

// repairBook is the leader's repair progress, under its own lock.
type repairBook struct {
	mu sync.Mutex
	st RepairStatus
}

// RepairStatus returns the repair progress.
func (b *Backend) RepairStatus() RepairStatus {
	b.repair.mu.Lock()
	s := b.repair.st
	b.repair.mu.Unlock()
	s.Active = b.node.IsLeader()
	return s
}

type repairTask struct {
	key     block.Key
	entry   fsm.Entry
	code    *erasure.Code
	healthy []fsm.Shard // placement entries on members that count
	leaving []fsm.Shard // placement entries on draining members: read, then dropped
	missing []int       // shard indexes to rebuild (or copy off a draining member)
	dups    []fsm.Shard // extra erasure shards on a node that holds another: replaced, then dropped
}

// repairResult is what repairOne did.
type repairResult struct {
	written int         // shards written to new holders
	bytes   int64       // their bytes
	dropped []fsm.Shard // entries on draining members taken out of the placement
	forgot  bool        // no holder had the block: its entry was deleted
}

// scanShare bounds the leader's time in periodic repair scans: after a
// scan that took d, the next periodic one waits until (scanShare-1) x d
// has passed, so scans take at most 1/scanShare of the leader's time
// however large the index. A wake-up (a member's state changed, a drain,
// a rebalancing page) scans at once.
const scanShare = 10

// scanDue reports whether a periodic repair scan is due at now, the last
// one having ended at last after taking took.
func scanDue(now, last time.Time, took time.Duration) bool {
	return !now.Before(last.Add((scanShare - 1) * took))
}

func (b *Backend) repairLoop() {
	defer b.wg.Done()
	t := time.NewTicker(b.cfg.RepairInterval)
	defer t.Stop()
	var last time.Time
	var took time.Duration
	more := false // a rebalancing page asked for the next one
	for {
		repair := true
		if more {
			// The next page at once; a repair pass first only when one
			// is due or asked for (a member's state change, a drain), so
			// that paging through a large index does not scan all of it
			// for repair between every two pages.
			select {
			case <-b.stop:
				return
			case <-b.wake:
			default:
				repair = scanDue(time.Now(), last, took)
			}
		} else {
			select {
			case <-b.stop:
				return
			case <-t.C:
				if !scanDue(time.Now(), last, took) {
					continue
				}
			case <-b.wake:
			}
		}
		if repair && b.node.IsLeader() {
			took = b.repairPass()
			last = time.Now()
		}
		// Rebalancing goes after repair, one page per turn.
		more = b.rebalancePage()
	}
}

// memberView returns the members by id and how many of them are alive or
// suspect (members that can still hold shards), for a repair or
// rebalancing scan.
func memberView(f *fsm.FSM) (map[string]fsm.Member, int) {
	ms := map[string]fsm.Member{}
	usable := 0
	for _, m := range f.Members() {
		ms[m.ID] = m
		if m.State == fsm.MemberAlive || m.State == fsm.MemberSuspect {
			usable++
		}
	}
	return ms, usable
}

// holderOK reports whether a member's shards count: alive and suspect
// members keep theirs (a suspect may come back); dead, left and unknown
// members do not.
func holderOK(ms map[string]fsm.Member, id string) bool {
	m, ok := ms[id]
	return ok && (m.State == fsm.MemberAlive || m.State == fsm.MemberSuspect)
}

// scan finds every entry whose redundancy is below its namespace's code,
// and every entry with a shard on a draining member. A draining member's
// shards do not count towards redundancy: the shards it holds are missing
// like a dead member's, except that they can still be read from it.
//
// It also counts the shards placed on members that restarted and are still
// restoring (restore.go): they are not rebuilt elsewhere (the member
// restores them itself), but they count as pending, so that an operator
// who waits for pending to reach 0 waits for the restore too.
func (b *Backend) scan() (tasks []repairTask, scanned, restoring int) {
	return scanIndex(b.node.FSM())
}

// scanIndex is scan over the index f.
func scanIndex(f *fsm.FSM) (tasks []repairTask, scanned, restoring int) {
	ms, usable := memberView(f)
	for _, ns := range f.Namespaces() {
		c, err := erasure.New(ns.DataShards, ns.ParityShards)
		if err != nil {
			continue
		}
		f.ScanReusing(ns.Name, func(k block.Key, e fsm.Entry) bool {
			scanned++
			if r, ok := wellPlaced(e.Placement, ms, c, usable); ok {
				restoring += r
				return true
			}
			e.Placement = slices.Clone(e.Placement) // the task keeps it
			t, r := checkPlacement(k, e, c, ms, usable)
			restoring += r
			if len(t.missing) > 0 || len(t.leaving) > 0 {
				tasks = append(tasks, t)
			}
			return true
		})
	}
	return tasks, scanned, restoring
}

// checkPlacement is scan's check of one entry: the repair task it needs (no
// missing or leaving shards: none) and how many of its shards are on
// restoring members.
func checkPlacement(k block.Key, e fsm.Entry, c *erasure.Code, ms map[string]fsm.Member, usable int) (t repairTask, restoring int) {
	t = repairTask{key: k, entry: e, code: c}
	have := map[int]bool{}
	nodes := map[string]bool{}
	for _, s := range e.Placement {
		if ms[s.NodeID].State == fsm.MemberDraining {
			t.leaving = append(t.leaving, s)
			continue
		}
		if !holderOK(ms, s.NodeID) {
			continue
		}
		if ms[s.NodeID].Restoring {
			restoring++
		}
		if c.K == 1 && nodes[s.NodeID] {
			continue // a second replica on one node is no redundancy
		}
		if nodes[s.NodeID] && usable >= c.N() {
			// A second erasure shard on one node (written while
			// fewer members were alive than the code has shards):
			// losing that node would lose both. Rebuild the shard
			// on another member and drop this entry.
			t.dups = append(t.dups, s)
			continue
		}
		t.healthy = append(t.healthy, s)
		have[int(s.Index)] = true
		nodes[s.NodeID] = true
	}
	if c.K == 1 {
		// Replicas are interchangeable: want min(n, usable members).
		for i := len(t.healthy); i < min(c.N(), usable); i++ {
			t.missing = append(t.missing, i)
		}
	} else {
		for i := range c.N() {
			if !have[i] {
				t.missing = append(t.missing, i)
			}
		}
	}
	return t, restoring
}

// wellPlaced reports whether checkPlacement would find nothing to do for an
// entry placed on p: every shard on an alive or suspect member that is
// not draining, on distinct members, and the code's shards all there (every
// index of an erasure code; min(n, usable) replicas). It also returns how
// many of those shards are on restoring members, as checkPlacement counts
// them. Where it answers false, checkPlacement decides. It allocates
// nothing: most entries of a large index are well placed, and the leader
// scans them all every RepairInterval.
func wellPlaced(p []fsm.Shard, ms map[string]fsm.Member, c *erasure.Code, usable int) (restoring int, ok bool) {
	var idx uint64 // erasure shard indexes seen (erasure.MaxShards <= 64)
	for i, s := range p {
		m, found := ms[s.NodeID]
		if !found || m.State != fsm.MemberAlive && m.State != fsm.MemberSuspect {
			return 0, false // draining, dead, left or unknown
		}
		for _, o := range p[:i] {
			if o.NodeID == s.NodeID {
				return 0, false // two shards on one member
			}
		}
		if m.Restoring {
			restoring++
		}
		if c.K > 1 {
			if int(s.Index) >= c.N() || idx&(1<<s.Index) != 0 {
				return 0, false
			}
			idx |= 1 << s.Index
		}
	}
	if c.K == 1 {
		return restoring, len(p) >= min(c.N(), usable)
	}
	return restoring, idx == 1<<c.N()-1
}

// repairPass scans the index and repairs what the scan found; it returns
// how long the scan took.
func (b *Backend) repairPass() (took time.Duration) {
	scanStart := time.Now()
	tasks, scanned, restoring := b.scan()
	took = time.Since(scanStart)
	b.met.lastScan.Set(float64(scanStart.UnixNano()) / 1e9)
	b.met.scanSeconds.Set(took.Seconds())
	pending := restoring
	for _, t := range tasks {
		pending += len(t.missing)
	}
	b.met.pending.Set(float64(pending))
	b.repair.mu.Lock()
	b.repair.st.Pending, b.repair.st.LastScan, b.repair.st.ScannedBlocks = pending, scanStart, scanned
	b.repair.st.Restoring = restoring
	b.repair.mu.Unlock()
	unrepairable := 0
	pass := drainPass{}
	for _, t := range tasks {
		select {
		case <-b.stop:
			return took
		default:
		}
		if !b.node.IsLeader() {
			return took
		}
		res, err := b.repairOne(t)
		if err != nil {
			unrepairable++
			b.log.Debug("repair failed", "key", t.key.String(), "err", err)
		}
		b.drain.noteDrained(pass, t, res)
		if n := res.written; n > 0 {
			b.met.repaired.Add(float64(n))
			b.met.repairBytes.Add(float64(res.bytes))
			b.met.pending.Sub(float64(n))
			b.repair.mu.Lock()
			b.repair.st.RepairedShards += uint64(n)
			b.repair.st.RepairedBytes += uint64(res.bytes)
			b.repair.st.Pending -= n
			b.repair.mu.Unlock()
			// Rate limit: bytes / RepairBytesPerSec.
			d := time.Duration(float64(res.bytes) / float64(b.cfg.RepairBytesPerSec) * float64(time.Second))
			select {
			case <-b.stop:
				return took
			case <-time.After(d):
			}
		}
	}
	b.repair.mu.Lock()
	b.repair.st.Unrepairable = unrepairable
	b.repair.mu.Unlock()
	b.drain.finishPass(b.node.FSM(), pass, b.log)
	return took
}

// repairOne rebuilds t's missing shards onto members that hold none of the
// block's shards (copying them off draining members where it can), commits
// the new placement, which leaves out the draining members' entries that
// were replaced, and then deletes those shards from the draining members.
func (b *Backend) repairOne(t repairTask) (res repairResult, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.ShardTimeout+b.cfg.ProposeTimeout)
	defer cancel()
	c := t.code
	// Before the first write: the FSM drops written shards on members that
	// restart after this (their copy went with the old process).
	began := time.Now()
	var written []fsm.Shard
	// The version the copies below are of: a cleanup deletes only those
	// bytes (cleanup.go).
	v := replicaVersion(c, t.entry.Sum)
	if len(t.missing) > 0 {
		exclude := map[string]bool{}
		for _, s := range append(slices.Clone(t.healthy), t.leaving...) {
			exclude[s.NodeID] = true
		}
		cands := b.candidates(exclude)
		if len(cands) == 0 {
			return res, fmt.Errorf("%w: no alive member without a shard of %s", block.ErrUnavailable, t.key)
		}
		targets, err := placement.Pick(t.key, cands, min(len(t.missing), len(cands)))
		if err != nil {
			return res, err
		}
		all, err := b.rebuild(ctx, t)
		if errors.Is(err, errBlockGone) {
			return b.forget(ctx, t)
		}
		if err != nil {
			return res, err
		}
		v = shardVersion(c, t.entry.Sum, all)
		for i, tg := range targets {
			idx := t.missing[i]
			opts := block.PutOptions{Sum: block.Checksum(all[idx]), HasSum: true, PinTTL: time.Until(t.entry.PinUntil)}
			if opts.PinTTL < 0 {
				opts.PinTTL = 0
			}
			if err := b.writeShard(ctx, tg.ID, shardKey(t.key, c, idx), all[idx], opts); err != nil {
				b.log.Debug("repair write failed", "key", t.key.String(), "node", tg.ID, "err", err)
				continue
			}
			written = append(written, fsm.Shard{NodeID: tg.ID, Index: uint16(idx)})
			res.bytes += int64(len(all[idx]))
		}
		if len(written) == 0 {
			return repairResult{}, fmt.Errorf("%w: every repair write of %s failed", block.ErrUnavailable, t.key)
		}
	}
	// The new placement: the healthy entries, the new ones, and the entries
	// on draining members that nothing replaced yet (a later pass retries).
	place := append(slices.Clone(t.healthy), written...)
	covered := map[uint16]bool{}
	for _, s := range place {
		covered[s.Index] = true
	}
	var drop []fsm.Shard
	for _, s := range t.leaving {
		replaced := covered[s.Index]
		if c.K == 1 {
			replaced = len(written) == len(t.missing) // replicas are interchangeable
		}
		if replaced {
			drop = append(drop, s)
		} else {
			place = append(place, s)
		}
	}
	if len(place) == 0 {
		b.cleanup(t.key, c, written, nil, v)
		return repairResult{}, fmt.Errorf("%w: no member left to hold %s", block.ErrUnavailable, t.key)
	}
	if c.K == 1 {
		for i := range place {
			place[i].Index = uint16(i)
		}
	}
	// A duplicate whose index was not rewritten stays (a later pass retries).
	var dupsGone []fsm.Shard
	for _, s := range t.dups {
		if slices.ContainsFunc(written, func(w fsm.Shard) bool { return w.Index == s.Index }) {
			dupsGone = append(dupsGone, s)
		} else {
			place = append(place, s)
		}
	}
	// Conditional on the placement scanned: a node that lost the lead while
	// it wrote must not overwrite what a newer leader committed meanwhile.
	st, cur, ok, err := b.commitMove(ctx, fsm.MovePlaceOp(t.key, t.entry.Sum, t.entry.Placement, place, began))
	if err != nil {
		return repairResult{}, err // outcome unknown: every copy stays
	}
	if st != fsm.StatusUpdated {
		// Refused: another writer may have put the same copies where this
		// one did (placement picks the same members); keep those it named.
		b.cleanup(t.key, c, written, cur.Placement, v)
		return repairResult{}, fmt.Errorf("%w: placement of %s not updated: %s", block.ErrUnavailable, t.key, st)
	}
	if !ok || !containsAll(cur.Placement, written, c.K == 1) {
		// The FSM dropped a written shard (its member restarted since the
		// write): the replaced copies stay on their members until a later
		// pass has rewritten it.
		b.log.Info("repair write dropped at commit: replaced copies kept", "key", t.key.String())
		return repairResult{}, fmt.Errorf("%w: a repair write of %s went to a restarted member", block.ErrUnavailable, t.key)
	}
	if c.K > 1 && len(t.missing) == 0 && len(drop)+len(dupsGone) > 0 {
		v = b.entryVersion(ctx, t.key, t.entry, c) // nothing was rebuilt
	}
	b.cleanup(t.key, c, b.drain.reachable(drop), nil, v)
	b.cleanup(t.key, c, dupsGone, nil, v)
	res.written, res.dropped = len(written), drop
	return res, nil
}

// commitMove commits op, a placement change planned from op.IfPlacement
// (fsm.MovePlaceOp), and reads its outcome back once caught up (catchUp).
// It returns the FSM's answer, Updated also for a commit whose answer was
// lost (with the leadership) when the caught-up entry has exactly
// op.Placement, and the entry as read then (ok false: none). err is set
// only when the outcome is unknown: the caller keeps every copy.
func (b *Backend) commitMove(ctx context.Context, op fsm.Op) (st fsm.Status, cur fsm.Entry, ok bool, err error) {
	r, err := b.propose(ctx, op)
	b.catchUp(ctx, map[block.Key][]fsm.Shard{op.Key: op.IfPlacement})
	cur, ok = b.node.FSM().Lookup(op.Key)
	if err != nil {
		if !ok || !slices.Equal(cur.Placement, op.Placement) {
			return 0, cur, ok, err
		}
		return fsm.StatusUpdated, cur, ok, nil
	}
	return r[0].Status, cur, ok, nil
}

// catchUp makes this node's index show the outcome of the placement changes
// it just proposed, each planned from the placement from names for its
// key (MovePlaceOp), before the writer reads them back. A leader that
// proposed them has applied them already. A node that lost the lead
// meanwhile forwarded them, and its own FSM applies a commit a moment
// after the answer. So while some entry still shows the placement it was
// planned from (its change, or the one it lost to, is not applied here
// yet, or the outcome is unknown), it catches up once through the
// leader's read index (SyncRead), with its own ProposeTimeout: the move's
// deadline may have passed, and a wrong reading keeps copies for good.
// Reading the entry before that took a committed move for a dropped one
// and kept the copies the index no longer named.
func (b *Backend) catchUp(ctx context.Context, from map[block.Key][]fsm.Shard) {
	f := b.node.FSM()
	for key, p := range from {
		if cur, ok := f.Lookup(key); ok && slices.Equal(cur.Placement, p) {
			if err := b.SyncRead(context.WithoutCancel(ctx)); err != nil {
				b.log.Debug("placement change: index not caught up", "key", key.String(), "err", err)
			}
			return
		}
	}
}

// errBlockGone: every holder of a block answered that it does not have it
// (capacity drops whose index correction was lost, or a member that
// restarted with an empty memory tier).
var errBlockGone = errors.New("cluster: block gone")

// forget deletes the index entry of a block no holder has any more, as a
// read that finds every replica gone would: the index must not promise it.
//
// Every holder answering NotFound is also what a move by another writer
// looks like once it deleted the copies it replaced (this node may have
// lost the lead mid-pass, or lead now with a pass planned from an older
// entry; a move keeps the generation). So the entry is given up only if,
// caught up with the leader, it still has the placement that was asked.
func (b *Backend) forget(ctx context.Context, t repairTask) (repairResult, error) {
	if err := b.SyncRead(ctx); err != nil {
		return repairResult{}, err
	}
	if cur, ok := b.node.FSM().Lookup(t.key); ok && !slices.Equal(cur.Placement, t.entry.Placement) {
		return repairResult{}, fmt.Errorf("%w: %s moved meanwhile: its new holders are asked next pass", block.ErrUnavailable, t.key)
	}
	r, err := b.propose(ctx, fsm.DeleteOp(t.key, t.entry.Generation))
	if err != nil {
		return repairResult{}, err
	}
	if r[0].Status != fsm.StatusDeleted {
		return repairResult{}, fmt.Errorf("%w: %s is gone, but its entry changed meanwhile: %s", block.ErrUnavailable, t.key, r[0].Status)
	}
	b.log.Warn("block lost: no holder has it; index entry deleted", "key", t.key.String(), "placement", fmt.Sprint(t.entry.Placement))
	return repairResult{dropped: t.leaving, forgot: true}, nil
}

// rebuild returns the block's shards, every index of t.missing filled:
// copies read from the draining members first (while they answer), else
// rebuilt from the other holders and verified against the block's CRC.
func (b *Backend) rebuild(ctx context.Context, t repairTask) ([][]byte, error) {
	c, size := t.code, int(t.entry.Size)
	all := make([][]byte, c.N())
	sources := b.drain.reachable(t.leaving)
	if c.K == 1 {
		var data []byte
		// Gone only if every placement entry's holder is asked and says so.
		gone := len(sources) == len(t.leaving) && len(t.healthy)+len(t.leaving) == len(t.entry.Placement)
		var said []string
		for _, s := range append(sources, b.reads.readOrder(t.healthy)...) {
			d, err := b.reads.fetch(ctx, s.NodeID, t.key, 0)
			if err == nil && int64(len(d)) == t.entry.Size && block.Checksum(d) == t.entry.Sum {
				data = d
				break
			}
			gone = gone && errors.Is(err, block.ErrNotFound)
			said = append(said, s.NodeID)
			b.noteReadFailure(s.NodeID, err)
		}
		// Each NotFound must come from the member itself, not from a stale
		// address (identity.go), before the entry is given up.
		if data == nil && gone && b.allVerified(ctx, said) {
			return nil, fmt.Errorf("%w: every holder of %s answered that it does not have it", errBlockGone, t.key)
		}
		if data == nil {
			return nil, fmt.Errorf("%w: no readable replica of %s", block.ErrUnavailable, t.key)
		}
		for i := range all {
			all[i] = data
		}
		return all, nil
	}
	// An erasure shard on a draining member is copied as it is (the peer
	// verifies it against the checksum stored with it); only what cannot be
	// copied is reconstructed.
	for _, s := range sources {
		if int(s.Index) >= c.N() {
			continue
		}
		d, err := b.reads.fetch(ctx, s.NodeID, shardKey(t.key, c, int(s.Index)), 0)
		if err == nil && len(d) == c.ShardSize(size) {
			all[s.Index] = d
			continue
		}
		b.noteReadFailure(s.NodeID, err)
	}
	copied := true
	for _, i := range t.missing {
		copied = copied && all[i] != nil
	}
	if copied {
		return all, nil
	}
	b.reads.fetchShards(ctx, t.key, c, t.healthy, all, size, 0)
	if _, ok := tryDecode(c, all, size, t.entry.Sum); !ok {
		// A surviving shard may be bad: decode by search, then re-encode.
		data, err := b.reads.getCoded(ctx, t.key, t.entry, c, 0)
		if err != nil {
			return nil, err
		}
		return c.Encode(data)
	}
	if err := c.Reconstruct(all, size); err != nil {
		return nil, err
	}
	return all, nil
}

// containsAll reports whether every shard of sub is in place; for
// replicas (anyIndex) a member holding any index will do, since repair
// renumbers them.
func containsAll(place, sub []fsm.Shard, anyIndex bool) bool {
	for _, s := range sub {
		if !slices.ContainsFunc(place, func(p fsm.Shard) bool {
			return p.NodeID == s.NodeID && (anyIndex || p.Index == s.Index)
		}) {
			return false
		}
	}
	return true
}
