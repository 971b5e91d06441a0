package clusterapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster"
	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// drainState is what the fake drainers of one test cluster share: the
// shards "the index" places on each member, and whether drains stall.
type drainState struct {
	mu      sync.Mutex
	held    map[string]int
	stalled bool
	passes  int
}

func (s *drainState) set(id string, shards int) {
	s.mu.Lock()
	s.held[id] = shards
	s.mu.Unlock()
}

// fakeDrainer commits the draining state through Raft as the real backend
// does, and reports holdings from drainState.
type fakeDrainer struct {
	node *raft.Node
	st   *drainState
}

var _ Drainer = (*fakeDrainer)(nil)

func (d *fakeDrainer) Drain(ctx context.Context, id string) (cluster.DrainStatus, error) {
	if _, ok := d.node.FSM().Member(id); !ok {
		return cluster.DrainStatus{}, fmt.Errorf("%w: no member %q", block.ErrNotFound, id)
	}
	if err := d.node.SetMemberState(ctx, id, fsm.MemberDraining); err != nil {
		return cluster.DrainStatus{}, err
	}
	shards, blocks := d.Holding(id)
	return cluster.DrainStatus{ID: id, ShardsLeft: shards, BlocksLeft: blocks, Done: shards == 0, Active: true}, nil
}

func (d *fakeDrainer) CancelDrain(ctx context.Context, id string) error {
	return d.node.SetMemberState(ctx, id, fsm.MemberAlive)
}

func (d *fakeDrainer) Holding(id string) (int, int) {
	d.st.mu.Lock()
	defer d.st.mu.Unlock()
	return d.st.held[id], d.st.held[id]
}

func (d *fakeDrainer) Drains() []cluster.DrainStatus {
	var out []cluster.DrainStatus
	for _, m := range d.node.FSM().Members() {
		if m.State != fsm.MemberDraining {
			continue
		}
		shards, blocks := d.Holding(m.ID)
		ds := cluster.DrainStatus{ID: m.ID, ShardsLeft: shards, BlocksLeft: blocks, Done: shards == 0, Active: d.node.IsLeader()}
		d.st.mu.Lock()
		if ds.Active && d.st.stalled && shards > 0 {
			d.st.passes++
			ds.Stalled, ds.Stuck, ds.Unreachable, ds.LastPass = true, blocks, true, time.Unix(int64(d.st.passes), 0)
		}
		d.st.mu.Unlock()
		out = append(out, ds)
	}
	return out
}

func TestDrainThroughFollowers(t *testing.T) {
	st := &drainState{held: map[string]int{"n3": 5, "n2": 3}}
	c := newClusterWith(t, 3, st)
	ctx := withTimeoutCtx(t, 30*time.Second)
	c.WaitLeader()
	f := c.Follower()
	cl := NewClient(f.Addr())

	// A member that holds shards is not removed without a drain or --force.
	err := cl.Remove(ctx, "n3")
	if !errors.Is(err, block.ErrInvalidArgument) || !strings.Contains(err.Error(), "n3 still holds 5 shards") {
		t.Fatalf("remove of a member holding shards: %v", err)
	}
	resp, err := cl.Drain(ctx, "n3")
	if err != nil {
		t.Fatal(err)
	}
	if resp.ID != "n3" || resp.State != "draining" || resp.Drain == nil || resp.Drain.ShardsLeft != 5 {
		t.Fatalf("drain reply %+v", resp)
	}
	for _, tn := range c.Nodes {
		c.Eventually(tn.ID+" reports the drain", func() bool {
			s, err := NewClient(tn.Addr()).Status(ctx)
			return err == nil && strings.Contains(memberIDs(s.Members), "n3/draining/voter=true") &&
				len(s.Drains) == 1 && s.Drains[0].ID == "n3" && s.Drains[0].ShardsLeft == 5 && s.Drains[0].Active == tn.Raft.IsLeader()
		})
	}
	// WaitDrained follows the leader's status until nothing is left.
	var mu sync.Mutex
	var seen []int
	waited := make(chan error, 1)
	go func() {
		waited <- cl.WaitDrained(ctx, []string{"n3"}, 10*time.Millisecond, func(d cluster.DrainStatus) {
			mu.Lock()
			seen = append(seen, d.ShardsLeft)
			mu.Unlock()
		})
	}()
	c.Eventually("progress reported", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) > 0
	})
	st.set("n3", 0)
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	if seen[0] != 5 || seen[len(seen)-1] != 0 {
		t.Errorf("progress %v", seen)
	}
	if err := cl.Remove(ctx, "n3"); err != nil {
		t.Fatalf("remove after the drain: %v", err)
	}

	// A drain that stalls fails the wait; a cancelled one is not waited for.
	st.mu.Lock()
	st.stalled = true
	st.mu.Unlock()
	if _, err := cl.Drain(ctx, "n2"); err != nil {
		t.Fatal(err)
	}
	err = cl.WaitDrained(ctx, []string{"n2"}, 10*time.Millisecond, nil)
	if !errors.Is(err, ErrDrainStalled) || !errors.Is(err, block.ErrUnavailable) || !strings.Contains(err.Error(), "n2 does not answer") {
		t.Fatalf("stalled drain: %v", err)
	}
	if err := cl.CancelDrain(ctx, "n2"); err != nil {
		t.Fatal(err)
	}
	c.Eventually("n2 alive again", func() bool {
		m, _ := c.WaitLeader().Raft.FSM().Member("n2")
		return m.State == fsm.MemberAlive
	})
	if err := cl.WaitDrained(ctx, []string{"n2"}, 10*time.Millisecond, nil); !errors.Is(err, block.ErrInvalidArgument) || !strings.Contains(err.Error(), "not draining") {
		t.Fatalf("wait for a cancelled drain: %v", err)
	}
	// --force removes it anyway.
	if err := cl.ForceRemove(ctx, "n2"); err != nil {
		t.Fatalf("forced remove: %v", err)
	}
	c.Eventually("n2 left", func() bool {
		m, _ := c.WaitLeader().Raft.FSM().Member("n2")
		return m.State == fsm.MemberLeft
	})
	if _, err := cl.Drain(ctx, ""); !errors.Is(err, block.ErrInvalidArgument) {
		t.Errorf("drain without id: %v", err)
	}
	if _, err := cl.Drain(ctx, "ghost"); !errors.Is(err, block.ErrNotFound) {
		t.Errorf("drain of an unknown member: %v", err)
	}
}

func withTimeoutCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
