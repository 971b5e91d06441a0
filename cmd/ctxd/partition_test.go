package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
	"github.com/ctxtier/ctxtier/gateway/client"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
	"github.com/ctxtier/ctxtier/internal/netns"
)

// The partition tests run three real ctxd processes, each in its own
// network namespace on a bridge (internal/netns), and cut one off by taking
// its link down: the follower, then the leader. They assert what the
// container test (deploy/compose/e2e.sh) asserts, with real processes and a
// real network in place of Docker:
//
//   - never two leaders in one Raft term (every node's view is sampled
//     throughout, the cut-off node's included);
//   - the majority elects a leader (or keeps it) and takes writes again;
//   - the cut-off node refuses writes, and a refused write never appears;
//   - after the heal, the cut-off node catches up and takes writes;
//   - every acknowledged block reads back with the right bytes through
//     every node.
//
// The times the cluster took (new leader, writes resumed, step-down, catch
// up) are logged, not asserted: the deadlines below are generous bounds for
// a loaded 2-core machine under -race, not targets.

const (
	partitionNS  = "part"
	partitionBlk = 16 << 10
)

// nsNode is a ctxd process in its own namespace.
type nsNode struct {
	*netns.Node
	p  *proc
	hc *client.HTTPClient
	cc *clusterapi.Client
}

// nsCluster is three ctxd processes joined through a bridge.
type nsCluster struct {
	t     *testing.T
	net   *netns.Net
	nodes []*nsNode

	mu     sync.Mutex
	acked  map[uint64]int // hash -> seed of every acknowledged put
	next   int
	failed int // puts that were not acknowledged
}

func startNSCluster(t *testing.T) *nsCluster {
	t.Helper()
	c := &nsCluster{t: t, net: netns.New(t, netns.DefaultConfig()), acked: map[uint64]int{}}
	var joins []string
	for i := 1; i <= 3; i++ {
		nd := &nsNode{Node: c.net.Add(fmt.Sprintf("n%d", i))}
		c.nodes = append(c.nodes, nd)
		joins = append(joins, nd.IP+":7401")
	}
	join := strings.Join(joins, ",")
	start := time.Now()
	for _, nd := range c.nodes {
		nd.p = startCtxdWith(t, nd.Command, "--node-id", nd.Name,
			"--listen", nd.IP+":7400", "--http-listen", nd.IP+":7401",
			"--raft-listen", nd.IP+":7402", "--peer-listen", nd.IP+":7403", "--s3-admin-listen", "",
			"--join", join, "--bootstrap-expect", "3", "--cluster-secret", testSecret,
			"--dram-capacity", "64MiB", "--zone", "zone-"+nd.Name)
		cfg := client.HTTPDefaultConfig()
		cfg.BaseURL = "http://" + nd.IP + ":7401"
		cfg.DialContext = nd.DialContext
		cfg.ResponseHeaderTimeout = 20 * time.Second
		hc, err := client.NewHTTP(cfg)
		if err != nil {
			t.Fatal(err)
		}
		nd.hc = hc
		nd.cc = clusterapi.NewClient(nd.IP+":7401", control.WithToken(testSecret), control.WithHTTPClient(&http.Client{
			Transport: &http.Transport{DialContext: nd.DialContext}, Timeout: 5 * time.Second}))
	}
	took := c.waitFor(90*time.Second, "three alive voters seen by every node", func() bool {
		for _, nd := range c.nodes {
			if !c.fullView(nd) {
				return false
			}
		}
		return true
	})
	t.Logf("timing: cluster of 3 formed %v after the first start (%v waiting for members)", time.Since(start).Round(time.Millisecond), took)
	// Through the leader of the moment (a follower answers "not the
	// leader"), again if leadership moves; creating the same namespace
	// twice is not an error.
	var err error
	c.waitFor(60*time.Second, "the namespace to be created", func() bool {
		l, ok := c.leader(c.nodes)
		if !ok {
			return false
		}
		_, err = l.hc.CreateNamespace(context.Background(), block.Namespace{Name: partitionNS, DataShards: 1, ParityShards: 2})
		if err != nil {
			t.Logf("create namespace through %s: %v (retrying)", l.Name, err)
		}
		return err == nil
	})
	return c
}

