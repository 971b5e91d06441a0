package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// A drain empties a member before it is removed. Drain marks the member
// draining in the index (fsm.MemberDraining): placement stops choosing it
// for new shards, and the leader's repair pass treats every shard it holds
// as missing but still readable. Repair copies each such shard from the
// draining member to the member placement picks now (reconstructing it from
// the other holders when the draining member does not answer), commits the
// new placement through Raft and deletes the copy left behind. The state is
// in Raft, so a drain survives leader changes and restarts: every pass
// starts again from the index. It shares repair's rate limit.

// DrainStatus is the progress of one draining member, for ctxctl and
// /v1/cluster/status.
type DrainStatus struct {
	ID string `json:"id"`
	// ShardsLeft and BlocksLeft count the placement entries (and their
	// blocks) that still name the member in this node's index; Namespaces
	// counts those blocks by namespace.
	ShardsLeft int            `json:"shards_left"`
	BlocksLeft int            `json:"blocks_left"`
	Namespaces map[string]int `json:"namespaces,omitempty"`
	// Done: the index places nothing on the member; removing it loses nothing.
	Done bool `json:"done"`
	// Active: this node is the leader, which runs the drain; the fields
	// below are its view and are zero elsewhere. The counters start at zero
	// on each new leader.
	Active      bool   `json:"active"`
	MovedShards uint64 `json:"moved_shards"`
	MovedBytes  uint64 `json:"moved_bytes"`
	// LostBlocks counts blocks that no holder had any more (a member that
	// restarted with an empty memory tier): their index entries were
	// deleted, as a read that finds every copy gone does.
	LostBlocks uint64 `json:"lost_blocks"`
	// Stuck counts the blocks the last complete pass could not move off the
	// member: no readable copy (a single copy on a member that does not
	// answer), or no member to take it.
	Stuck int `json:"stuck"`
	// Stalled: the last complete pass moved nothing off the member and
	// failed on some block. Waiting will not help unless the member (or
	// another holder) comes back.
	Stalled bool `json:"stalled"`
	// Unreachable: the member does not answer. Its shards are rebuilt from
	// the other holders where the namespace's parity allows.
	Unreachable bool      `json:"unreachable"`
	LastPass    time.Time `json:"last_pass,omitzero"`
}

// drainProgress is the leader's running account of one draining member.
type drainProgress struct {
	movedShards, movedBytes, lost uint64
	stuck                         int
	stalled                       bool
	lastPass                      time.Time
}

// drainPass counts, per draining member, the blocks one repair pass moved
// off it and those it could not.
type drainPass map[string]*struct{ moved, failed int }

// held is what the index places on one member.
type held struct {
	shards, blocks int
	ns             map[string]int
}

// heldCache is the last countHeld result behind Drains: recounted when the
// draining set changes, or at most once a second while the index changes.
type heldCache struct {
	ids     string
	applied uint64
	at      time.Time
	counts  map[string]*held
}

// drainBook is the leader's account of the draining members: each one's
// progress, the ones that do not answer (repair rebuilds their shards from
// the other holders), and the last count of what they hold. Its lock
// guards only its own fields and is never held across a transfer, a
// proposal or an FSM call.
type drainBook struct {
	mu sync.Mutex
	// drains is the leader's progress of each draining member.
	drains map[string]*drainProgress
	// unreachable holds the draining members that do not answer.
	unreachable map[string]bool
	held        heldCache
}

func newDrainBook() *drainBook {
	return &drainBook{drains: map[string]*drainProgress{}, unreachable: map[string]bool{}}
}

// Drain marks member id draining (on the leader). It refuses a member that
// left, and a drain that would leave fewer members to hold shards (alive
// or suspect, not draining) than some namespace stores per block (k+m). It
// returns what the member holds when the drain starts. Draining a member
// that is draining already changes nothing.
func (b *Backend) Drain(ctx context.Context, id string) (DrainStatus, error) {
	if !b.node.IsLeader() {
		return DrainStatus{}, raft.ErrNotLeader
	}
	f := b.node.FSM()
	m, ok := f.Member(id)
	if !ok {
		return DrainStatus{}, fmt.Errorf("%w: no member %q", block.ErrNotFound, id)
	}
	if m.State == fsm.MemberLeft {
		return DrainStatus{}, fmt.Errorf("%w: %s has left the cluster; there is nothing to drain", block.ErrInvalidArgument, id)
	}
	if m.State != fsm.MemberDraining {
		if err := checkDrain(f, id); err != nil {
			return DrainStatus{}, err
		}
	}
	// Count first: once the state commits, repair may start moving.
	h := countHeld(f, map[string]bool{id: true})[id]
	if m.State != fsm.MemberDraining {
		if err := b.node.SetMemberState(ctx, id, fsm.MemberDraining); err != nil {
			return DrainStatus{}, err
		}
		b.log.Info("member draining", "member", id, "from", m.State.String(), "shards", h.shards, "blocks", h.blocks)
		b.kickRepair()
	}
	return DrainStatus{ID: id, ShardsLeft: h.shards, BlocksLeft: h.blocks, Namespaces: h.ns, Done: h.shards == 0, Active: true}, nil
}

