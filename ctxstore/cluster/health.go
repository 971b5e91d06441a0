package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/ctxtier/ctxtier/raft/fsm"
)

// detectLoop is the failure detector. Only the leader probes: it marks a
// member suspect (out of placement for new puts) after SuspectAfter without
// an answer, dead (its shards get repaired) after DeadAfter, and alive again
// as soon as it answers. A draining member keeps its state; only whether
// it answers is noted.
func (b *Backend) detectLoop() {
	defer b.wg.Done()
	t := time.NewTicker(b.cfg.ProbeInterval)
	defer t.Stop()
	lastOK := map[string]time.Time{}
	wasLeader := false
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		}
		if !b.node.IsLeader() {
			wasLeader = false
			continue
		}
		now := time.Now()
		if !wasLeader {
			// A new leader gives everyone a fresh grace period.
			wasLeader = true
			clear(lastOK)
		}
		b.probeAll(now, lastOK)
	}
}

func (b *Backend) probeAll(now time.Time, lastOK map[string]time.Time) {
	var ms []fsm.Member
	for _, m := range b.node.FSM().Members() {
		if m.ID == b.cfg.NodeID || m.State == fsm.MemberLeft {
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
			ctx, cancel := context.WithTimeout(context.Background(), b.cfg.ProbeTimeout)
			defer cancel()
			ok[i] = b.peers.Healthy(ctx, m) == nil
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
			} else if now.Sub(lastOK[m.ID]) < b.cfg.suspectAfter() {
				continue // not silent for long enough to tell
			}
			if b.setUnreachable(m.ID, !ok[i]) {
				b.log.Info("draining member reachability changed", "member", m.ID, "unreachable", !ok[i])
				b.kickRepair()
			}
			continue
		}
		want := m.State
		if ok[i] {
			lastOK[m.ID] = time.Now()
			want = fsm.MemberAlive
		} else {
			switch silent := now.Sub(lastOK[m.ID]); {
			case silent >= b.cfg.DeadAfter:
				want = fsm.MemberDead
			case silent >= b.cfg.suspectAfter() && m.State == fsm.MemberAlive:
				want = fsm.MemberSuspect
			}
		}
		if want == m.State {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), b.cfg.ProposeTimeout)
		err := b.node.SetMemberState(ctx, m.ID, want)
		cancel()
		if err != nil {
			b.log.Warn("member state change failed", "member", m.ID, "state", want.String(), "err", err)
			continue
		}
		b.met.memberChanges.WithLabelValues(want.String()).Inc()
		b.log.Info("member state changed", "member", m.ID, "from", m.State.String(), "to", want.String())
		b.kickRepair()
	}
}

func (b *Backend) kickRepair() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}
