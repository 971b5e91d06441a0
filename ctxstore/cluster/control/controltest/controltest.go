// Package controltest runs small clusters for the tests of the cluster's
// HTTP endpoints (ctxstore/cluster/control and gateway/clusterapi): real
// in-memory Raft nodes (hashicorp/raft's in-memory transport, which a test
// can cut), each behind a real HTTP server serving the handler the test
// builds for it. Nodes join through control.Join over HTTP, as ctxd's do.
package controltest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// Log is the tests' logger: discarded, unless CLUSTERAPI_TEST_LOG is set
// (then debug lines on stderr).
func Log() *slog.Logger {
	if os.Getenv("CLUSTERAPI_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Target is a control.ForwardTarget that echoes its input prefixed with
// its node's id, or fails with Err.
type Target struct {
	Mu   sync.Mutex
	Got  [][]byte
	Err  error
	Node string
}

// HandleForwarded implements control.ForwardTarget.
func (f *Target) HandleForwarded(_ context.Context, req []byte) ([]byte, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.Got = append(f.Got, append([]byte(nil), req...))
	if f.Err != nil {
		return nil, f.Err
	}
	return append([]byte(f.Node+":"), req...), nil
}

// Received is how many proposals the target was given.
func (f *Target) Received() int {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return len(f.Got)
}

// SetErr makes the target fail with err (nil: echo).
func (f *Target) SetErr(err error) {
	f.Mu.Lock()
	f.Err = err
	f.Mu.Unlock()
}

// Node is one in-memory Raft node behind a real HTTP server.
type Node struct {
	ID   string
	Raft *raft.Node
	Srv  *httptest.Server
	Tr   *hraft.InmemTransport
	// Proposals is the node's forward target.
	Proposals *Target
}

// Addr is the node's HTTP address.
func (n *Node) Addr() string { return n.Srv.Listener.Addr().String() }

// Member is the node's member record.
func (n *Node) Member() fsm.Member {
	return fsm.Member{ID: n.ID, RaftAddr: string(n.Tr.LocalAddr()), DataAddr: "127.0.0.1:9", HTTPAddr: n.Addr(), Zone: "z1", Capacity: 1 << 30}
}

// Cut disconnects n from others (connect false) or reconnects it.
func (n *Node) Cut(others []*Node, connect bool) {
	for _, o := range others {
		if o == n {
			continue
		}
		if connect {
			n.Tr.Connect(o.Tr.LocalAddr(), o.Tr)
			o.Tr.Connect(n.Tr.LocalAddr(), n.Tr)
		} else {
			n.Tr.Disconnect(o.Tr.LocalAddr())
			o.Tr.Disconnect(n.Tr.LocalAddr())
		}
	}
}

// Cluster is a test's nodes.
type Cluster struct {
	T     *testing.T
	Nodes []*Node
	// Opts are the control options of Join and of every node's server.
	Opts []control.Option
	// Handler builds a node's HTTP handler; nil serves the control
	// endpoints alone (control.NewServer over the node and its Proposals,
	// with Opts).
	Handler func(n *Node) http.Handler
}

// New starts n nodes serving the control endpoints with opts: n1
// bootstraps alone and the others join with control.Join over HTTP, given
// their own address first (it answers 503 until they know a leader) and
// then n1's.
func New(t *testing.T, n int, opts ...control.Option) *Cluster {
	t.Helper()
	return (&Cluster{T: t, Opts: opts}).Start(n)
}

// Start starts c's n nodes as New does.
func (c *Cluster) Start(n int) *Cluster {
	t := c.T
	t.Helper()
	for i := 0; i < n; i++ {
		c.Add(i == 0)
	}
	c.WaitLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for _, tn := range c.Nodes[1:] {
		if err := control.Join(ctx, []string{tn.Addr(), c.Nodes[0].Addr()}, tn.Member(), c.Opts...); err != nil {
			t.Fatalf("join %s: %v", tn.ID, err)
		}
	}
	for _, tn := range c.Nodes {
		c.Eventually(tn.ID+" sees every member", func() bool {
			lm, ok := tn.Raft.LeaderMember()
			return ok && lm.HTTPAddr != "" && len(tn.Raft.FSM().Members()) == n
		})
	}
	return c
}

// Add starts one more node (not yet joined unless it bootstraps).
func (c *Cluster) Add(bootstrap bool) *Node {
	t := c.T
	t.Helper()
	id := fmt.Sprintf("n%d", len(c.Nodes)+1)
	srv := httptest.NewUnstartedServer(nil)
	_, tr := hraft.NewInmemTransport(hraft.ServerAddress(id + ":1"))
	for _, o := range c.Nodes {
		tr.Connect(o.Tr.LocalAddr(), o.Tr)
		o.Tr.Connect(tr.LocalAddr(), tr)
	}
	cfg := raft.DefaultConfig()
	cfg.NodeID, cfg.RaftAddr, cfg.Bootstrap = id, id+":1", bootstrap
	// Timeouts of 500 ms rather than 100 ms: on a loaded 2-core machine
	// under -race a 100 ms stall is common, and a spurious election moves
	// the leader that a test captured once.
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 500*time.Millisecond, 500*time.Millisecond, 500*time.Millisecond
	cfg.CommitTimeout, cfg.ApplyTimeout = 5*time.Millisecond, 2*time.Second
	tn := &Node{ID: id, Srv: srv, Tr: tr, Proposals: &Target{Node: id}}
	cfg.Self = fsm.Member{DataAddr: "127.0.0.1:9", HTTPAddr: tn.Addr(), Zone: "z1", Capacity: 1 << 30}
	store := hraft.NewInmemStore()
	node, err := raft.OpenWith(context.Background(), cfg, Log(), nil, raft.Deps{Logs: store, Stable: store, Snapshots: hraft.NewInmemSnapshotStore(), Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	tn.Raft = node
	if c.Handler != nil {
		srv.Config.Handler = c.Handler(tn)
	} else {
		srv.Config.Handler = control.NewServer(node, tn.Proposals, Log(), c.Opts...)
	}
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		node.Close()
	})
	c.Nodes = append(c.Nodes, tn)
	return tn
}

// Eventually waits up to 10 s for cond, failing the test after.
func (c *Cluster) Eventually(what string, cond func() bool) {
	c.T.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.T.Fatalf("timed out waiting for %s", what)
}

// WaitLeader waits for a leader and returns it.
func (c *Cluster) WaitLeader() *Node {
	c.T.Helper()
	var l *Node
	c.Eventually("a leader", func() bool {
		for _, n := range c.Nodes {
			if n.Raft.IsLeader() {
				l = n
				return true
			}
		}
		return false
	})
	return l
}

// Follower returns a node that does not lead.
func (c *Cluster) Follower() *Node {
	c.T.Helper()
	for _, n := range c.Nodes {
		if !n.Raft.IsLeader() {
			return n
		}
	}
	c.T.Fatal("no follower")
	return nil
}

// ByID returns node id.
func (c *Cluster) ByID(id string) *Node {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n
		}
	}
	c.T.Fatalf("no node %s", id)
	return nil
}

// HasVoter reports whether id is a voter in n's configuration.
func HasVoter(n *raft.Node, id string) bool {
	for _, s := range n.Servers() {
		if s.ID == id && s.Voter {
			return true
		}
	}
	return false
}

// ErrorCase is a request that must get the standard error reply.
type ErrorCase struct {
	Name, Method, Path, Body string
	// Status and Code are the HTTP status and the error code (in the body
	// and in the error-code header) the reply must carry.
	Status int
	Code   string
}

// CheckErrorReplies sends each case to the node at addr and checks its
// reply: the status, and a JSON error body with the code and a message,
// the code in the error-code header too.
func CheckErrorReplies(t *testing.T, addr string, cases []ErrorCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			req, err := http.NewRequest(tc.Method, "http://"+addr+tc.Path, strings.NewReader(tc.Body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var eb httpwire.ErrorBody
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.Status || json.Unmarshal(b, &eb) != nil || eb.Code != tc.Code || eb.Message == "" || resp.Header.Get(httpwire.HeaderErrorCode) != tc.Code {
				t.Errorf("got %d %s, want %d %s", resp.StatusCode, b, tc.Status, tc.Code)
			}
		})
	}
}
