package cluster

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// detector is the failure detector. Only the leader probes: it marks a
// member suspect (out of placement for new puts) after SuspectAfter without
// an answer, dead (its shards get repaired) after DeadAfter, and alive again
// as soon as it answers. A draining member keeps its state; only whether
// it answers is noted (in the drain book). It holds no state of its own
// but the time each member last answered, which only its goroutine
// touches.
type detector struct {
	cfg   Config
	node  *raft.Node
	peers Peers
	drain *drainBook
	log   *slog.Logger
	met   *metrics
	// changed is called when a member's state or reachability changed:
	// repair looks again.
	changed func()
}

// run probes every ProbeInterval while this node leads, until stop closes.
func (d *detector) run(stop <-chan struct{}) {
	t := time.NewTicker(d.cfg.ProbeInterval)
	defer t.Stop()
	lastOK := map[string]time.Time{}
	wasLeader := false
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if !d.node.IsLeader() {
			wasLeader = false
			continue
		}
		now := time.Now()
		if !wasLeader {
			// A new leader gives everyone a fresh grace period.
			wasLeader = true
			clear(lastOK)
		}
		d.probeAll(now, lastOK)
	}
}

// probeAll asks every member (but this node and those that left) whether
// it is healthy, and commits the state changes the answers call for.
func (d *detector) probeAll(now time.Time, lastOK map[string]time.Time) {
	var ms []fsm.Member
	for _, m := range d.node.FSM().Members() {
		if m.ID == d.cfg.NodeID || m.State == fsm.MemberLeft {
			continue
		}
		if _, ok := lastOK[m.ID]; !ok {
			lastOK[m.ID] = now
		}
		ms = append(ms, m)
	}
	ok := make([]bool, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), d.cfg.ProbeTimeout)
			defer cancel()
			ok[i] = d.peers.Healthy(ctx, m) == nil
		}()
	}
	wg.Wait()
	for i, m := range ms {
		if m.State == fsm.MemberDraining {
			// A draining member keeps its state whatever its health (the
			// drain must go on when it comes back); the leader only notes
			// whether it answers, so repair reads from it while it does and
			// rebuilds its shards from the other holders while it does not.
			if ok[i] {
				lastOK[m.ID] = time.Now()
			} else if now.Sub(lastOK[m.ID]) < d.cfg.suspectAfter() {
				continue // not silent for long enough to tell
			}
			if d.drain.setUnreachable(m.ID, !ok[i]) {
				d.log.Info("draining member reachability changed", "member", m.ID, "unreachable", !ok[i])
				d.changed()
			}
			continue
		}
		want := m.State
		if ok[i] {
			lastOK[m.ID] = time.Now()
			want = fsm.MemberAlive
		} else {
			switch silent := now.Sub(lastOK[m.ID]); {
			case silent >= d.cfg.DeadAfter:
				want = fsm.MemberDead
			case silent >= d.cfg.suspectAfter() && m.State == fsm.MemberAlive:
				want = fsm.MemberSuspect
			}
		}
		if want == m.State {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), d.cfg.ProposeTimeout)
		err := d.node.SetMemberState(ctx, m.ID, want)
		cancel()
		if err != nil {
			d.log.Warn("member state change failed", "member", m.ID, "state", want.String(), "err", err)
			continue
		}
		d.met.memberChanges.WithLabelValues(want.String()).Inc()
		d.log.Info("member state changed", "member", m.ID, "from", m.State.String(), "to", want.String())
		d.changed()
	}
}

// kickRepair makes the repair loop scan now.
func (b *Backend) kickRepair() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}
