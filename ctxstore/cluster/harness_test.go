package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/raft/fsm"
	"github.com/ctxtier/ctxtier/tiers"
	"github.com/ctxtier/ctxtier/tiers/dram"
)

func testLog() *slog.Logger {
	if os.Getenv("CLUSTER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// fakePeers routes shard calls straight to the members' tier stacks; a
// member in down answers nothing.
type fakePeers struct {
	mu    sync.Mutex
	tiers map[string]*tiers.Manager
	down  map[string]bool
	// stalled members answer shard reads only when the caller gives up (a
	// partitioned peer whose connection has not failed yet).
	stalled map[string]bool
	// full members refuse shard writes with block.ErrNoSpace (a full disk).
	full map[string]bool
	// gates hold shard writes to a member until the channel is closed (a
	// live member that is slow to take its shard).
	gates map[string]chan struct{}
	// gated counts the writes held at a gate now; gatedMax the most at once.
	gated, gatedMax int
	calls           int
	// puts counts PutShard requests by member, batches PutShards requests
	// and batched the shards those carried.
	puts, batches, batched map[string]int
	// afterPut, when set, runs after each shard write that landed (outside
	// the lock): a test's hook between a write and its commit.
	afterPut func(id string, key block.Key)
	// beforeDelete, when set, runs before each shard delete reaches its
	// member (outside the lock): a test's hook inside a cleanup.
	beforeDelete func(id string, key block.Key)
	// beforeGet, when set, runs before each shard read reaches its member
	// (outside the lock): a test's hook inside a read.
	beforeGet func(id string, key block.Key)
	// addrs, where it names a member, is the only data address that member
	// answers at (a process that restarted on another port): a call to any
	// other address is refused. onStale, when set, runs (outside the lock)
	// before a shard write to such an address is refused.
	addrs   map[string]string
	onStale func(id string)
}

// gate holds every shard write to id until the returned func is called.
func (p *fakePeers) gate(id string) (open func()) {
	ch := make(chan struct{})
	p.mu.Lock()
	if p.gates == nil {
		p.gates = map[string]chan struct{}{}
	}
	p.gates[id] = ch
	p.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			delete(p.gates, id)
			p.mu.Unlock()
			close(ch)
		})
	}
}

func (p *fakePeers) tier(m fsm.Member) (*tiers.Manager, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if a, ok := p.addrs[m.ID]; ok && a != m.DataAddr {
		return nil, fmt.Errorf("%w: dial %s: connection refused (%s listens at %s now)", block.ErrUnavailable, m.DataAddr, m.ID, a)
	}
	if p.down[m.ID] {
		return nil, fmt.Errorf("%w: %s is down", block.ErrUnavailable, m.ID)
	}
	t, ok := p.tiers[m.ID]
	if !ok {
		return nil, fmt.Errorf("%w: no such member %s", block.ErrUnavailable, m.ID)
	}
	return t, nil
}

func (p *fakePeers) setDown(id string, down bool) {
	p.mu.Lock()
	p.down[id] = down
	p.mu.Unlock()
}

func (p *fakePeers) PutShard(ctx context.Context, m fsm.Member, key block.Key, data []byte, sum uint32, opts block.PutOptions) error {
	p.mu.Lock()
	if p.puts == nil {
		p.puts = map[string]int{}
	}
	p.puts[m.ID]++
	p.mu.Unlock()
	return p.putOne(ctx, m, key, data, sum, opts)
}

// PutShards is one request: each shard is stored (or refused) on its own,
// as the real transport's batch frame does.
func (p *fakePeers) PutShards(ctx context.Context, m fsm.Member, shards []ShardPut) []error {
	p.mu.Lock()
	if p.batches == nil {
		p.batches, p.batched = map[string]int{}, map[string]int{}
	}
	p.batches[m.ID]++
	p.batched[m.ID] += len(shards)
	p.mu.Unlock()
	errs := make([]error, len(shards))
	for i, s := range shards {
		errs[i] = p.putOne(ctx, m, s.Key, s.Data, s.Sum, s.Opts)
	}
	return errs
}

