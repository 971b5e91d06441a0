package raft

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

func TestSingleNodeBootstrap(t *testing.T) {
	c := newCluster(t, 1, nil)
	n := c.nodes[0]
	ctx := context.Background()
	res, err := n.Propose(ctx, putOp(1, 10), putOp(2, 20))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Status != fsm.StatusCreated || res[1].Status != fsm.StatusCreated {
		t.Fatalf("results %+v", res)
	}
	f, err := n.Read(ctx, ReadLinearizable)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := f.Lookup(block.NewKey(block.DefaultNamespace, 2)); !ok || e.Sum != 20 || e.Generation != res[1].Generation {
		t.Fatalf("lookup %+v %v", e, ok)
	}
	eventually(t, "own member record", func() bool {
		m, ok := n.FSM().Member("n1")
		return ok && m.HTTPAddr == "n1:3" && m.State == fsm.MemberAlive
	})
	if m, ok := n.LeaderMember(); !ok || m.ID != "n1" {
		t.Fatalf("leader member %+v", m)
	}
	cat := n.Catalog()
	if err := cat.CreateNamespace(ctx, block.Namespace{Name: "t1", ParityShards: 2}); err != nil {
		t.Fatal(err)
	}
	if err := cat.CreateNamespace(ctx, block.Namespace{Name: "t1", Model: "x"}); !errors.Is(err, block.ErrNamespaceExists) {
		t.Fatalf("conflicting create: %v", err)
	}
	if ns, err := cat.Namespace("t1"); err != nil || ns.ParityShards != 2 {
		t.Fatalf("namespace %+v %v", ns, err)
	}
	if err := cat.DeleteNamespace(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	if len(cat.Namespaces()) != 1 {
		t.Fatalf("namespaces %v", cat.Namespaces())
	}
	blob, _ := fsm.HashSecret("pw")
	if err := n.PutCredential(ctx, fsm.Credential{AccessKeyID: "AK", Kind: fsm.SecretHashed, Secret: blob}); err != nil {
		t.Fatal(err)
	}
	if err := n.PutCredential(ctx, fsm.Credential{AccessKeyID: "AK", Secret: []byte("plaintext-plaintext")}); !errors.Is(err, block.ErrInvalidArgument) {
		t.Fatalf("plaintext credential: %v", err)
	}
	if _, ok := n.FSM().Credential("AK"); !ok {
		t.Fatal("credential missing")
	}
}

func TestClusterReplicatesAndForwardsHint(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.waitLeader()
	ctx := context.Background()
	var ops []fsm.Op
	for i := uint64(0); i < 100; i++ {
		ops = append(ops, putOp(i, uint32(i)))
	}
	if _, err := leader.Propose(ctx, ops...); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.nodes {
		eventually(t, n.ID()+" replicated", func() bool { return n.FSM().Len() == 100 && len(n.FSM().Members()) == 3 })
	}
	if s := leader.Servers(); len(s) != 3 {
		t.Fatalf("servers %+v", s)
	}
	for _, n := range c.nodes {
		if n == leader {
			continue
		}
		_, err := n.Propose(ctx, putOp(1000, 1))
		var nl *NotLeaderError
		if !errors.As(err, &nl) || nl.LeaderID != leader.ID() || !errors.Is(err, block.ErrUnavailable) {
			t.Fatalf("follower propose: %v", err)
		}
		if _, err := n.Read(ctx, ReadLinearizable); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("follower linearizable read: %v", err)
		}
		if f, err := n.Read(ctx, ReadLocal); err != nil || f.Len() != 100 {
			t.Fatalf("follower local read: %v", err)
		}
	}
}

func TestLeaderLossElectsNewLeader(t *testing.T) {
	c := newCluster(t, 3, nil)
	old := c.waitLeader()
	ctx := context.Background()
	if _, err := old.Propose(ctx, putOp(1, 1)); err != nil {
		t.Fatal(err)
	}
	var rest []*Node
	for _, n := range c.nodes {
		if n != old {
			rest = append(rest, n)
			eventually(t, "replication", func() bool { return n.FSM().Len() == 1 })
		}
	}
	start := time.Now()
	old.Close()
	nl := c.waitLeader(rest...)
	t.Logf("new leader %s after %v", nl.ID(), time.Since(start))
	res, err := nl.Propose(ctx, putOp(1, 1), putOp(2, 2))
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Status != fsm.StatusExisted || res[1].Status != fsm.StatusCreated {
		t.Fatalf("after failover: %+v", res)
	}
}

