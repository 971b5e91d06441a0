package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
	"github.com/ctxtier/ctxtier/ctxstore/erasure"
	"github.com/ctxtier/ctxtier/ctxstore/placement"
	"github.com/ctxtier/ctxtier/gateway/client"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
)

// rebalanceRate is the --rebalance-rate of the rebalancing tests: low
// enough that the reads overlap the moves. REBALANCE_TEST_RATE overrides
// it (docs/scale.md measures with 1GiB, i.e. unthrottled).
func rebalanceRate() string {
	if r := os.Getenv("REBALANCE_TEST_RATE"); r != "" {
		return r
	}
	return "4MiB"
}

// ctxctlRebalance runs the real `ctxctl cluster rebalance status --json`.
func ctxctlRebalance(t *testing.T, bin, addr string) (cluster.RebalanceStatus, error) {
	t.Helper()
	out, err := exec.Command(bin, "cluster", "rebalance", "status", "--addr", addr, "--json").Output()
	if err != nil {
		return cluster.RebalanceStatus{}, fmt.Errorf("ctxctl cluster rebalance status: %w", err)
	}
	var r struct {
		Rebalance cluster.RebalanceStatus `json:"rebalance"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return cluster.RebalanceStatus{}, fmt.Errorf("ctxctl output %s: %w", out, err)
	}
	return r.Rebalance, nil
}

const rebalanceBlockSize = 16 << 10

// rebalanceNS are the namespaces of the rebalancing tests.
var rebalanceNS = []block.Namespace{{Name: "rs", DataShards: 2, ParityShards: 1}, {Name: "r3", DataShards: 1, ParityShards: 2}}

// ackedBlocks are the blocks whose put was acknowledged, with their bytes.
type ackedBlocks struct {
	mu   sync.Mutex
	keys map[string][]block.Key
	want map[block.Key][]byte
}

func newAckedBlocks() *ackedBlocks {
	return &ackedBlocks{keys: map[string][]block.Key{}, want: map[block.Key][]byte{}}
}

// count is the number of acknowledged blocks.
func (a *ackedBlocks) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.want)
}

// snapshot returns the acknowledged keys of namespace ns so far.
func (a *ackedBlocks) snapshot(ns string) []block.Key {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]block.Key(nil), a.keys[ns]...)
}

func (a *ackedBlocks) bytes(k block.Key) []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.want[k]
}

// put puts n blocks of ns (seeds from seed on) through nd as one batch and
// records the acknowledged ones; it returns the first failure.
func (a *ackedBlocks) put(ctx context.Context, t *testing.T, nd *testNode, ns string, seed, n int) error {
	items := make([]client.HTTPPutItem, n)
	for i := range items {
		s := seed + i
		items[i] = client.HTTPPutItem{Key: block.NewKey(ns, uint64(s)*0x9e3779b97f4a7c15+7), Data: blockBytes(s, rebalanceBlockSize)}
	}
	errs, err := httpClient(t, nd.http).PutBatch(ctx, items)
	if err != nil {
		return fmt.Errorf("batch put through %s: %w", nd.id, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var first error
	for i, e := range errs {
		if e != nil {
			first = fmt.Errorf("put %v through %s: %w", items[i].Key, nd.id, e)
			continue
		}
		if a.want[items[i].Key] == nil {
			a.keys[ns] = append(a.keys[ns], items[i].Key)
		}
		a.want[items[i].Key] = items[i].Data
	}
	return first
}

// loadCounts are a load goroutine's operations and failures.
type loadCounts struct {
	ops, failed atomic.Int64
	firstErr    atomic.Value
}

func (c *loadCounts) fail(err error) {
	c.failed.Add(1)
	c.firstErr.CompareAndSwap(nil, err.Error())
}

func (c *loadCounts) check(t *testing.T, what string) {
	t.Helper()
	if n := c.failed.Load(); n > 0 {
		t.Fatalf("%d of %d %s during the rebalance failed; first: %v", n, c.ops.Load(), what, c.firstErr.Load())
	}
	if c.ops.Load() == 0 {
		t.Fatalf("no %s during the rebalance", what)
	}
}

// readLoop reads every acknowledged block, in batches, through nodes in
// turn until stop is closed.
func (a *ackedBlocks) readLoop(ctx context.Context, t *testing.T, nodes []*testNode, stop <-chan struct{}, c *loadCounts) {
	for i := 0; ; i++ {
		nd := nodes[i%len(nodes)]
		hc := httpClient(t, nd.http)
		for _, ns := range rebalanceNS {
			select {
			case <-stop:
				return
			default:
			}
			keys := a.snapshot(ns.Name)
			data, errs, err := hc.GetBatch(ctx, keys)
			for j, k := range keys {
				c.ops.Add(1)
				e := err
				if e == nil {
					e = errs[j]
				}
				if e == nil && !bytes.Equal(data[j], a.bytes(k)) {
					e = fmt.Errorf("wrong bytes")
				}
				if e != nil {
					c.fail(fmt.Errorf("%v through %s: %w", k, nd.id, e))
				}
			}
		}
	}
}

// readAll reads every acknowledged block through each node, bit-exact
// (linearizable reads: each node first catches up with the leader).
func (a *ackedBlocks) readAll(ctx context.Context, t *testing.T, nodes []*testNode) {
	t.Helper()
	ctx = client.WithLinearizable(ctx)
	for _, nd := range nodes {
		hc := httpClient(t, nd.http)
		for _, ns := range rebalanceNS {
			keys := a.snapshot(ns.Name)
			data, errs, err := hc.GetBatch(ctx, keys)
			if err != nil {
				t.Fatalf("get batch through %s: %v", nd.id, err)
			}
			for j, k := range keys {
				if errs[j] != nil || !bytes.Equal(data[j], a.bytes(k)) {
					t.Fatalf("%v through %s after the rebalance: %v", k, nd.id, errs[j])
				}
			}
		}
	}
}

// waitRebalanced polls `ctxctl cluster rebalance status` through addr
// until the leader's rebalancing has scanned after since and found nothing
// left, and returns the last status.
func waitRebalanced(t *testing.T, ctxctl, addr string, since time.Time) cluster.RebalanceStatus {
	t.Helper()
	var last cluster.RebalanceStatus
	waitFor(t, 90*time.Second, "ctxctl cluster rebalance status: pending 0", func() bool {
		s, err := ctxctlRebalance(t, ctxctl, addr)
		if err != nil {
			t.Log(err)
			return false
		}
		last = s
		return s.Active && s.Pending == 0 && !s.Running && s.LastScan.After(since)
	})
	return last
}

// checkShares compares what each node holds (ctxtier_namespace_bytes over
// the shard size) with what placement.Pick gives it among the alive
// members: within tol of it, or for a node in lowerOnly at least 1-tol of
// it (a node that held shards before may also keep a put's straggler
// shard, written after its put committed without it, until DRAM evicts
// it). It logs the distribution.
func (a *ackedBlocks) checkShares(ctx context.Context, t *testing.T, nodes []*testNode, tol float64, lowerOnly map[string]bool) {
	t.Helper()
	cs, err := clusterapi.NewClient(nodes[0].http, control.WithToken(testSecret)).Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var cands []placement.Node
	for _, m := range cs.Members {
		if m.State == "alive" {
			cands = append(cands, placement.Node{ID: m.ID, Zone: m.Zone, Weight: float64(m.Capacity) / float64(1<<30)})
		}
	}
	expect := map[string]map[string]int{} // node -> ns -> shards
	for _, ns := range rebalanceNS {
		c, err := erasure.New(ns.DataShards, ns.ParityShards)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range a.snapshot(ns.Name) {
			picked, err := placement.Pick(k, cands, c.N())
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range picked {
				if expect[p.ID] == nil {
					expect[p.ID] = map[string]int{}
				}
				expect[p.ID][ns.Name]++
			}
		}
	}
	for _, nd := range nodes {
		for _, ns := range rebalanceNS {
			c, _ := erasure.New(ns.DataShards, ns.ParityShards)
			shard := c.ShardSize(rebalanceBlockSize)
			name := `ctxtier_namespace_bytes{namespace="` + ns.Name + `",tier="dram"}`
			e := expect[nd.id][ns.Name]
			var held int
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				v, err := strconv.ParseFloat(scrapeMetrics(t, nd.http, name)[name], 64)
				held = int(v) / shard
				if err == nil && float64(held) >= (1-tol)*float64(e) && (lowerOnly[nd.id] || float64(held) <= (1+tol)*float64(e)) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s holds %d shards of %s (%v bytes), placement picks it for %d", nd.id, held, ns.Name, v, e)
				}
			}
			t.Logf("%s holds %d shards of %s (placement picks it for %d of %d blocks)", nd.id, held, ns.Name, e, len(a.snapshot(ns.Name)))
		}
	}
}

// rebalanceCluster starts three nodes (with extra flags), builds ctxctl,
// and creates the namespaces.
func rebalanceCluster(ctx context.Context, t *testing.T) (nodes []*testNode, join string, extra func(string) []string, ctxctl string) {
	t.Helper()
	ctxctl = filepath.Join(t.TempDir(), "ctxctl")
	if out, err := exec.Command("go", "build", "-o", ctxctl, "../ctxctl").CombinedOutput(); err != nil {
		t.Fatalf("building ctxctl: %v\n%s", err, out)
	}
	rate := rebalanceRate()
	extra = func(string) []string { return []string{"--rebalance-rate", rate} }
	nodes, join = startClusterWith(t, 3, extra)
	hc := httpClient(t, nodes[0].http)
	for _, ns := range rebalanceNS {
		if _, err := hc.CreateNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "every node knows the namespaces", func() bool {
		for _, nd := range nodes {
			for _, ns := range rebalanceNS {
				if _, err := httpClient(t, nd.http).Namespace(ctx, ns.Name); err != nil {
					return false
				}
			}
		}
		return true
	})
	return nodes, join, extra, ctxctl
}

// waitRepairIdle waits until the leader's repair has scanned every block
// and has nothing pending.
func waitRepairIdle(ctx context.Context, t *testing.T, nodes []*testNode, blocks int) {
	t.Helper()
	var rep cluster.RepairStatus
	waitFor(t, 30*time.Second, "no repair pending", func() bool {
		leader, ok := leaderOf(t, nodes)
		if !ok {
			return false
		}
		st, err := clusterapi.NewClient(leader.http, control.WithToken(testSecret)).Status(ctx)
		var extra struct {
			Repair cluster.RepairStatus `json:"repair"`
		}
		if err != nil || json.Unmarshal(st.Extra, &extra) != nil {
			return false
		}
		rep = extra.Repair
		return rep.Active && rep.Pending == 0 && rep.ScannedBlocks == blocks
	})
	t.Logf("repair idle: %+v", rep)
}

// startJoining starts one more node that joins through join.
func startJoining(t *testing.T, id, join string, extra func(string) []string) *testNode {
	nd := &testNode{id: id, http: freeAddr(t), raft: freeAddr(t), dataDir: t.TempDir(), extra: extra(id)}
	nd.p = startCtxd(t, nd.args(join)...)
	return nd
}

// TestClusterRebalanceOnJoin (issue 20): three ctxd processes hold 300
// blocks of 16 KiB, half in an RS(2,1) namespace and half in a
// three-replica one; a fourth joins. The leader moves the shards whose
// rendezvous owner is now n4 while a reader reads every block through
// the first three nodes; `ctxctl cluster rebalance status` reaches
// pending 0. Then n4 holds what placement.Pick gives it (within 5%; the
// others at least 95% of theirs; all printed), every block reads back
// bit-exact through every node, and no read failed during the move.
func TestClusterRebalanceOnJoin(t *testing.T) {
	ctx := withTimeout(t, 3*time.Minute)
	nodes, join, extra, ctxctl := rebalanceCluster(ctx, t)
	const perNS = 150
	acked := newAckedBlocks()
	for j, ns := range rebalanceNS {
		for off := 0; off < perNS; off += 50 {
			if err := acked.put(ctx, t, nodes[(off/50)%len(nodes)], ns.Name, j*perNS+off, 50); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitRepairIdle(ctx, t, nodes, 2*perNS)
	st, err := ctxctlRebalance(t, ctxctl, nodes[1].http)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Active || st.Pending != 0 || st.MovedShards != 0 {
		t.Fatalf("a balanced cluster rebalances: %+v", st)
	}

	// The reader: every block, through each of the first three nodes in
	// turn, in batches, until the rebalancing is done.
	var reads loadCounts
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { acked.readLoop(ctx, t, nodes, stop, &reads) })

	n4 := startJoining(t, "n4", join, extra)
	all := append(append([]*testNode(nil), nodes...), n4)
	waitFor(t, 30*time.Second, "four alive voters", func() bool {
		n, _, err := memberCounts(nodes[0])
		return err == nil && n == 4
	})
	joined := time.Now()
	last := waitRebalanced(t, ctxctl, nodes[2].http, joined)
	close(stop)
	wg.Wait()
	reads.check(t, "reads")
	if last.MovedShards == 0 || last.RunEnded.IsZero() {
		t.Fatalf("nothing moved to n4: %+v", last)
	}
	run := last.RunEnded.Sub(last.RunStarted).Seconds()
	t.Logf("rebalance after the join (--rebalance-rate %s): moved %d shards, %d bytes in %.2f s (%.0f shards/s, %.0f bytes/s; %.1f s from join to done); %d reads during it, none failed",
		rebalanceRate(), last.MovedShards, last.MovedBytes, run, float64(last.MovedShards)/run, float64(last.MovedBytes)/run, time.Since(joined).Seconds(), reads.ops.Load())

	acked.checkShares(ctx, t, all, 0.05, map[string]bool{"n1": true, "n2": true, "n3": true})
	acked.readAll(ctx, t, all)
	// A stable membership: nothing more to move. The counters are the
	// leader's: after a leader change (an election under load) the new
	// leader reports its own, and it must have had nothing to run.
	s, err := ctxctlRebalance(t, ctxctl, n4.http)
	sameRun := s.MovedShards == last.MovedShards
	newLeaderIdle := s.MovedShards == 0 && s.RunStarted.IsZero()
	if err != nil || s.Pending != 0 || !sameRun && !newLeaderIdle {
		t.Fatalf("after the rebalance: %+v, %v", s, err)
	}
	if !sameRun {
		t.Logf("the leader changed after the rebalance; the new one found nothing to move")
	}
}

// TestClusterRebalanceScaleOutAndIn (issue 20): three nodes grow to five
// under put and get load, then shrink back to three by drain. After each
// step the leader's rebalancing reaches pending 0, each node holds its
// rendezvous share (±10%), every acknowledged block reads back bit-exact
// through every node, and no put or get failed meanwhile.
func TestClusterRebalanceScaleOutAndIn(t *testing.T) {
	ctx := withTimeout(t, 4*time.Minute)
	nodes, join, extra, ctxctl := rebalanceCluster(ctx, t)
	acked := newAckedBlocks()
	seed := 0
	for range 2 {
		for j, ns := range rebalanceNS {
			if err := acked.put(ctx, t, nodes[j%len(nodes)], ns.Name, seed, 50); err != nil {
				t.Fatal(err)
			}
			seed += 50
		}
	}
	waitRepairIdle(ctx, t, nodes, seed)

	// Load through the first three nodes: batches of 5 new blocks four
	// times a second, and reads of every acknowledged block.
	load := func(seed int) (stop func(t *testing.T)) {
		var puts, reads loadCounts
		done := make(chan struct{})
		var wg sync.WaitGroup
		// Linearizable: a block acknowledged through one node a moment
		// ago may not be in another node's index yet otherwise.
		wg.Go(func() { acked.readLoop(client.WithLinearizable(ctx), t, nodes, done, &reads) })
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				case <-time.After(250 * time.Millisecond):
				}
				puts.ops.Add(5)
				ns := rebalanceNS[i%len(rebalanceNS)].Name
				if err := acked.put(ctx, t, nodes[i%len(nodes)], ns, seed+i*5, 5); err != nil {
					puts.fail(err)
				}
			}
		})
		return func(t *testing.T) {
			close(done)
			wg.Wait()
			puts.check(t, "puts")
			reads.check(t, "reads")
			t.Logf("during the rebalance: %d blocks put, %d reads, none failed", puts.ops.Load(), reads.ops.Load())
		}
	}

	stop := load(100_000)
	var added []*testNode
	for _, id := range []string{"n4", "n5"} {
		added = append(added, startJoining(t, id, join, extra))
	}
	all := append(append([]*testNode(nil), nodes...), added...)
	waitFor(t, 30*time.Second, "five alive voters", func() bool {
		n, _, err := memberCounts(nodes[0])
		return err == nil && n == 5
	})
	out := waitRebalanced(t, ctxctl, nodes[0].http, time.Now())
	stop(t)
	// A put under load may be acknowledged short of a shard (its write
	// quorum); repair adds it, where placement picks.
	waitRepairIdle(ctx, t, all, acked.count())
	t.Logf("3 -> 5: rebalancing moved %d shards (%d bytes)", out.MovedShards, out.MovedBytes)
	if out.MovedShards == 0 {
		t.Fatalf("nothing moved to the new nodes: %+v", out)
	}
	acked.checkShares(ctx, t, all, 0.10, nil)
	acked.readAll(ctx, t, all)

	// 5 -> 3: drain n5 and n4 under load, remove and stop them.
	stop = load(200_000)
	drainStart := time.Now()
	cl := clusterapi.NewClient(nodes[0].http, control.WithToken(testSecret))
	for _, id := range []string{"n5", "n4"} {
		if _, err := cl.Drain(ctx, id); err != nil {
			t.Fatalf("drain %s: %v", id, err)
		}
	}
	var last cluster.DrainStatus
	if err := cl.WaitDrained(ctx, []string{"n5", "n4"}, 100*time.Millisecond, func(d cluster.DrainStatus) { last = d }); err != nil {
		t.Fatalf("waiting for the drains: %v (last %+v)", err, last)
	}
	for _, nd := range []*testNode{added[1], added[0]} {
		if err := cl.Remove(ctx, nd.id); err != nil {
			t.Fatalf("remove %s: %v", nd.id, err)
		}
		if err := nd.p.Stop(10 * time.Second); err != nil {
			t.Logf("%s: %v", nd.id, err)
		}
	}
	in := waitRebalanced(t, ctxctl, nodes[0].http, drainStart)
	stop(t)
	waitRepairIdle(ctx, t, nodes, acked.count())
	t.Logf("5 -> 3: rebalancing after the drains moved %d shards in this leader's term", in.MovedShards)
	acked.checkShares(ctx, t, nodes, 0.10, nil)
	acked.readAll(ctx, t, nodes)
}
