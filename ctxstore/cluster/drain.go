package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
		if err := b.checkDrain(f, id); err != nil {
			return DrainStatus{}, err
		}
	}
	// Count first: once the state commits, repair may start moving.
	h := b.countHeld(map[string]bool{id: true})[id]
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
func (b *Backend) checkDrain(f *fsm.FSM, id string) error {
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
	b.drainMu.Lock()
	delete(b.drains, id)
	delete(b.unreachable, id)
	b.drainMu.Unlock()
	b.log.Info("drain cancelled", "member", id)
	return nil
}

// Holding counts the shards, and the blocks, that the index places on
// member id (a full scan of the index).
func (b *Backend) Holding(id string) (shards, blocks int) {
	h := b.countHeld(map[string]bool{id: true})[id]
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
	counts := b.cachedHeld(ids)
	leader := b.node.IsLeader()
	b.drainMu.Lock()
	defer b.drainMu.Unlock()
	out := make([]DrainStatus, 0, len(ids))
	for _, id := range ids {
		h := counts[id]
		d := DrainStatus{ID: id, ShardsLeft: h.shards, BlocksLeft: h.blocks, Namespaces: h.ns, Done: h.shards == 0, Active: leader}
		if leader {
			if p := b.drains[id]; p != nil {
				d.MovedShards, d.MovedBytes, d.LostBlocks = p.movedShards, p.movedBytes, p.lost
				d.Stuck, d.Stalled, d.LastPass = p.stuck, p.stalled, p.lastPass
			}
			d.Unreachable = b.unreachable[id]
		}
		out = append(out, d)
	}
	return out
}

func (b *Backend) cachedHeld(ids []string) map[string]*held {
	key := strings.Join(ids, ",")
	applied := b.node.FSM().AppliedIndex()
	b.drainMu.Lock()
	c := b.heldCache
	b.drainMu.Unlock()
	if c.counts != nil && c.ids == key && (c.applied == applied || time.Since(c.at) < time.Second) {
		return c.counts
	}
	set := map[string]bool{}
	for _, id := range ids {
		set[id] = true
	}
	counts := b.countHeld(set)
	b.drainMu.Lock()
	b.heldCache = heldCache{ids: key, applied: applied, at: time.Now(), counts: counts}
	b.drainMu.Unlock()
	return counts
}

// countHeld scans the index for the placement entries on the given members.
func (b *Backend) countHeld(ids map[string]bool) map[string]*held {
	out := make(map[string]*held, len(ids))
	for id := range ids {
		out[id] = &held{ns: map[string]int{}}
	}
	f := b.node.FSM()
	for _, ns := range f.Namespaces() {
		_ = f.Scan(ns.Name, "", func(_ block.Key, e fsm.Entry) bool {
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
func (b *Backend) noteDrained(pass drainPass, t repairTask, res repairResult) {
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
	b.drainMu.Lock()
	defer b.drainMu.Unlock()
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
			b.progress(id).lost++
		} else if dropped > 0 {
			p := b.progress(id)
			p.movedShards += uint64(dropped)
			p.movedBytes += uint64(res.bytes) * uint64(dropped) / uint64(len(res.dropped))
		}
	}
}

// finishDrainPass records the outcome of a complete repair pass for every
// draining member and forgets members that no longer drain.
func (b *Backend) finishDrainPass(pass drainPass) {
	draining := map[string]bool{}
	for _, m := range b.node.FSM().Members() {
		if m.State == fsm.MemberDraining {
			draining[m.ID] = true
		}
	}
	now := time.Now()
	b.drainMu.Lock()
	defer b.drainMu.Unlock()
	for id := range b.drains {
		if !draining[id] {
			delete(b.drains, id)
		}
	}
	for id := range b.unreachable {
		if !draining[id] {
			delete(b.unreachable, id)
		}
	}
	for id := range draining {
		p := b.progress(id)
		p.stuck, p.stalled, p.lastPass = 0, false, now
		if pc := pass[id]; pc != nil {
			p.stuck, p.stalled = pc.failed, pc.failed > 0 && pc.moved == 0
		}
		if p.stalled {
			b.log.Warn("drain stalled: blocks on the draining member cannot be moved", "member", id, "blocks", p.stuck, "unreachable", b.unreachable[id])
		}
	}
}

// progress returns id's account, creating it; drainMu must be held.
func (b *Backend) progress(id string) *drainProgress {
	p := b.drains[id]
	if p == nil {
		p = &drainProgress{}
		b.drains[id] = p
	}
	return p
}

// reachable leaves out the entries on draining members that do not answer.
func (b *Backend) reachable(place []fsm.Shard) []fsm.Shard {
	b.drainMu.Lock()
	defer b.drainMu.Unlock()
	var out []fsm.Shard
	for _, s := range place {
		if !b.unreachable[s.NodeID] {
			out = append(out, s)
		}
	}
	return out
}

// setUnreachable records whether a draining member answers; it reports a change.
func (b *Backend) setUnreachable(id string, down bool) bool {
	b.drainMu.Lock()
	defer b.drainMu.Unlock()
	if b.unreachable[id] == down {
		return false
	}
	if down {
		b.unreachable[id] = true
	} else {
		delete(b.unreachable, id)
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
	if b.setUnreachable(id, true) {
		b.log.Warn("draining member does not answer; rebuilding its shards from the other holders", "member", id, "err", err)
	}
}