// A leader cut off from its followers loses leadership with a proposal in
// flight: the caller gets ErrOutcomeUnknown, retries on the new leader, and
// the retry is idempotent whether or not the first attempt committed.
func TestLeadershipLostRetryIdempotent(t *testing.T) {
	c := newCluster(t, 3, nil)
	old := c.waitLeader()
	ctx := context.Background()
	if _, err := old.Propose(ctx, putOp(1, 1)); err != nil {
		t.Fatal(err)
	}
	var rest []*Node
	for i, n := range c.nodes {
		if n == old {
			c.trans[i].DisconnectAll()
			continue
		}
		rest = append(rest, n)
		c.trans[i].Disconnect(old.deps.Transport.LocalAddr())
	}
	_, err := old.Propose(ctx, putOp(1, 1), putOp(7, 7))
	if !errors.Is(err, ErrOutcomeUnknown) && !errors.Is(err, ErrNotLeader) {
		t.Fatalf("partitioned leader: %v", err)
	}
	t.Logf("partitioned leader answered: %v", err)
	nl := c.waitLeader(rest...)
	var res []fsm.OpResult
	eventually(t, "retry on new leader", func() bool {
		res, err = nl.Propose(ctx, putOp(1, 1), putOp(7, 7))
		return err == nil
	})
	if res[0].Status != fsm.StatusExisted || (res[1].Status != fsm.StatusCreated && res[1].Status != fsm.StatusExisted) {
		t.Fatalf("retry: %+v", res)
	}
	res, err = nl.Propose(ctx, putOp(7, 7))
	if err != nil || res[0].Status != fsm.StatusExisted {
		t.Fatalf("second retry: %+v %v", res, err)
	}
	// Heal: the old leader rejoins as a follower and converges.
	for i := range c.trans {
		for j := range c.trans {
			if i != j {
				c.trans[i].Connect(c.trans[j].LocalAddr(), c.trans[j])
			}
		}
	}
	eventually(t, "old leader converges", func() bool {
		e, ok := old.FSM().Lookup(block.NewKey(block.DefaultNamespace, 7))
		return ok && e.Sum == 7 && old.FSM().Len() == 2
	})
}

