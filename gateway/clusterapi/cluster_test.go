package clusterapi

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

func quietLog() *slog.Logger {
	if os.Getenv("CLUSTERAPI_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// fakeTarget is a ForwardTarget that echoes its input, or fails with err.
type fakeTarget struct {
	mu   sync.Mutex
	got  [][]byte
	err  error
	node string
}

func (f *fakeTarget) HandleForwarded(_ context.Context, req []byte) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, append([]byte(nil), req...))
	if f.err != nil {
		return nil, f.err
	}
	return append([]byte(f.node+":"), req...), nil
}

// tnode is one in-memory Raft node behind a real HTTP server.
type tnode struct {
	id   string
	node *raft.Node
	srv  *httptest.Server
	tr   *hraft.InmemTransport
	fwd  *fakeTarget
}

func (n *tnode) addr() string { return n.srv.Listener.Addr().String() }

func (n *tnode) member() fsm.Member {
	return fsm.Member{ID: n.id, RaftAddr: string(n.tr.LocalAddr()), DataAddr: "127.0.0.1:9", HTTPAddr: n.addr(), Zone: "z1", Capacity: 1 << 30}
}

type tcluster struct {
	t     *testing.T
	nodes []*tnode
	opts  []Option
	// drain, when set, makes every node's forward target a Drainer.
	drain *drainState
	// keys, when set, gets each node's access-key store (WithKeys), made
	// over the node by newKeys.
	keys    map[string]*credential.Replicated
	newKeys func(*raft.Node) *credential.Replicated
}

// newCluster starts n nodes: n1 bootstraps alone and the others join
// with Join over HTTP, given their own address first (it answers 503
// until they know a leader) and then n1's.
func newCluster(t *testing.T, n int, opts ...Option) *tcluster {
	t.Helper()
	return newClusterWith(t, n, nil, opts...)
}

// newClusterWith is newCluster whose nodes drain through drain (nil: no Drainer).
func newClusterWith(t *testing.T, n int, drain *drainState, opts ...Option) *tcluster {
	t.Helper()
	return startCluster(&tcluster{t: t, opts: opts, drain: drain}, n)
}

// startCluster starts c's n nodes as newCluster does.
func startCluster(c *tcluster, n int) *tcluster {
	t := c.t
	t.Helper()
	opts := c.opts
	for i := 0; i < n; i++ {
		c.add(i == 0)
	}
	c.waitLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for _, tn := range c.nodes[1:] {
		if err := Join(ctx, []string{tn.addr(), c.nodes[0].addr()}, tn.member(), opts...); err != nil {
			t.Fatalf("join %s: %v", tn.id, err)
		}
	}
	for _, tn := range c.nodes {
		c.eventually(tn.id+" sees every member", func() bool {
			lm, ok := tn.node.LeaderMember()
			return ok && lm.HTTPAddr != "" && len(tn.node.FSM().Members()) == n
		})
	}
	return c
}

// add starts one more node (not yet joined unless it bootstraps).
func (c *tcluster) add(bootstrap bool) *tnode {
	t := c.t
	t.Helper()
	id := fmt.Sprintf("n%d", len(c.nodes)+1)
	srv := httptest.NewUnstartedServer(nil)
	_, tr := hraft.NewInmemTransport(hraft.ServerAddress(id + ":1"))
	for _, o := range c.nodes {
		tr.Connect(o.tr.LocalAddr(), o.tr)
		o.tr.Connect(tr.LocalAddr(), tr)
	}
	cfg := raft.DefaultConfig()
	cfg.NodeID, cfg.RaftAddr, cfg.Bootstrap = id, id+":1", bootstrap
	// Timeouts of 500 ms rather than 100 ms: on a loaded 2-core machine
	// under -race a 100 ms stall is common, and a spurious election moves
	// the leader that a test captured once.
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 500*time.Millisecond, 500*time.Millisecond, 500*time.Millisecond
	cfg.CommitTimeout, cfg.ApplyTimeout = 5*time.Millisecond, 2*time.Second
	tn := &tnode{id: id, srv: srv, tr: tr, fwd: &fakeTarget{node: id}}
	cfg.Self = fsm.Member{DataAddr: "127.0.0.1:9", HTTPAddr: tn.addr(), Zone: "z1", Capacity: 1 << 30}
	store := hraft.NewInmemStore()
	node, err := raft.OpenWith(context.Background(), cfg, quietLog(), nil, raft.Deps{Logs: store, Stable: store, Snapshots: hraft.NewInmemSnapshotStore(), Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	tn.node = node
	extra := func() any {
		return map[string]any{"node": id, "repair": map[string]any{"pending_blocks": 3, "rebuilt_blocks": 7}}
	}
	var target ForwardTarget = tn.fwd
	if c.drain != nil {
		target = &fakeDrainer{fakeTarget: tn.fwd, node: node, st: c.drain}
	}
	opts := c.opts
	if c.newKeys != nil {
		k := c.newKeys(node)
		c.keys[id] = k
		opts = append(slices.Clone(opts), WithKeys(k))
	}
	srv.Config.Handler = Handler(node, target, extra, quietLog(), opts...)
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		node.Close()
	})
	c.nodes = append(c.nodes, tn)
	return tn
}

func (c *tcluster) eventually(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.t.Fatalf("timed out waiting for %s", what)
}

func (c *tcluster) waitLeader() *tnode {
	c.t.Helper()
	var l *tnode
	c.eventually("a leader", func() bool {
		for _, n := range c.nodes {
			if n.node.IsLeader() {
				l = n
				return true
			}
		}
		return false
	})
	return l
}

func (c *tcluster) follower() *tnode {
	c.t.Helper()
	for _, n := range c.nodes {
		if !n.node.IsLeader() {
			return n
		}
	}
	c.t.Fatal("no follower")
	return nil
}

func (c *tcluster) byID(id string) *tnode {
	for _, n := range c.nodes {
		if n.id == id {
			return n
		}
	}
	c.t.Fatalf("no node %s", id)
	return nil
}

func memberIDs(ms []Member) string {
	var ids []string
	for _, m := range ms {
		ids = append(ids, fmt.Sprintf("%s/%s/voter=%v", m.ID, m.State, m.Voter))
	}
	return strings.Join(ids, ",")
}