// requests returns copies of the put request counters.
func (p *fakePeers) requests() (puts, batches, batched map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.puts), maps.Clone(p.batches), maps.Clone(p.batched)
}

func (p *fakePeers) putOne(ctx context.Context, m fsm.Member, key block.Key, data []byte, sum uint32, opts block.PutOptions) error {
	p.mu.Lock()
	a, moved := p.addrs[m.ID]
	hook := p.onStale
	p.mu.Unlock()
	if moved && a != m.DataAddr && hook != nil {
		hook(m.ID)
	}
	t, err := p.tier(m)
	if err != nil {
		return err
	}
	p.mu.Lock()
	full, gate := p.full[m.ID], p.gates[m.ID]
	p.mu.Unlock()
	if gate != nil {
		p.mu.Lock()
		p.gated++
		p.gatedMax = max(p.gatedMax, p.gated)
		p.mu.Unlock()
		select {
		case <-gate:
		case <-ctx.Done():
		}
		p.mu.Lock()
		p.gated--
		p.mu.Unlock()
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if full {
		return fmt.Errorf("%w: %s: disk full", block.ErrNoSpace, m.ID)
	}
	if block.Checksum(data) != sum {
		return block.ErrChecksum
	}
	if err := t.Put(ctx, key, slices.Clone(data), sum, opts); err != nil {
		return err
	}
	p.mu.Lock()
	after := p.afterPut
	p.mu.Unlock()
	if after != nil {
		after(m.ID, key)
	}
	return nil
}

func (p *fakePeers) setStalled(id string, v bool) {
	p.mu.Lock()
	if p.stalled == nil {
		p.stalled = map[string]bool{}
	}
	p.stalled[id] = v
	p.mu.Unlock()
}

// GetShard returns the bytes with the CRC-32C of the bytes themselves, as
// the real client returns the sum it verified them against as they arrived
// (so a corrupted copy still fails the caller's comparison with the index).
func (p *fakePeers) GetShard(ctx context.Context, m fsm.Member, key block.Key, retain time.Duration) ([]byte, uint32, error) {
	p.mu.Lock()
	stalled, hook := p.stalled[m.ID], p.beforeGet
	p.mu.Unlock()
	if hook != nil {
		hook(m.ID, key)
	}
	if stalled {
		<-ctx.Done()
		return nil, 0, fmt.Errorf("%w: %s did not answer: %v", block.ErrUnavailable, m.ID, ctx.Err())
	}
	t, err := p.tier(m)
	if err != nil {
		return nil, 0, err
	}
	ref, err := t.Get(ctx, key, block.GetOptions{Retain: retain})
	if err != nil {
		return nil, 0, err
	}
	defer ref.Release()
	d := slices.Clone(ref.Data)
	return d, block.Checksum(d), nil
}

func (p *fakePeers) DeleteShard(ctx context.Context, m fsm.Member, key block.Key) error {
	p.runBeforeDelete(m.ID, key)
	t, err := p.tier(m)
	if err != nil {
		return err
	}
	return t.Delete(ctx, key)
}

func (p *fakePeers) DeleteShardIf(ctx context.Context, m fsm.Member, key block.Key, sum uint32) error {
	p.runBeforeDelete(m.ID, key)
	t, err := p.tier(m)
	if err != nil {
		return err
	}
	return ctxstore.DeleteTierIf(ctx, t, key, sum)
}

func (p *fakePeers) runBeforeDelete(id string, key block.Key) {
	p.mu.Lock()
	hook := p.beforeDelete
	p.mu.Unlock()
	if hook != nil {
		hook(id, key)
	}
}

func (p *fakePeers) PinShard(ctx context.Context, m fsm.Member, key block.Key, until time.Time) error {
	t, err := p.tier(m)
	if err != nil {
		return err
	}
	return t.Pin(ctx, key, until)
}

func (p *fakePeers) Healthy(_ context.Context, m fsm.Member) error {
	_, err := p.tier(m)
	return err
}

// fakeForwarder hands a follower's proposal to the leader's backend, as the
// HTTP forwarding endpoint does.
type fakeForwarder struct {
	mu       sync.Mutex
	backends map[string]*Backend
	n        int
	// refuse, when set, fails the requests it returns an error for (a
	// leader that cannot be reached for them).
	refuse func(req []byte) error
}

func (f *fakeForwarder) Forward(ctx context.Context, leader fsm.Member, req []byte) ([]byte, error) {
	f.mu.Lock()
	b := f.backends[leader.ID]
	f.n++
	refuse := f.refuse
	f.mu.Unlock()
	if refuse != nil {
		if err := refuse(req); err != nil {
			return nil, err
		}
	}
	if b == nil {
		return nil, fmt.Errorf("%w: no backend %s", block.ErrUnavailable, leader.ID)
	}
	return b.HandleForwarded(ctx, req)
}

type testNode struct {
	id      string
	cfg     Config
	node    *raft.Node
	tiers   *tiers.Manager
	backend *Backend
	store   *ctxstore.Store
}

type testCluster struct {
	t     *testing.T
	nodes []*testNode
	peers *fakePeers
	fwd   *fakeForwarder
	trans []*hraft.InmemTransport
	tweak func(*Config)
}

// newTestCluster starts n in-memory Raft nodes (the first bootstraps, the
// rest join), each with a DRAM-only tier stack and a Backend.
func newTestCluster(t *testing.T, n int, tweak func(*Config)) *testCluster {
	t.Helper()
	tc := &testCluster{t: t, peers: &fakePeers{tiers: map[string]*tiers.Manager{}, down: map[string]bool{}, full: map[string]bool{}}, fwd: &fakeForwarder{backends: map[string]*Backend{}}, tweak: tweak}
	for i := range n {
		tc.startNode(i == 0)
		if i == 0 {
			tc.eventually("first leader", tc.nodes[0].node.IsLeader)
		}
	}
	ctx := withTimeout(t, 10*time.Second)
	for _, tn := range tc.nodes[1:] {
		if err := tc.nodes[0].node.Join(ctx, tc.member(tn)); err != nil {
			t.Fatal(err)
		}
	}
	tc.t.Cleanup(tc.closeBackends)
	tc.eventually("every node sees every member, and has restored", func() bool {
		for _, tn := range tc.nodes {
			if len(tn.node.FSM().Members()) != n || !tn.backend.Restored() {
				return false
			}
		}
		return true
	})
	return tc
}

// startNode starts the next in-memory Raft node (n1, n2, ...) with a
// DRAM-only tier stack and a Backend; it is not a member until joined.
func (tc *testCluster) startNode(bootstrap bool) *testNode {
	t := tc.t
	t.Helper()
	id := fmt.Sprintf("n%d", len(tc.nodes)+1)
	rc := raft.DefaultConfig()
	rc.NodeID, rc.RaftAddr = id, id+":1"
	// Timeouts of 500 ms rather than 100 ms: on a loaded 2-core machine
	// under -race a 100 ms stall is common, and a spurious election moves
	// the leader that a test captured once.
	rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = 500*time.Millisecond, 500*time.Millisecond, 500*time.Millisecond
	rc.CommitTimeout, rc.ApplyTimeout = 5*time.Millisecond, 2*time.Second
	rc.Bootstrap = bootstrap
	rc.Self = fsm.Member{DataAddr: id + ":2", HTTPAddr: id + ":3", Zone: "z" + id, Capacity: 1 << 30}
	_, tr := hraft.NewInmemTransport(hraft.ServerAddress(rc.RaftAddr))
	for _, o := range tc.trans {
		tr.Connect(o.LocalAddr(), o)
		o.Connect(tr.LocalAddr(), tr)
	}
	tc.trans = append(tc.trans, tr)
	st := hraft.NewInmemStore()
	node, err := raft.OpenWith(context.Background(), rc, testLog(), nil, raft.Deps{Logs: st, Stable: st, Snapshots: hraft.NewInmemSnapshotStore(), Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	tn := &testNode{id: id, node: node}
	tc.newTiers(tn)
	cfg := DefaultConfig()
	cfg.NodeID = id
	cfg.ProbeInterval, cfg.ProbeTimeout = 50*time.Millisecond, 50*time.Millisecond
	cfg.DeadAfter, cfg.RepairInterval = 400*time.Millisecond, 100*time.Millisecond
	cfg.ShardTimeout, cfg.ProposeTimeout = 2*time.Second, 5*time.Second
	if tc.tweak != nil {
		tc.tweak(&cfg)
	}
	tn.cfg = cfg
	tc.newBackend(tn)
	tc.nodes = append(tc.nodes, tn)
	return tn
}

// closeBackends stops every node's background loops. Registered after the
// nodes start, it runs before their tier stacks close: a leader's repair or
// rebalancing must not delete a shard on a member whose tiers are closed.
func (tc *testCluster) closeBackends() {
	for _, tn := range tc.nodes {
		tn.backend.Close()
	}
}

// member is tn's member record, as a join sends it.
func (tc *testCluster) member(tn *testNode) fsm.Member {
	return fsm.Member{ID: tn.id, RaftAddr: tn.id + ":1", DataAddr: tn.id + ":2", HTTPAddr: tn.id + ":3", Zone: "z" + tn.id, Capacity: 1 << 30}
}

// addNode starts one more node, joins it through the leader and waits
// until every node sees it.
func (tc *testCluster) addNode() *testNode {
	tc.t.Helper()
	tn := tc.startNode(false)
	tc.t.Cleanup(tc.closeBackends)
	if err := tc.leader().node.Join(withTimeout(tc.t, 10*time.Second), tc.member(tn)); err != nil {
		tc.t.Fatal(err)
	}
	tc.eventually("every node sees the new member", func() bool {
		for _, o := range tc.nodes {
			if m, ok := o.node.FSM().Member(tn.id); !ok || m.State != fsm.MemberAlive {
				return false
			}
		}
		return true
	})
	return tn
}

// newTiers gives tn a fresh, empty DRAM-only tier stack, reachable by peers.
func (tc *testCluster) newTiers(tn *testNode) {
	tc.t.Helper()
	tc.newTiersOver(tn, nil)
}

// newTiersOver is newTiers with lower (nil: none) under the DRAM tier.
func (tc *testCluster) newTiersOver(tn *testNode, lower tiers.Lower) {
	tc.t.Helper()
	dc := dram.DefaultConfig()
	dc.Capacity = 8 << 20
	tcfg := tiers.DefaultConfig()
	tcfg.OnDrop = func(k block.Key) {
		if b := tn.backend; b != nil {
			b.Dropped(k)
		}
	}
	tm, err := tiers.New(tcfg, dc, lower, testLog())
	if err != nil {
		tc.t.Fatal(err)
	}
	tc.t.Cleanup(func() { tm.Close() })
	tn.tiers = tm
	tc.peers.mu.Lock()
	tc.peers.tiers[tn.id] = tm
	tc.peers.mu.Unlock()
}

// newBackend starts a Backend (and its Store) for tn over its tier stack.
func (tc *testCluster) newBackend(tn *testNode) {
	tc.t.Helper()
	b, err := New(tn.cfg, tn.node, tn.tiers, tc.peers, tc.fwd, testLog(), prometheus.NewRegistry())
	if err != nil {
		tc.t.Fatal(err)
	}
	tc.t.Cleanup(func() { b.Close() })
	tn.backend = b
	tc.fwd.mu.Lock()
	tc.fwd.backends[tn.id] = b
	tc.fwd.mu.Unlock()
	if tn.store, err = ctxstore.New(ctxstore.DefaultConfig(), tn.node.Catalog(), b, testLog()); err != nil {
		tc.t.Fatal(err)
	}
}

func withTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond for up to 30 s: generous, as under -race beside
// other test binaries on 2 cores an election or a repair pass can take
// several seconds; a healthy run meets every condition far sooner.
func (tc *testCluster) eventually(what string, cond func() bool) {
	tc.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	tc.t.Fatalf("timed out waiting for %s", what)
}

// leader returns the node that leads, waiting up to 30 s for one: under
// load a stalled heartbeat can start an election at any moment, and a
// test that asks in between must not fail for it.
func (tc *testCluster) leader() *testNode {
	tc.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, tn := range tc.nodes {
			if tn.node.IsLeader() {
				return tn
			}
		}
		if time.Now().After(deadline) {
			tc.t.Fatal("no leader")
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (tc *testCluster) follower() *testNode {
	for _, tn := range tc.nodes {
		if !tn.node.IsLeader() {
			return tn
		}
	}
	tc.t.Fatal("no follower")
	return nil
}

func (tc *testCluster) byID(id string) *testNode {
	for _, tn := range tc.nodes {
		if tn.id == id {
			return tn
		}
	}
	tc.t.Fatalf("no node %s", id)
	return nil
}

// createNS creates a namespace with code (k, m) and waits until every node has it.
func (tc *testCluster) createNS(name string, k, m int) {
	tc.t.Helper()
	ctx := withTimeout(tc.t, 20*time.Second)
	ns := block.Namespace{Name: name, DataShards: k, ParityShards: m}
	for try := 1; ; try++ {
		err := tc.leader().node.Catalog().CreateNamespace(ctx, ns)
		if err == nil || try > 1 && errors.Is(err, block.ErrNamespaceExists) {
			break // created, by this call or by an earlier one whose answer was lost
		}
		// Under load the leadership may move between looking the leader
		// up and the call: ask the new leader, as an operator would, a
		// few times.
		if !errors.Is(err, raft.ErrNotLeader) && !errors.Is(err, raft.ErrOutcomeUnknown) || try == 5 {
			tc.t.Fatal(err)
		}
		tc.t.Logf("creating namespace %s (try %d): %v; again", name, try, err)
		time.Sleep(100 * time.Millisecond)
	}
	tc.eventually("namespace everywhere", func() bool {
		for _, tn := range tc.nodes {
			if _, err := tn.node.FSM().Namespace(name); err != nil {
				return false
			}
		}
		return true
	})
}

// waitEntry waits until every node's index has key.
func (tc *testCluster) waitEntry(key block.Key) {
	tc.t.Helper()
	tc.eventually("entry everywhere", func() bool {
		for _, tn := range tc.nodes {
			if !tn.backend.Contains(key) {
				return false
			}
		}
		return true
	})
}

// waitSpread waits until every node's index places key's n shards on n
// distinct nodes.
func (tc *testCluster) waitSpread(key block.Key, n int) {
	tc.t.Helper()
	tc.eventually(fmt.Sprintf("%d shards on %d nodes, in every node's index", n, n), func() bool {
		for _, tn := range tc.nodes {
			e, ok := tn.node.FSM().Lookup(key)
			nodes := map[string]bool{}
			for _, s := range e.Placement {
				nodes[s.NodeID] = true
			}
			if !ok || len(e.Placement) != n || len(nodes) != n {
				return false
			}
		}
		return true
	})
}

// readsWithAnyOneDown takes each node down in turn and reads key through
// every other one.
func (tc *testCluster) readsWithAnyOneDown(key block.Key, want []byte) {
	tc.t.Helper()
	for _, gone := range tc.nodes {
		tc.peers.setDown(gone.id, true)
		for _, r := range tc.nodes {
			if r != gone {
				mustGet(tc.t, r.store, key, want)
			}
		}
		tc.peers.setDown(gone.id, false)
	}
}

func payload(seed, n int) []byte {
	b := make([]byte, n)
	x := uint32(seed*2654435761 + 1)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func mustGet(t *testing.T, s *ctxstore.Store, key block.Key, want []byte) {
	t.Helper()
	ref, err := s.Get(withTimeout(t, 5*time.Second), key)
	if err != nil {
		t.Fatalf("get %v: %v", key, err)
	}
	defer ref.Release()
	if string(ref.Data) != string(want) {
		t.Fatalf("get %v: wrong bytes (%d bytes, want %d)", key, len(ref.Data), len(want))
	}
}
