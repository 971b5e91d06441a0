package cluster

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/erasure"
	"github.com/ctxtier/ctxtier/ctxstore/placement"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// rebalanceOf is the leader's rebalancing status (zero while no leader).
func (tc *testCluster) rebalanceOf() RebalanceStatus {
	for _, tn := range tc.nodes {
		if tn.node.IsLeader() {
			return tn.backend.RebalanceStatus()
		}
	}
	return RebalanceStatus{}
}

// wantNodes is the sorted set of members placement.Pick chooses for key
// among the alive members (as tn's index sees them).
func wantNodes(t *testing.T, tn *testNode, key block.Key) []string {
	t.Helper()
	c, err := tn.backend.code(key.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	nodes := tn.backend.candidates(nil)
	picked, err := placement.Pick(key, nodes, min(c.N(), len(nodes)))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range picked {
		out = append(out, p.ID)
	}
	sort.Strings(out)
	return out
}

// waitFull waits until repair has given every block all its shards, on
// distinct members, in every node's index (a put's first shards may leave
// its placement, see fsm.HolderRestartMargin).
func (tc *testCluster) waitFull(blocks []testBlock) {
	tc.t.Helper()
	for _, b := range blocks {
		c, err := tc.nodes[0].backend.code(b.key.Namespace)
		if err != nil {
			tc.t.Fatal(err)
		}
		tc.waitSpread(b.key, c.N())
	}
}

func placedNodes(e fsm.Entry) []string {
	var out []string
	for _, s := range e.Placement {
		out = append(out, s.NodeID)
	}
	sort.Strings(out)
	return out
}

// reader reads every block through every node in a loop until stopped,
// counting failed reads and wrong bytes.
type reader struct {
	stop          chan struct{}
	wg            sync.WaitGroup
	reads, failed atomic.Int64
	firstErr      atomic.Value
}

func (tc *testCluster) startReader(blocks []testBlock) *reader {
	r := &reader{stop: make(chan struct{})}
	nodes := slices.Clone(tc.nodes)
	r.wg.Go(func() {
		for i := 0; ; i++ {
			for _, b := range blocks {
				select {
				case <-r.stop:
					return
				default:
				}
				tn := nodes[i%len(nodes)]
				ref, err := tn.store.Get(withTimeout(tc.t, 10*time.Second), b.key)
				r.reads.Add(1)
				if err == nil && string(ref.Data) != string(b.data) {
					err = fmt.Errorf("wrong bytes for %v through %s", b.key, tn.id)
				}
				if ref != nil {
					ref.Release()
				}
				if err != nil {
					r.failed.Add(1)
					r.firstErr.CompareAndSwap(nil, fmt.Sprintf("%s via %s: %v", b.key, tn.id, err))
				}
			}
		}
	})
	return r
}

// relookups sums the reads, on every node, that retried on a newer
// placement.
func (tc *testCluster) relookups() int {
	return tc.sumCounter(func(m *metrics) prometheus.Counter { return m.relookups })
}

// rebalanceMoved sums, over every node, the shards rebalancing moved
// (ctxtier_rebalance_shards_moved_total): unlike the leader's status,
// which a new leader starts from zero, it counts the moves of every
// leader term.
func (tc *testCluster) rebalanceMoved() int {
	return tc.sumCounter(func(m *metrics) prometheus.Counter { return m.rebalMoved })
}

// sumCounter sums one of the package's counters over every node.
func (tc *testCluster) sumCounter(counter func(*metrics) prometheus.Counter) int {
	n := 0
	for _, tn := range tc.nodes {
		var m dto.Metric
		if err := counter(tn.backend.met).Write(&m); err != nil {
			tc.t.Fatal(err)
		}
		n += int(m.GetCounter().GetValue())
	}
	return n
}

func (r *reader) finish(t *testing.T) {
	t.Helper()
	close(r.stop)
	r.wg.Wait()
	if n := r.failed.Load(); n > 0 {
		t.Fatalf("%d of %d reads during the rebalance failed; first: %v", n, r.reads.Load(), r.firstErr.Load())
	}
	if r.reads.Load() == 0 {
		t.Fatal("the reader read nothing")
	}
	t.Logf("%d reads during the rebalance, none failed", r.reads.Load())
}

// checkBalanced checks every node's index against placement.Pick, that no
// member outside a block's placement still holds its shard (unless
// leftovers: a member that was dead keeps the copies it had), and reads
// every block back through every node.
func (tc *testCluster) checkBalanced(blocks []testBlock, leftovers bool) map[string]int {
	tc.t.Helper()
	perNode := map[string]int{}
	for _, b := range blocks {
		for _, tn := range tc.nodes {
			e, ok := tn.node.FSM().Lookup(b.key)
			if !ok {
				tc.t.Fatalf("%s lost %v", tn.id, b.key)
			}
			if got, want := placedNodes(e), wantNodes(tc.t, tn, b.key); !slices.Equal(got, want) {
				tc.t.Fatalf("%s places %v on %v, placement picks %v", tn.id, b.key, got, want)
			}
		}
		e, _ := tc.nodes[0].node.FSM().Lookup(b.key)
		c, err := tc.nodes[0].backend.code(b.key.Namespace)
		if err != nil {
			tc.t.Fatal(err)
		}
		for _, s := range e.Placement {
			perNode[s.NodeID]++
		}
		// The copies left behind are gone. A copy still being deleted may
		// linger a moment (a restore pass that wrote one back deletes it
		// once it has caught up); one left behind stays.
		for _, tn := range tc.nodes {
			if leftovers {
				break
			}
			for i := range c.N() {
				sk := shardKey(b.key, c, i)
				if slices.Contains(e.Placement, fsm.Shard{NodeID: tn.id, Index: uint16(i)}) || c.K == 1 && slices.ContainsFunc(e.Placement, func(s fsm.Shard) bool { return s.NodeID == tn.id }) {
					continue
				}
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
					ref, err := tn.tiers.Get(withTimeout(tc.t, 5*time.Second), sk, block.GetOptions{})
					if errors.Is(err, block.ErrNotFound) {
						break
					}
					if err != nil {
						tc.t.Fatal(err)
					}
					ref.Release()
					if time.Now().After(deadline) {
						tc.t.Fatalf("%s still holds %v, which the index no longer places on it", tn.id, sk)
					}
				}
			}
		}
		for _, tn := range tc.nodes {
			mustGet(tc.t, tn.store, b.key, b.data)
		}
	}
	return perNode
}