// checkDrain refuses to drain id when the members left to hold shards would
// be fewer than a namespace's k+m.
func checkDrain(f *fsm.FSM, id string) error {
	remaining := 0
	for _, m := range f.Members() {
		if m.ID != id && (m.State == fsm.MemberAlive || m.State == fsm.MemberSuspect) {
			remaining++
		}
	}
	for _, ns := range f.Namespaces() {
		if need := ns.DataShards + ns.ParityShards; remaining < need {
			return fmt.Errorf("%w: draining %s would leave %d member(s) to hold shards, but namespace %q stores %d shards per block (data_shards %d + parity_shards %d), each on its own member: add a member first",
				block.ErrInvalidArgument, id, remaining, ns.Name, need, ns.DataShards, ns.ParityShards)
		}
	}
	return nil
}

// CancelDrain makes a draining member alive again (on the leader). Shards
// already moved stay where they are.
func (b *Backend) CancelDrain(ctx context.Context, id string) error {
	if !b.node.IsLeader() {
		return raft.ErrNotLeader
	}
	m, ok := b.node.FSM().Member(id)
	if !ok {
		return fmt.Errorf("%w: no member %q", block.ErrNotFound, id)
	}
	if m.State != fsm.MemberDraining {
		return fmt.Errorf("%w: %s is %s, not draining", block.ErrInvalidArgument, id, m.State)
	}
	if err := b.node.SetMemberState(ctx, id, fsm.MemberAlive); err != nil {
		return err
	}
	b.drain.forget(id)
	b.log.Info("drain cancelled", "member", id)
	return nil
}

// Holding counts the shards, and the blocks, that the index places on
// member id (a full scan of the index).
func (b *Backend) Holding(id string) (shards, blocks int) {
	h := countHeld(b.node.FSM(), map[string]bool{id: true})[id]
	return h.shards, h.blocks
}

// Drains returns the progress of every draining member, sorted by id.
func (b *Backend) Drains() []DrainStatus {
	var ids []string
	for _, m := range b.node.FSM().Members() {
		if m.State == fsm.MemberDraining {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	counts := b.drain.cachedHeld(b.node.FSM(), ids)
	out := make([]DrainStatus, 0, len(ids))
	for _, id := range ids {
		h := counts[id]
		out = append(out, DrainStatus{ID: id, ShardsLeft: h.shards, BlocksLeft: h.blocks, Namespaces: h.ns, Done: h.shards == 0})
	}
	if b.node.IsLeader() {
		b.drain.fill(out)
	}
	return out
}

// forget drops the account of a member that no longer drains.
func (d *drainBook) forget(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.drains, id)
	delete(d.unreachable, id)
}

// fill adds the leader's view (progress, reachability) to each status and
// marks it active.
func (d *drainBook) fill(out []DrainStatus) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range out {
		s := &out[i]
		s.Active = true
		if p := d.drains[s.ID]; p != nil {
			s.MovedShards, s.MovedBytes, s.LostBlocks = p.movedShards, p.movedBytes, p.lost
			s.Stuck, s.Stalled, s.LastPass = p.stuck, p.stalled, p.lastPass
		}
		s.Unreachable = d.unreachable[s.ID]
	}
}

// cachedHeld is countHeld over ids, reusing the last count while the
// draining set is the same and the index has not changed (or changed less
// than a second ago).
func (d *drainBook) cachedHeld(f *fsm.FSM, ids []string) map[string]*held {
	key := strings.Join(ids, ",")
	applied := f.AppliedIndex()
	d.mu.Lock()
	c := d.held
	d.mu.Unlock()
	if c.counts != nil && c.ids == key && (c.applied == applied || time.Since(c.at) < time.Second) {
		return c.counts
	}
	set := map[string]bool{}
	for _, id := range ids {
		set[id] = true
	}
	counts := countHeld(f, set)
	d.mu.Lock()
	d.held = heldCache{ids: key, applied: applied, at: time.Now(), counts: counts}
	d.mu.Unlock()
	return counts
}

