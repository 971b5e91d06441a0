package main

import (
	"bytes"
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
	"github.com/ctxtier/ctxtier/ctxstore/erasure"
	"github.com/ctxtier/ctxtier/ctxstore/placement"
	"github.com/ctxtier/ctxtier/gateway/client"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
)

// rebalanceRate is the --rebalance-rate of TestClusterRebalanceOnJoin:
// low enough that the reads overlap the moves. REBALANCE_TEST_RATE
// overrides it (docs/scale.md measures with 1GiB, i.e. unthrottled).
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
	ctxctl := filepath.Join(t.TempDir(), "ctxctl")
	if out, err := exec.Command("go", "build", "-o", ctxctl, "../ctxctl").CombinedOutput(); err != nil {
		t.Fatalf("building ctxctl: %v\n%s", err, out)
	}
	rate := rebalanceRate()
	extra := func(string) []string { return []string{"--rebalance-rate", rate} }
	nodes, join := startClusterWith(t, 3, extra)
	hc := httpClient(t, nodes[0].http)
	nss := []block.Namespace{{Name: "rs", DataShards: 2, ParityShards: 1}, {Name: "r3", DataShards: 1, ParityShards: 2}}
	for _, ns := range nss {
		if _, err := hc.CreateNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "every node knows the namespaces", func() bool {
		for _, nd := range nodes {
			for _, ns := range nss {
				if _, err := httpClient(t, nd.http).Namespace(ctx, ns.Name); err != nil {
					return false
				}
			}
		}
		return true
	})
	const perNS, size = 150, 16 << 10
	keys := map[string][]block.Key{}
	want := map[block.Key][]byte{}
	for j, ns := range nss {
		var items []client.HTTPPutItem
		for i := range perNS {
			seed := j*perNS + i
			k := block.NewKey(ns.Name, uint64(seed)*0x9e3779b97f4a7c15+7)
			keys[ns.Name] = append(keys[ns.Name], k)
			want[k] = blockBytes(seed, size)
			items = append(items, client.HTTPPutItem{Key: k, Data: want[k]})
		}
		for off := 0; off < len(items); off += 50 {
			nd := nodes[(off/50)%len(nodes)]
			errs, err := httpClient(t, nd.http).PutBatch(ctx, items[off:off+50])
			if err != nil {
				t.Fatalf("batch put through %s: %v", nd.id, err)
			}
			for i, e := range errs {
				if e != nil {
					t.Fatalf("put %v through %s: %v", items[off+i].Key, nd.id, e)
				}
			}
		}
	}
	st, err := ctxctlRebalance(t, ctxctl, nodes[1].http)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Active || st.Pending != 0 || st.MovedShards != 0 {
		t.Fatalf("a balanced cluster rebalances: %+v", st)
	}

	// The reader: every block, through each of the first three nodes in
	// turn, in batches, until the rebalancing is done.
	var reads, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			nd := nodes[i%len(nodes)]
			c := httpClient(t, nd.http)
			for _, ns := range nss {
				select {
				case <-stop:
					return
				default:
				}
				data, errs, err := c.GetBatch(ctx, keys[ns.Name])
				for j, k := range keys[ns.Name] {
					reads.Add(1)
					e := err
					if e == nil {
						e = errs[j]
					}
					if e == nil && !bytes.Equal(data[j], want[k]) {
						e = fmt.Errorf("wrong bytes")
					}
					if e != nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, fmt.Sprintf("%v through %s: %v", k, nd.id, e))
					}
				}
			}
		}
	})

	// Repair first: a put may leave a shard to repair (see redundantWrites).
	leader, ok := leaderOf(t, nodes)
	if !ok {
		t.Fatal("no leader")
	}
	var rep cluster.RepairStatus
	waitFor(t, 30*time.Second, "no repair pending before the join", func() bool {
		st, err := clusterapi.NewClient(leader.http, clusterapi.WithToken(testSecret)).Status(ctx)
		var extra struct {
			Repair cluster.RepairStatus `json:"repair"`
		}
		if err != nil || json.Unmarshal(st.Extra, &extra) != nil {
			return false
		}
		rep = extra.Repair
		return rep.Active && rep.Pending == 0 && rep.ScannedBlocks == 2*perNS
	})
	t.Logf("before the join: repair %+v", rep)
	n4 := &testNode{id: "n4", http: freeAddr(t), raft: freeAddr(t), dataDir: t.TempDir(), extra: extra("n4")}
	n4.p = startCtxd(t, n4.args(join)...)
	all := append(append([]*testNode(nil), nodes...), n4)
	waitFor(t, 30*time.Second, "four alive voters", func() bool {
		n, _, err := memberCounts(nodes[0])
		return err == nil && n == 4
	})
	joined := time.Now()
	var last cluster.RebalanceStatus
	waitFor(t, 60*time.Second, "ctxctl cluster rebalance status: pending 0", func() bool {
		s, err := ctxctlRebalance(t, ctxctl, nodes[2].http)
		if err != nil {
			t.Log(err)
			return false
		}
		last = s
		return s.Active && s.MovedShards > 0 && s.Pending == 0 && !s.Running && !s.RunEnded.IsZero()
	})
	close(stop)
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d reads during the rebalance failed; first: %v", n, reads.Load(), firstErr.Load())
	}
	run := last.RunEnded.Sub(last.RunStarted).Seconds()
	t.Logf("rebalance after the join (--rebalance-rate %s): moved %d shards, %d bytes in %.2f s (%.0f shards/s, %.0f bytes/s; %.1f s from join to done); %d reads during it, none failed",
		rate, last.MovedShards, last.MovedBytes, run, float64(last.MovedShards)/run, float64(last.MovedBytes)/run, time.Since(joined).Seconds(), reads.Load())

	// Each node's share: the shards placement.Pick gives it, against the
	// payload bytes it holds per namespace (/metrics).
	cs, err := clusterapi.NewClient(nodes[0].http, clusterapi.WithToken(testSecret)).Status(ctx)
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
	for _, ns := range nss {
		c, err := erasure.New(ns.DataShards, ns.ParityShards)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys[ns.Name] {
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
	for _, nd := range all {
		for _, ns := range nss {
			c, _ := erasure.New(ns.DataShards, ns.ParityShards)
			shard := c.ShardSize(size)
			name := `ctxtier_namespace_bytes{namespace="` + ns.Name + `",tier="dram"}`
			e := expect[nd.id][ns.Name]
			var held int
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				v, err := strconv.ParseFloat(scrapeMetrics(t, nd.http, name)[name], 64)
				held = int(v) / shard
				// A node that held shards before the join may hold a few
				// more than the index names (a put's straggler shard, left
				// out of the index when it landed after the put committed,
				// stays until DRAM evicts it): only n4 is held to the upper
				// bound.
				if err == nil && float64(held) >= 0.95*float64(e) && (nd != n4 || float64(held) <= 1.05*float64(e)) {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("%s holds %d shards of %s (%v bytes), placement picks it for %d", nd.id, held, ns.Name, v, e)
					break
				}
			}
			t.Logf("%s holds %d shards of %s (placement picks it for %d of %d blocks)", nd.id, held, ns.Name, expect[nd.id][ns.Name], perNS)
		}
	}

	// Every block, bit-exact, through every node (n4 included).
	for _, nd := range all {
		c := httpClient(t, nd.http)
		for _, ns := range nss {
			data, errs, err := c.GetBatch(ctx, keys[ns.Name])
			if err != nil {
				t.Fatalf("get batch through %s: %v", nd.id, err)
			}
			for j, k := range keys[ns.Name] {
				if errs[j] != nil || !bytes.Equal(data[j], want[k]) {
					t.Fatalf("%v through %s after the rebalance: %v", k, nd.id, errs[j])
				}
			}
		}
	}
	// A stable membership: nothing more to move.
	if s, err := ctxctlRebalance(t, ctxctl, n4.http); err != nil || s.Pending != 0 || s.MovedShards != last.MovedShards {
		t.Fatalf("after the rebalance: %+v, %v", s, err)
	}
}