func TestRebalanceMovesShardsToAJoiningMember(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	tc.createNS("rep", 1, 2)
	tc.createNS("rs", 2, 1)
	tc.createNS("one", 1, 0) // a single copy moves too: reads must follow it
	blocks := tc.putBlocks(40, 0, "rep", "rs", "one")
	tc.waitFull(blocks)
	if st := tc.rebalanceOf(); st.Pending != 0 || st.MovedShards != 0 {
		t.Fatalf("a balanced cluster rebalances: %+v", st)
	}
	r := tc.startReader(blocks)
	joined := time.Now()
	n4 := tc.addNode()
	st := tc.waitRebalanced(joined, true)
	r.finish(t)
	perNode := tc.checkBalanced(blocks, false)
	moved := tc.rebalanceMoved()
	t.Logf("rebalance: %+v; %d shards moved in all; shards per node %v; %d reads retried on a newer placement", st, moved, perNode, tc.relookups())
	// Every shard n4 holds was moved there, and nothing else moved (by
	// any leader: under load the leadership may move mid-run).
	if perNode[n4.id] != moved {
		t.Fatalf("n4 holds %d shards, rebalancing moved %d", perNode[n4.id], moved)
	}
	// 40 blocks of 3 shards each in two namespaces and 40 single copies
	// over 4 members: n4 is picked for 3 of 4 blocks of the first two and
	// 1 of 4 single copies, about 70 of 280 shards.
	if perNode[n4.id] < 35 {
		t.Fatalf("n4 holds only %d of 280 shards", perNode[n4.id])
	}
	if st.LastScan.IsZero() || st.ScannedBlocks != len(blocks) {
		t.Fatalf("status: %+v", st)
	}
	// The leader's status covers its own term: a leader elected after
	// (some of) the moves starts from zero and reports only its own.
	if int(st.MovedShards) == moved && (st.MovedBytes == 0 || st.RateBytesPerSec <= 0 || st.RunEnded.IsZero()) {
		t.Fatalf("status of the leader that made every move: %+v", st)
	}
	if int(st.MovedShards) != moved {
		t.Logf("the leadership moved during the rebalance: this leader's status counts %d of the %d moves", st.MovedShards, moved)
	}
}