// A node joining after the leader compacted its log catches up from a
// snapshot streamed over the transport.
func TestJoinerCatchesUpFromSnapshot(t *testing.T) {
	c := newCluster(t, 1, func(cfg *Config) { cfg.TrailingLogs = 1; cfg.SnapshotThreshold = 1 })
	leader := c.nodes[0]
	ctx := context.Background()
	for i := uint64(0); i < 5; i++ {
		if _, err := leader.Propose(ctx, putOp(i, uint32(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := leader.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	cfg := inmemConfig("n2")
	cfg.Bootstrap = false
	_, tr := hraft.NewInmemTransport(hraft.ServerAddress(cfg.RaftAddr))
	tr.Connect(c.trans[0].LocalAddr(), c.trans[0])
	c.trans[0].Connect(tr.LocalAddr(), tr)
	store := hraft.NewInmemStore()
	snaps := hraft.NewInmemSnapshotStore()
	n2, err := OpenWith(ctx, cfg, quietLog(), nil, Deps{Logs: store, Stable: store, Snapshots: snaps, Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close()
	if err := leader.Join(ctx, fsm.Member{ID: "n2", RaftAddr: cfg.RaftAddr}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "joiner restored", func() bool { return n2.FSM().Len() == 5 })
	if list, _ := snaps.List(); len(list) == 0 {
		t.Fatal("joiner did not receive a snapshot")
	}
}

func TestRemoveAndTransferLeadership(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.waitLeader()
	ctx := context.Background()
	var target string
	for _, n := range c.nodes {
		if n != leader {
			target = n.ID()
			break
		}
	}
	if err := leader.TransferLeadership(ctx, target); err != nil {
		t.Fatal(err)
	}
	var nl *Node
	for _, n := range c.nodes {
		if n.ID() == target {
			nl = n
		}
	}
	eventually(t, "transfer", nl.IsLeader)
	if err := nl.Remove(ctx, leader.ID()); err != nil {
		t.Fatal(err)
	}
	if len(nl.Servers()) != 2 {
		t.Fatalf("servers after remove: %+v", nl.Servers())
	}
	m, ok := nl.FSM().Member(leader.ID())
	if !ok || m.State != fsm.MemberLeft {
		t.Fatalf("removed member %+v", m)
	}
}

func TestMetricsRegistered(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := inmemConfig("m1")
	_, tr := hraft.NewInmemTransport(hraft.ServerAddress(cfg.RaftAddr))
	store := hraft.NewInmemStore()
	n, err := OpenWith(context.Background(), cfg, quietLog(), reg, Deps{Logs: store, Stable: store, Snapshots: hraft.NewInmemSnapshotStore(), Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	c := &cluster{t: t}
	c.waitLeader(n)
	if _, err := n.Propose(context.Background(), putOp(1, 1)); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range fams {
		names[f.GetName()] = true
	}
	for _, want := range []string{"ctxtier_raft_is_leader", "ctxtier_raft_batch_ops", "ctxtier_raft_index_ops_applied_total"} {
		if !names[want] {
			t.Errorf("missing %s", want)
		}
	}
	fromRaft := 0
	for name := range names {
		if len(name) > len("ctxtier_raft_") && name[:len("ctxtier_raft_")] == "ctxtier_raft_" && !map[string]bool{"ctxtier_raft_is_leader": true, "ctxtier_raft_batch_ops": true,
			"ctxtier_raft_index_ops_applied_total": true, "ctxtier_raft_proposed_ops_total": true, "ctxtier_raft_apply_errors_total": true}[name] {
			fromRaft++
		}
	}
	if fromRaft == 0 {
		t.Errorf("no hashicorp/raft metrics in the registry: %v", names)
	}
}

func TestCoalescerCoalesces(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	release := make(chan struct{})
	g := NewCoalescer(func() (uint64, error) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		<-release
		return uint64(n), nil
	})
	var wg sync.WaitGroup
	got := make([]uint64, 20)
	// Caller 0 starts run 1, which blocks; the other 19 arrive while it
	// runs, so they must all share run 2 (a run that started after they
	// called). No sleeps: the test waits until the Coalescer holds all 19.
	wg.Add(1)
	go func() { defer wg.Done(); got[0], _ = g.Do(context.Background()) }()
	waitUntil(t, "run 1 to start", func() bool { mu.Lock(); defer mu.Unlock(); return calls == 1 })
	for i := 1; i < len(got); i++ {
		wg.Add(1)
		go func() { defer wg.Done(); got[i], _ = g.Do(context.Background()) }()
	}
	waitUntil(t, "19 callers waiting for run 2", func() bool { return g.waiting() == 19 })
	close(release)
	wg.Wait()
	if calls != 2 {
		t.Fatalf("%d runs for 1 caller and then 19 concurrent callers, want 2", calls)
	}
	for i, v := range got {
		if want := uint64(min(i, 1) + 1); v != want {
			t.Fatalf("caller %d got run %d, want %d", i, v, want)
		}
	}
	// A caller that gives up gets ErrUnavailable; the run goes on.
	block1 := make(chan struct{})
	slow := NewCoalescer(func() (uint64, error) { <-block1; return 1, nil })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := slow.Do(ctx); !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("abandoned call: %v", err)
	}
	close(block1)
	if v, err := slow.Do(context.Background()); err != nil || v != 1 {
		t.Fatalf("next call: %d %v", v, err)
	}
}

// TestFollowerReadIndex is a linearizable read on a follower: the leader's
// ReadIndex, then the follower's WaitApplied. Each put the leader
// acknowledged is then in the follower's FSM, every time.
func TestFollowerReadIndex(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.waitLeader()
	ctx := context.Background()
	for i := uint64(1); i <= 50; i++ {
		if _, err := leader.Propose(ctx, putOp(i, uint32(i))); err != nil {
			t.Fatal(err)
		}
		for _, n := range c.nodes {
			if n == leader {
				continue
			}
			idx, err := leader.ReadIndex(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := n.WaitApplied(ctx, idx); err != nil {
				t.Fatal(err)
			}
			if _, ok := n.FSM().Lookup(block.NewKey(block.DefaultNamespace, i)); !ok {
				t.Fatalf("%s: put %d acknowledged by the leader is missing after WaitApplied(%d) (applied %d)", n.ID(), i, idx, n.FSM().AppliedIndex())
			}
		}
	}
	follower := c.nodes[0]
	if follower == leader {
		follower = c.nodes[1]
	}
	if _, err := follower.ReadIndex(ctx); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("follower ReadIndex: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := follower.WaitApplied(short, 1<<40); !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("waiting for an index never reached: %v", err)
	}
}

// waitUntil polls cond every millisecond for up to a minute (a generous
// bound: it only catches a hang).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