// fullView reports whether nd knows a leader and three alive voters.
func (c *nsCluster) fullView(nd *nsNode) bool {
	st, err := nd.cc.Status(context.Background())
	if err != nil || st.Leader == nil {
		return false
	}
	alive := 0
	for _, m := range st.Members {
		if m.State == "alive" && m.Voter {
			alive++
		}
	}
	return alive == 3
}

func (c *nsCluster) waitFor(d time.Duration, what string, cond func() bool) time.Duration {
	c.t.Helper()
	start := time.Now()
	for time.Since(start) < d {
		if cond() {
			return time.Since(start).Round(time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("timed out after %v waiting for %s", d, what)
	return 0
}

// leader returns the node that the given nodes agree leads, if they do.
func (c *nsCluster) leader(among []*nsNode) (*nsNode, bool) {
	var id string
	for _, nd := range among {
		st, err := nd.cc.Status(context.Background())
		if err != nil || st.Leader == nil || (id != "" && st.Leader.ID != id) {
			return nil, false
		}
		id = st.Leader.ID
	}
	for _, nd := range among {
		if nd.Name == id {
			return nd, true
		}
	}
	return nil, false
}

// put writes a fresh block through nd; it is recorded as acknowledged only
// when the put succeeded.
func (c *nsCluster) put(ctx context.Context, nd *nsNode) error {
	c.mu.Lock()
	c.next++
	seed := c.next
	c.mu.Unlock()
	h := uint64(seed)*0x9e3779b97f4a7c15 + 1
	if err := nd.hc.Put(ctx, block.NewKey(partitionNS, h), blockBytes(seed, partitionBlk), block.PutOptions{}); err != nil {
		c.mu.Lock()
		c.failed++
		c.mu.Unlock()
		return err
	}
	c.mu.Lock()
	c.acked[h] = seed
	c.mu.Unlock()
	return nil
}

// putEventually retries puts through nd until n succeed or d passes.
func (c *nsCluster) putEventually(nd *nsNode, n int, d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	var err error
	for done := 0; done < n; {
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: %d of %d puts done after %v: %v", nd.Name, done, n, d, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		err = c.put(ctx, nd)
		cancel()
		if err == nil {
			done++
		} else {
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// allReadable reports the first acknowledged block nd cannot return with
// the right bytes, read linearizably (the node first syncs with the
// leader's commit index, so a block acknowledged anywhere must be there).
func (c *nsCluster) allReadable(nd *nsNode) error {
	_, _, _, err := c.readBack(nd)
	return err
}

// readBack reads every acknowledged block through nd, linearizably, and
// counts those it cannot return (lost) and those with wrong bytes; err
// describes the first of either.
func (c *nsCluster) readBack(nd *nsNode) (acked, lost, wrong int, err error) {
	c.mu.Lock()
	blocks := make(map[uint64]int, len(c.acked))
	for h, s := range c.acked {
		blocks[h] = s
	}
	c.mu.Unlock()
	for h, seed := range blocks {
		ctx, cancel := context.WithTimeout(client.WithLinearizable(context.Background()), 30*time.Second)
		got, gerr := nd.hc.Get(ctx, block.NewKey(partitionNS, h))
		cancel()
		switch {
		case gerr != nil:
			lost++
			if err == nil {
				err = fmt.Errorf("%s: acknowledged block %016x: %w", nd.Name, h, gerr)
			}
		case !bytes.Equal(got, blockBytes(seed, partitionBlk)):
			wrong++
			if err == nil {
				err = fmt.Errorf("%s: acknowledged block %016x: wrong bytes", nd.Name, h)
			}
		}
	}
	return len(blocks), lost, wrong, err
}

// leaderWatch samples every node's Raft state and term and records who
// claimed to lead each term.
type leaderWatch struct {
	mu      sync.Mutex
	byTerm  map[uint64]string
	clashes []string
	samples int
	stop    chan struct{}
	done    chan struct{}
}

func (c *nsCluster) watchLeaders() *leaderWatch {
	w := &leaderWatch{byTerm: map[uint64]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			for _, nd := range c.nodes {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				st, err := nd.cc.Status(ctx)
				cancel()
				if err != nil || st.State != "leader" {
					continue
				}
				w.mu.Lock()
				w.samples++
				if prev, ok := w.byTerm[st.Raft.Term]; ok && prev != nd.Name {
					w.clashes = append(w.clashes, fmt.Sprintf("term %d: %s and %s both leader", st.Raft.Term, prev, nd.Name))
				}
				w.byTerm[st.Raft.Term] = nd.Name
				w.mu.Unlock()
			}
			select {
			case <-w.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return w
}

// check stops the watch and fails t on two leaders in one term.
func (w *leaderWatch) check(t *testing.T) {
	t.Helper()
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, cl := range w.clashes {
		t.Error("two leaders:", cl)
	}
	if w.samples == 0 {
		t.Fatal("leader watch saw no leader at all")
	}
	t.Logf("leader watch: %d leader samples over %d terms %v, no term with two leaders", w.samples, len(w.byTerm), w.byTerm)
}

func TestPartitionFollowerCutOff(t *testing.T) { partitionScenario(t, false, 4) }

func TestPartitionLeaderCutOff(t *testing.T) { partitionScenario(t, true, 4) }

// partitionResult is what a partition scenario measured, for the
// reliability table: acknowledged blocks, the worst node's lost and wrong
// counts at the end, the time from the cut until the majority agreed on a
// leader other than the cut-off node (cutLeader only) and until it took a
// write, and the puts not acknowledged after the cut (the minority's
// refusals included).
type partitionResult struct {
	acked, lost, wrong int
	newLeader, resume  time.Duration
	failed             int
}

// partitionScenario cuts off the leader (cutLeader) or a follower, checks
// the majority and the minority, heals, and checks that the cluster is
// whole again and lost nothing. perNode blocks are put through every node
// before the cut.
func partitionScenario(t *testing.T, cutLeader bool, perNode int) partitionResult {
	var res partitionResult
	c := startNSCluster(t)
	watch := c.watchLeaders()
	// Acknowledged blocks before the partition, put through every node.
	for _, nd := range c.nodes {
		c.putEventually(nd, perNode, 120*time.Second)
	}
	for _, nd := range c.nodes {
		if err := c.allReadable(nd); err != nil {
			t.Fatal(err)
		}
	}
	// The victim is chosen from the leader the nodes agree on, and (for the
	// leader cut) confirmed to still call itself leader just before the
	// cut, so a leadership change in between cannot turn the scenario into
	// the other one.
	var leader, victim *nsNode
	c.waitFor(60*time.Second, "an agreed leader to cut off or keep", func() bool {
		l, ok := c.leader(c.nodes)
		if !ok {
			return false
		}
		leader, victim = l, l
		if !cutLeader {
			victim = c.nodes[0]
			if victim == leader {
				victim = c.nodes[1]
			}
		}
		st, err := leader.cc.Status(context.Background())
		return err == nil && st.State == "leader"
	})
	var majority []*nsNode
	for _, nd := range c.nodes {
		if nd != victim {
			majority = append(majority, nd)
		}
	}
	t.Logf("leader %s; cutting off %s", leader.Name, victim.Name)

	// Partition.
	c.mu.Lock()
	failedBefore := c.failed
	c.mu.Unlock()
	cut := time.Now()
	c.net.Cut(victim.Node)
	var newLeader *nsNode
	took := c.waitFor(60*time.Second, "the majority to agree on a leader among itself and take a write", func() bool {
		nl, ok := c.leader(majority)
		if !ok || nl == victim {
			return false
		}
		if res.newLeader == 0 && (cutLeader || nl != leader) {
			res.newLeader = time.Since(cut)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if c.put(ctx, nl) != nil {
			return false
		}
		newLeader = nl
		return true
	})
	res.resume = time.Since(cut)
	t.Logf("timing: majority led by %s took a write %v after the cut", newLeader.Name, took)
	if !cutLeader && newLeader != leader {
		t.Logf("note: leadership moved from %s to %s although a follower was cut", leader.Name, newLeader.Name)
	}
	for _, nd := range majority {
		c.putEventually(nd, 3, 60*time.Second)
	}
	for _, nd := range majority {
		if err := c.allReadable(nd); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("timing: majority served puts and reads of every acknowledged block %v after the cut", time.Since(cut).Round(time.Millisecond))

	// The minority refuses writes and, if it led, steps down.
	c.waitFor(60*time.Second, victim.Name+" to stop claiming leadership", func() bool {
		st, err := victim.cc.Status(context.Background())
		return err == nil && st.State != "leader"
	})
	t.Logf("timing: cut-off %s not leader %v after the cut", victim.Name, time.Since(cut).Round(time.Millisecond))
	refused := block.NewKey(partitionNS, 0xdead0001)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	err := victim.hc.Put(ctx, refused, blockBytes(-1, partitionBlk), block.PutOptions{})
	cancel()
	c.mu.Lock()
	c.failed++ // the refusal is a put not acknowledged after the cut
	c.mu.Unlock()
	if err == nil {
		t.Fatalf("cut-off %s acknowledged a write", victim.Name)
	}
	t.Logf("cut-off %s refused a write: %v", victim.Name, err)
	for _, nd := range majority {
		if _, err := nd.hc.Get(client.WithLinearizable(context.Background()), refused); !errors.Is(err, block.ErrNotFound) {
			t.Fatalf("%s: the write the minority refused: want NotFound, got %v", nd.Name, err)
		}
	}

	// Heal.
	healed := time.Now()
	c.net.Heal(victim.Node)
	took = c.waitFor(90*time.Second, victim.Name+" back with a leader and three alive members", func() bool { return c.fullView(victim) })
	t.Logf("timing: %s saw three alive members %v after the heal", victim.Name, took)
	var lastErr error
	took = c.waitFor(90*time.Second, victim.Name+" to read every acknowledged block", func() bool {
		lastErr = c.allReadable(victim)
		return lastErr == nil
	})
	t.Logf("timing: %s read every acknowledged block %v after the heal", victim.Name, took)
	c.putEventually(victim, 3, 60*time.Second)
	t.Logf("timing: %s took writes again %v after the heal", victim.Name, time.Since(healed).Round(time.Millisecond))

	// Whole again: everything acknowledged is everywhere, with its bytes,
	// and the refused write is nowhere.
	for _, nd := range c.nodes {
		acked, lost, wrong, err := c.readBack(nd)
		res.acked, res.lost, res.wrong = acked, max(res.lost, lost), max(res.wrong, wrong)
		if err != nil {
			t.Errorf("%v (%d lost, %d wrong of %d acknowledged)", err, lost, wrong, acked)
		}
		if _, err := nd.hc.Get(client.WithLinearizable(context.Background()), refused); !errors.Is(err, block.ErrNotFound) {
			t.Fatalf("%s after the heal: the refused write: want NotFound, got %v", nd.Name, err)
		}
	}
	c.mu.Lock()
	res.failed = c.failed - failedBefore
	c.mu.Unlock()
	if res.lost == 0 && res.wrong == 0 {
		t.Logf("%d acknowledged blocks read back with the right bytes through all three nodes", res.acked)
	}
	watch.check(t)
	return res
}