// countHeld scans the index for the placement entries on the given members.
func countHeld(f *fsm.FSM, ids map[string]bool) map[string]*held {
	out := make(map[string]*held, len(ids))
	for id := range ids {
		out[id] = &held{ns: map[string]int{}}
	}
	for _, ns := range f.Namespaces() {
		f.ScanReusing(ns.Name, func(_ block.Key, e fsm.Entry) bool {
			for i, s := range e.Placement {
				h := out[s.NodeID]
				if h == nil {
					continue
				}
				h.shards++
				if !slices.ContainsFunc(e.Placement[:i], func(x fsm.Shard) bool { return x.NodeID == s.NodeID }) {
					h.blocks++
					h.ns[ns.Name]++
				}
			}
			return true
		})
	}
	for _, h := range out {
		if len(h.ns) == 0 {
			h.ns = nil
		}
	}
	return out
}

// noteDrained books what repairOne did with t's shards on draining members.
func (d *drainBook) noteDrained(pass drainPass, t repairTask, res repairResult) {
	if len(t.leaving) == 0 {
		return
	}
	count := func(place []fsm.Shard, id string) int {
		n := 0
		for _, s := range place {
			if s.NodeID == id {
				n++
			}
		}
		return n
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	done := map[string]bool{}
	for _, s := range t.leaving {
		id := s.NodeID
		if done[id] {
			continue
		}
		done[id] = true
		pc := pass[id]
		if pc == nil {
			pc = &struct{ moved, failed int }{}
			pass[id] = pc
		}
		dropped := count(res.dropped, id)
		if dropped == count(t.leaving, id) {
			pc.moved++
		} else {
			pc.failed++
		}
		if res.forgot {
			d.progress(id).lost++
		} else if dropped > 0 {
			p := d.progress(id)
			p.movedShards += uint64(dropped)
			p.movedBytes += uint64(res.bytes) * uint64(dropped) / uint64(len(res.dropped))
		}
	}
}

// finishPass records the outcome of a complete repair pass for every
// draining member of f and forgets members that no longer drain.
func (d *drainBook) finishPass(f *fsm.FSM, pass drainPass, log *slog.Logger) {
	draining := map[string]bool{}
	for _, m := range f.Members() {
		if m.State == fsm.MemberDraining {
			draining[m.ID] = true
		}
	}
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	for id := range d.drains {
		if !draining[id] {
			delete(d.drains, id)
		}
	}
	for id := range d.unreachable {
		if !draining[id] {
			delete(d.unreachable, id)
		}
	}
	for id := range draining {
		p := d.progress(id)
		p.stuck, p.stalled, p.lastPass = 0, false, now
		if pc := pass[id]; pc != nil {
			p.stuck, p.stalled = pc.failed, pc.failed > 0 && pc.moved == 0
		}
		if p.stalled {
			log.Warn("drain stalled: blocks on the draining member cannot be moved", "member", id, "blocks", p.stuck, "unreachable", d.unreachable[id])
		}
	}
}

// progress returns id's account, creating it; d.mu must be held.
func (d *drainBook) progress(id string) *drainProgress {
	p := d.drains[id]
	if p == nil {
		p = &drainProgress{}
		d.drains[id] = p
	}
	return p
}

// reachable leaves out the entries on draining members that do not answer.
func (d *drainBook) reachable(place []fsm.Shard) []fsm.Shard {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []fsm.Shard
	for _, s := range place {
		if !d.unreachable[s.NodeID] {
			out = append(out, s)
		}
	}
	return out
}

// setUnreachable records whether a draining member answers; it reports a change.
func (d *drainBook) setUnreachable(id string, down bool) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.unreachable[id] == down {
		return false
	}
	if down {
		d.unreachable[id] = true
	} else {
		delete(d.unreachable, id)
	}
	return true
}

// noteReadFailure marks a draining member unreachable when reading from it
// failed for want of an answer, so the rest of the pass rebuilds its shards
// from the other holders instead of waiting on it block after block. The
// failure detector clears the mark when the member answers a probe.
func (b *Backend) noteReadFailure(id string, err error) {
	if err == nil || errors.Is(err, block.ErrNotFound) || id == b.cfg.NodeID {
		return
	}
	if !errors.Is(err, block.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) {
		return
	}
	if m, ok := b.node.FSM().Member(id); !ok || m.State != fsm.MemberDraining {
		return
	}
	if b.drain.setUnreachable(id, true) {
		b.log.Warn("draining member does not answer; rebuilding its shards from the other holders", "member", id, "err", err)
	}
}