func TestRebalanceBoundsCopiesInFlight(t *testing.T) {
	tc := newTestCluster(t, 3, func(c *Config) { c.RebalanceInflight = 2 })
	tc.createNS("rep", 1, 2)
	blocks := tc.putBlocks(30, 0, "rep")
	tc.waitFull(blocks)
	open := tc.peers.gate("n4")
	defer open()
	tc.addNode()
	tc.eventually("two copies held at n4's gate", func() bool {
		tc.peers.mu.Lock()
		defer tc.peers.mu.Unlock()
		return tc.peers.gated == 2
	})
	// Give a rebalancer that ignored the bound the time to exceed it.
	time.Sleep(300 * time.Millisecond)
	tc.peers.mu.Lock()
	held := tc.peers.gatedMax
	tc.peers.mu.Unlock()
	if held != 2 {
		t.Fatalf("%d copies in flight at once, want at most RebalanceInflight = 2", held)
	}
	if st := tc.rebalanceOf(); st.Pending == 0 || !st.Running {
		t.Fatalf("status while copies are held: %+v", st)
	}
	open()
	tc.waitRebalanced(time.Now(), true)
	tc.peers.mu.Lock()
	held = tc.peers.gatedMax
	tc.peers.mu.Unlock()
	if held > 2 {
		t.Fatalf("%d copies in flight at once, want at most 2", held)
	}
	tc.checkBalanced(blocks, false)
}

// waitRebalanced waits until the leader's rebalancing scanned the index
// after since and found nothing left (having moved something, in any
// leader's term, with moved), and every node's index has the leader's last
// change.
func (tc *testCluster) waitRebalanced(since time.Time, moved bool) RebalanceStatus {
	tc.t.Helper()
	var st RebalanceStatus
	tc.eventually("rebalancing done", func() bool {
		st = tc.rebalanceOf()
		return st.Active && st.LastScan.After(since) && (tc.rebalanceMoved() > 0) == moved && st.Pending == 0 && !st.Running
	})
	for _, tn := range tc.nodes {
		tc.eventually("every index current", func() bool {
			return tn.node.FSM().AppliedIndex() >= tc.leader().node.FSM().AppliedIndex()
		})
	}
	return st
}

func TestRebalanceAfterADrain(t *testing.T) {
	tc := newTestCluster(t, 5, nil)
	tc.createNS("rep", 1, 2)
	tc.createNS("rs", 2, 1)
	blocks := tc.putBlocks(30, 0, "rep", "rs")
	tc.waitFull(blocks)
	leader := tc.leader()
	var gone *testNode
	for _, tn := range tc.nodes {
		if tn != leader {
			gone = tn
		}
	}
	r := tc.startReader(blocks)
	if _, err := leader.backend.Drain(withTimeout(t, 10*time.Second), gone.id); err != nil {
		t.Fatal(err)
	}
	tc.eventually("drained", func() bool { return tc.drainOf(gone.id).Done })
	// Repair copied each shard off the draining member to the best-ranked
	// member that held nothing of the block: with rendezvous hashing that
	// is the member placement picks among the four that stay, so
	// rebalancing finds nothing to move.
	st := tc.waitRebalanced(time.Now(), false)
	r.finish(t)
	perNode := tc.checkBalanced(blocks, false)
	t.Logf("after draining %s: rebalancing %+v; shards per node %v", gone.id, st, perNode)
	if perNode[gone.id] != 0 {
		t.Fatalf("the drained member still holds %d shards", perNode[gone.id])
	}
}

func TestRebalanceBackToAMemberThatReturns(t *testing.T) {
	tc := newTestCluster(t, 4, nil)
	tc.createNS("rep", 1, 2)
	tc.createNS("rs", 2, 1)
	blocks := tc.putBlocks(30, 0, "rep", "rs")
	tc.waitFull(blocks)
	var back *testNode
	for _, tn := range tc.nodes {
		if !tn.node.IsLeader() {
			back = tn
		}
	}
	held := 0
	for _, b := range blocks {
		e, _ := tc.leader().node.FSM().Lookup(b.key)
		for _, s := range e.Placement {
			if s.NodeID == back.id {
				held++
			}
		}
	}
	tc.peers.setDown(back.id, true)
	tc.eventually("repair rebuilt the shards of the dead member", func() bool {
		m, _ := tc.leader().node.FSM().Member(back.id)
		if m.State != fsm.MemberDead {
			return false
		}
		for _, b := range blocks {
			e, _ := tc.leader().node.FSM().Lookup(b.key)
			if slices.ContainsFunc(e.Placement, func(s fsm.Shard) bool { return s.NodeID == back.id }) || len(e.Placement) != 3 {
				return false
			}
		}
		return true
	})
	tc.peers.setDown(back.id, false)
	st := tc.waitRebalanced(time.Now(), true)
	// The member placement picks again gets its shards back (it kept its
	// old copies: they are not deleted when a member dies).
	perNode := tc.checkBalanced(blocks, true)
	t.Logf("%s back: rebalancing %+v; shards per node %v (it held %d before)", back.id, st, perNode, held)
	if perNode[back.id] != held {
		t.Fatalf("%s holds %d shards after it came back, %d before it died", back.id, perNode[back.id], held)
	}
}

