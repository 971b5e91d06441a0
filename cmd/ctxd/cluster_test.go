package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
	"github.com/ctxtier/ctxtier/gateway/client"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
)

// testNode is one member of a local cluster of real ctxd processes.
type testNode struct {
	id, http, raft, dataDir string
	extra                   []string // more flags, on every start
	p                       *proc
}

// testSecret is the cluster secret of every test cluster.
const testSecret = "test-cluster-secret-0123456789"

func (n *testNode) args(join string) []string {
	return append([]string{"--node-id", n.id, "--http-listen", n.http, "--raft-listen", n.raft,
		"--data-dir", n.dataDir, "--join", join, "--bootstrap-expect", "3", "--cluster-secret", testSecret,
		"--dead-after", "2s", "--dram-capacity", "64MiB", "--zone", "zone-" + n.id}, n.extra...)
}

// startCluster starts n ctxd processes that form one cluster through
// join-or-bootstrap (the node named first in --join forms it).
func startCluster(t *testing.T, n int) ([]*testNode, string) {
	t.Helper()
	return startClusterWith(t, n, nil)
}

// startClusterWith is startCluster with extra(id) (when not nil) appended
// to the flags of the node with that id.
func startClusterWith(t *testing.T, n int, extra func(id string) []string) ([]*testNode, string) {
	t.Helper()
	nodes := make([]*testNode, n)
	var joins []string
	for i := range nodes {
		nodes[i] = &testNode{id: fmt.Sprintf("n%d", i+1), http: freeAddr(t), raft: freeAddr(t), dataDir: t.TempDir()}
		if extra != nil {
			nodes[i].extra = extra(nodes[i].id)
		}
		joins = append(joins, nodes[i].http)
	}
	join := strings.Join(joins, ",")
	for _, nd := range nodes {
		nd.p = startCtxd(t, nd.args(join)...)
	}
	waitFor(t, 20*time.Second, "all members alive and voting", func() bool {
		st, err := clusterapi.NewClient(nodes[0].http, control.WithToken(testSecret)).Status(context.Background())
		if err != nil || st.Leader == nil {
			return false
		}
		alive := 0
		for _, m := range st.Members {
			if m.State == "alive" && m.Voter {
				alive++
			}
		}
		return alive == n
	})
	return nodes, join
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < d {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out after %v waiting for %s", d, what)
	return 0
}

func leaderOf(t *testing.T, nodes []*testNode) (*testNode, bool) {
	t.Helper()
	for _, nd := range nodes {
		st, err := clusterapi.NewClient(nd.http, control.WithToken(testSecret)).Status(context.Background())
		if err != nil || st.Leader == nil {
			continue
		}
		for _, m := range nodes {
			if m.id == st.Leader.ID {
				return m, true
			}
		}
	}
	return nil, false
}

// createOnLeader creates each namespace through the current leader: a
// follower answers namespace changes with 503 and the leader's address,
// and under load the leader may change between two calls. An existing
// identical namespace counts as created.
func createOnLeader(t *testing.T, nodes []*testNode, nss ...block.Namespace) {
	t.Helper()
	for _, ns := range nss {
		var err error
		waitFor(t, 30*time.Second, "namespace "+ns.Name+" created on the leader", func() bool {
			ld, ok := leaderOf(t, nodes)
			if !ok {
				return false
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err = httpClient(t, ld.http).CreateNamespace(ctx, ns)
			return err == nil || errors.Is(err, block.ErrConflict)
		})
	}
}

// replicated creates a namespace of three replicas (k=1, m=2) through node 0.
func replicated(t *testing.T, nd *testNode, name string) {
	t.Helper()
	hc := httpClient(t, nd.http)
	if _, err := hc.CreateNamespace(context.Background(), block.Namespace{Name: name, DataShards: 1, ParityShards: 2}); err != nil {
		t.Fatal(err)
	}
}

func httpClient(t *testing.T, addr string) *client.HTTPClient {
	t.Helper()
	cfg := client.HTTPDefaultConfig()
	cfg.BaseURL = "http://" + addr
	hc, err := client.NewHTTP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return hc
}

// TestClusterLeaderKilledUnderLoad (issue 5 a): SIGKILL the leader while
// clients keep putting and getting through the other nodes. A new leader
// must serve (the time is logged against the 3 s target), and every
// acknowledged block (three replicas) must read back with the right bytes
// from the survivors.
func TestClusterLeaderKilledUnderLoad(t *testing.T) {
	nodes, _ := startCluster(t, 3)
	replicated(t, nodes[0], "r3")
	leader, ok := leaderOf(t, nodes)
	if !ok {
		t.Fatal("no leader")
	}
	var survivors []*testNode
	for _, nd := range nodes {
		if nd != leader {
			survivors = append(survivors, nd)
		}
	}
	ctx := withTimeout(t, 2*time.Minute)
	var mu sync.Mutex
	acked := map[uint64]int{}
	var next atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w, nd := range survivors {
		hc := httpClient(t, nd.http)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				seed := int(next.Add(1))
				h := uint64(seed)*0x9e3779b97f4a7c15 + uint64(w)
				if err := hc.Put(ctx, block.NewKey("r3", h), blockBytes(seed, 32<<10), block.PutOptions{}); err == nil {
					mu.Lock()
					acked[h] = seed
					mu.Unlock()
				}
				mu.Lock()
				var some uint64
				for k := range acked {
					some = k
					break
				}
				mu.Unlock()
				if some != 0 {
					hc.Get(ctx, block.NewKey("r3", some))
				}
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	leader.p.Kill()
	took := waitFor(t, 60*time.Second, "a new leader serving writes", func() bool {
		nl, ok := leaderOf(t, survivors)
		if !ok || nl == leader {
			return false
		}
		err := httpClient(t, nl.http).Put(ctx, block.NewKey("r3", uint64(time.Now().UnixNano())), []byte("probe"), block.PutOptions{})
		return err == nil
	})
	// The 3 s target is reported, not asserted: a loaded machine under
	// -race may take longer without anything being wrong (the 60 s bound
	// above only catches a cluster that never recovers).
	t.Logf("timing: new leader serving %v after the kill (target 3 s)", took)
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(acked) < 10 {
		t.Fatalf("only %d puts acknowledged", len(acked))
	}
	for _, nd := range survivors {
		hc := httpClient(t, nd.http)
		for h, seed := range acked {
			got, err := hc.Get(ctx, block.NewKey("r3", h))
			if err != nil || !bytes.Equal(got, blockBytes(seed, 32<<10)) {
				t.Fatalf("%s: acknowledged block %x: %v", nd.id, h, err)
			}
		}
	}
	t.Logf("%d acknowledged blocks all readable from both survivors", len(acked))
}

// TestClusterNodeLostRepairAndRejoin (issue 5 b and c): a node is killed for
// good; after --dead-after the leader rebuilds its replicas elsewhere... with
// three nodes and three replicas there is nowhere else, so a fourth node is
// added first. Then the dead node restarts on its data, rejoins and catches up.
func TestClusterNodeLostRepairAndRejoin(t *testing.T) {
	nodes, join := startCluster(t, 3)
	replicated(t, nodes[0], "r3")
	// A fourth member: room for repair to restore three replicas.
	n4 := &testNode{id: "n4", http: freeAddr(t), raft: freeAddr(t), dataDir: t.TempDir()}
	n4.p = startCtxd(t, n4.args(join)...)
	all := append(nodes, n4)
	waitFor(t, 20*time.Second, "n4 joined", func() bool {
		st, err := clusterapi.NewClient(nodes[0].http, control.WithToken(testSecret)).Status(context.Background())
		if err != nil {
			return false
		}
		for _, m := range st.Members {
			if m.ID == "n4" && m.State == "alive" && m.Voter {
				return true
			}
		}
		return false
	})
	ctx := withTimeout(t, 2*time.Minute)
	const blocks = 40
	hc := httpClient(t, nodes[0].http)
	for i := range blocks {
		if err := hc.Put(ctx, block.NewKey("r3", uint64(1000+i)), blockBytes(i, 16<<10), block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Kill a follower for good.
	leader, _ := leaderOf(t, all)
	var victim *testNode
	for _, nd := range all {
		if nd != leader && nd != n4 {
			victim = nd
			break
		}
	}
	victim.p.Kill()
	t.Logf("killed %s (leader %s)", victim.id, leader.id)
	var repaired uint64
	var lastExtra string
	defer func() {
		if t.Failed() {
			t.Logf("last repair status: %s", lastExtra)
		}
	}()
	// Ask whichever live node leads now (under load the leader can change
	// after the kill, and repair counters are the leader's): done when the
	// victim is dead and a scan that began after that found nothing pending.
	var live []*testNode
	for _, nd := range all {
		if nd != victim {
			live = append(live, nd)
		}
	}
	var deadSeen time.Time
	waitFor(t, 60*time.Second, "repair to restore three live replicas", func() bool {
		ld, ok := leaderOf(t, live)
		if !ok {
			return false
		}
		st, err := clusterapi.NewClient(ld.http, control.WithToken(testSecret)).Status(context.Background())
		if err != nil || len(st.Extra) == 0 {
			return false
		}
		lastExtra = string(st.Extra)
		if deadSeen.IsZero() {
			for _, m := range st.Members {
				if m.ID == victim.id && m.State == "dead" {
					deadSeen = time.Now()
				}
			}
			return false
		}
		var extra struct {
			Repair struct {
				Active         bool      `json:"active"`
				Pending        int       `json:"pending"`
				RepairedShards uint64    `json:"repaired_shards"`
				LastScan       time.Time `json:"last_scan"`
			} `json:"repair"`
		}
		if err := json.Unmarshal(st.Extra, &extra); err != nil {
			return false
		}
		repaired = max(repaired, extra.Repair.RepairedShards)
		return extra.Repair.Active && extra.Repair.Pending == 0 && extra.Repair.LastScan.After(deadSeen)
	})
	t.Logf("repair rebuilt %d replicas (the most one leader reported)", repaired)
	// Every block still reads back through each live node.
	for _, nd := range all {
		if nd == victim {
			continue
		}
		c := httpClient(t, nd.http)
		for i := range blocks {
			got, err := c.Get(ctx, block.NewKey("r3", uint64(1000+i)))
			if err != nil || !bytes.Equal(got, blockBytes(i, 16<<10)) {
				t.Fatalf("%s: block %d after repair: %v", nd.id, i, err)
			}
		}
	}
	// (c) Rejoin: while the victim is down, more blocks are written; it
	// restarts on its own data and catches up with the index.
	for i := blocks; i < blocks+10; i++ {
		if err := hc.Put(ctx, block.NewKey("r3", uint64(1000+i)), blockBytes(i, 16<<10), block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	victim.p = startCtxd(t, victim.args(join)...)
	vc := httpClient(t, victim.http)
	waitFor(t, 30*time.Second, "the restarted node to catch up", func() bool {
		for i := range blocks + 10 {
			if _, err := vc.Stat(ctx, block.NewKey("r3", uint64(1000+i))); err != nil {
				return false
			}
		}
		return true
	})
	for i := range blocks + 10 {
		got, err := vc.Get(ctx, block.NewKey("r3", uint64(1000+i)))
		if err != nil || !bytes.Equal(got, blockBytes(i, 16<<10)) {
			t.Fatalf("rejoined %s: block %d: %v", victim.id, i, err)
		}
	}
}