func TestByteLimiterSpacesTransfers(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		name  string
		rate  int64
		sizes []int
		// advance is how far the clock moves before each reservation.
		advance []time.Duration
		want    []time.Duration
	}{
		{"back to back", 1 << 20, []int{1 << 20, 1 << 20, 1 << 19}, []time.Duration{0, 0, 0}, []time.Duration{0, time.Second, 2 * time.Second}},
		{"idle time is not banked", 1 << 20, []int{1 << 20, 1 << 20}, []time.Duration{0, 5 * time.Second}, []time.Duration{0, 0}},
		{"partly waited", 1000, []int{1000, 500}, []time.Duration{0, 400 * time.Millisecond}, []time.Duration{0, 600 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := now
			l := newByteLimiter(tc.rate)
			l.now = func() time.Time { return clock }
			for i, n := range tc.sizes {
				clock = clock.Add(tc.advance[i])
				if got := l.reserve(n); got != tc.want[i] {
					t.Fatalf("reservation %d of %d bytes: wait %v, want %v", i, n, got, tc.want[i])
				}
			}
		})
	}
}

func TestPlanMovesLeavesRepairFirst(t *testing.T) {
	alive := func(id string) fsm.Member { return fsm.Member{ID: id, State: fsm.MemberAlive, Zone: "z" + id} }
	ms := map[string]fsm.Member{}
	var nodes []placement.Node
	for _, id := range []string{"a", "b", "c", "d"} {
		ms[id] = alive(id)
		nodes = append(nodes, placement.Node{ID: id, Zone: "z" + id})
	}
	dead := fsm.Member{ID: "x", State: fsm.MemberDead}
	restoring := fsm.Member{ID: "r", State: fsm.MemberAlive, Restoring: true}
	ms["x"], ms["r"] = dead, restoring
	rep, _ := erasure.New(1, 2)
	rs, _ := erasure.New(2, 1)
	key := block.NewKey("ns", 7)
	picked, _ := placement.Pick(key, nodes, 3)
	var out string // the alive member placement does not pick for key
	for _, n := range nodes {
		if !slices.ContainsFunc(picked, func(p placement.Node) bool { return p.ID == n.ID }) {
			out = n.ID
		}
	}
	shards := func(ids ...string) []fsm.Shard {
		var p []fsm.Shard
		for i, id := range ids {
			p = append(p, fsm.Shard{NodeID: id, Index: uint16(i)})
		}
		return p
	}
	// A placement on the picked members but the first, which is on out.
	misplaced := shards(out, picked[1].ID, picked[2].ID)
	for _, c := range []struct {
		name      string
		code      *erasure.Code
		place     []fsm.Shard
		wantMoves int
		wantOK    bool
	}{
		{"balanced replicas", rep, shards(picked[0].ID, picked[1].ID, picked[2].ID), 0, true},
		{"misplaced replica", rep, misplaced, 1, true},
		{"misplaced shard", rs, misplaced, 1, true},
		{"two of three replicas", rep, shards(out, picked[1].ID), 1, false},
		{"two of three shards", rs, shards(out, picked[1].ID), 1, false},
		{"a replica on a dead member", rep, shards(out, picked[1].ID, "x"), 2, false},
		{"a shard on a restoring member", rs, shards(out, picked[1].ID, "r"), 2, false},
		{"two shards on one member", rs, []fsm.Shard{{NodeID: out, Index: 0}, {NodeID: out, Index: 1}, {NodeID: picked[1].ID, Index: 2}}, 2, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			moves, ok := planMoves(key, fsm.Entry{Placement: c.place}, c.code, ms, nodes, 4, &placement.Scratch{})
			if len(moves) != c.wantMoves || ok != c.wantOK {
				t.Fatalf("moves %v ok %v; want %d moves, ok %v", moves, ok, c.wantMoves, c.wantOK)
			}
			for _, m := range moves {
				if !slices.Contains(c.place, m.from) || slices.ContainsFunc(c.place, func(s fsm.Shard) bool { return s.NodeID == m.to }) {
					t.Fatalf("move %+v: from must be in the placement, to must not", m)
				}
				if !slices.ContainsFunc(picked, func(p placement.Node) bool { return p.ID == m.to }) {
					t.Fatalf("move %+v goes to a member placement does not pick", m)
				}
			}
		})
	}
}

// TestPlanMovesAgreesWithMaps: planMoves (linear scans, one reused
// scratch) answers as the map-based version it replaced (kept here as
// the reference) on random placements over members in every state and
// random codes, and allocates nothing when there is nothing to move.
func TestPlanMovesAgreesWithMaps(t *testing.T) {
	ms := map[string]fsm.Member{}
	var nodes []placement.Node
	for i, id := range []string{"a", "b", "c", "d", "e"} {
		ms[id] = fsm.Member{ID: id, State: fsm.MemberAlive, Zone: fmt.Sprintf("z%d", i%3)}
		nodes = append(nodes, placement.Node{ID: id, Zone: fmt.Sprintf("z%d", i%3), Weight: float64(1 + i%2)})
	}
	ms["x"] = fsm.Member{ID: "x", State: fsm.MemberDead}
	ms["r"] = fsm.Member{ID: "r", State: fsm.MemberAlive, Restoring: true}
	ms["s"] = fsm.Member{ID: "s", State: fsm.MemberSuspect}
	ids := []string{"a", "b", "c", "d", "e", "x", "r", "s", "gone"}
	codes := [][2]int{{1, 0}, {1, 2}, {2, 1}, {3, 2}, {4, 2}}
	rng := rand.New(rand.NewPCG(3, 4))
	var scratch placement.Scratch
	for i := range 20000 {
		km := codes[i%len(codes)]
		c, err := erasure.New(km[0], km[1])
		if err != nil {
			t.Fatal(err)
		}
		key := block.NewKey("ns", rng.Uint64())
		var p []fsm.Shard
		if i%4 == 0 { // exactly where placement wants it
			picked, _ := placement.Pick(key, nodes, min(c.N(), len(nodes)))
			for j, n := range picked {
				p = append(p, fsm.Shard{NodeID: n.ID, Index: uint16(j)})
			}
		} else {
			for j := range rng.IntN(c.N() + 2) {
				p = append(p, fsm.Shard{NodeID: ids[rng.IntN(len(ids))], Index: uint16(j + rng.IntN(2))})
			}
		}
		e := fsm.Entry{Placement: p}
		usable := 3 + rng.IntN(3)
		wantMoves, wantOK := planMovesWithMaps(key, e, c, ms, nodes, usable)
		gotMoves, gotOK := planMoves(key, e, c, ms, nodes, usable, &scratch)
		if gotOK != wantOK || !slices.Equal(gotMoves, wantMoves) {
			t.Fatalf("placement %v, code %v, usable %d: planMoves %v %v, with maps %v %v", p, km, usable, gotMoves, gotOK, wantMoves, wantOK)
		}
	}
	key := block.NewKey("ns", 99)
	c, _ := erasure.New(1, 2)
	picked, _ := placement.Pick(key, nodes, 3)
	e := fsm.Entry{Placement: []fsm.Shard{{NodeID: picked[0].ID}, {NodeID: picked[1].ID}, {NodeID: picked[2].ID}}}
	if a := testing.AllocsPerRun(100, func() {
		if moves, ok := planMoves(key, e, c, ms, nodes, 5, &scratch); len(moves) > 0 || !ok {
			t.Fatalf("a well-placed block: moves %v, ok %v", moves, ok)
		}
	}); a != 0 {
		t.Fatalf("%.1f allocations to plan no move", a)
	}
}

// planMovesWithMaps is planMoves as it was before it dropped its maps: the
// reference TestPlanMovesAgreesWithMaps compares it with.
func planMovesWithMaps(key block.Key, e fsm.Entry, c *erasure.Code, ms map[string]fsm.Member, nodes []placement.Node, usable int) (moves []move, ok bool) {
	want := min(c.N(), len(nodes))
	if want == 0 {
		return nil, true
	}
	picked, err := placement.Pick(key, nodes, want)
	if err != nil {
		return nil, true
	}
	wanted := map[string]bool{}
	for _, p := range picked {
		wanted[p.ID] = true
	}
	holders := map[string]bool{}
	idx := map[uint16]bool{}
	ok = true
	for _, s := range e.Placement {
		m, known := ms[s.NodeID]
		if !known || m.State != fsm.MemberAlive || m.Restoring || holders[s.NodeID] {
			ok = false
		}
		holders[s.NodeID] = true
		idx[s.Index] = true
	}
	if c.K == 1 {
		ok = ok && len(e.Placement) >= min(c.N(), usable)
	} else {
		ok = ok && len(idx) == c.N()
	}
	var in []string
	for _, p := range picked {
		if !holders[p.ID] {
			in = append(in, p.ID)
		}
	}
	for _, s := range e.Placement {
		if len(in) == 0 {
			break
		}
		if !wanted[s.NodeID] {
			moves = append(moves, move{from: s, to: in[0]})
			in = in[1:]
		}
	}
	return moves, ok
}
