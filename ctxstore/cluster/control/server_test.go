package control_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control/controltest"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

func TestProposeForwarding(t *testing.T) {
	c := controltest.New(t, 3)
	ctx := context.Background()
	leader := c.WaitLeader()
	f := c.Follower()
	fw := control.NewForwarder(nil)

	lm, ok := f.Raft.LeaderMember()
	if !ok {
		t.Fatal("follower knows no leader")
	}
	out, err := fw.Forward(ctx, lm, []byte("batch-1"))
	if err != nil || string(out) != leader.ID+":batch-1" {
		t.Fatalf("forward: %q %v", out, err)
	}
	if leader.Proposals.Received() != 1 || f.Proposals.Received() != 0 {
		t.Errorf("leader got %d, follower %d", leader.Proposals.Received(), f.Proposals.Received())
	}

	// A stale leader view: the follower answers 503 naming the leader.
	_, err = fw.Forward(ctx, f.Member(), []byte("x"))
	var hint *control.LeaderHintError
	if !errors.As(err, &hint) || hint.LeaderHTTPAddr != leader.Addr() || hint.LeaderID != leader.ID ||
		!errors.Is(err, raft.ErrNotLeader) || !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("forward to follower: %v", err)
	}
	if f.Proposals.Received() != 0 {
		t.Error("follower executed a forwarded proposal")
	}

	cases := []struct {
		name   string
		target fsm.Member
		err    error
		want   []error
	}{
		{"conflict keeps its sentinel", lm, block.ErrConflict, []error{block.ErrConflict}},
		{"invalid keeps its sentinel", lm, block.ErrInvalidArgument, []error{block.ErrInvalidArgument}},
		{"internal becomes unavailable", lm, errors.New("boom"), []error{block.ErrUnavailable}},
		{"no leader address", fsm.Member{ID: "x"}, nil, []error{block.ErrUnavailable}},
		{"dead leader", fsm.Member{ID: "x", HTTPAddr: "127.0.0.1:1"}, nil, []error{block.ErrUnavailable}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			leader.Proposals.SetErr(tc.err)
			_, err := fw.Forward(ctx, tc.target, []byte("y"))
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("err %v, want %v", err, w)
				}
			}
		})
	}
	// A caller's deadline bounds the forward.
	dctx, cancel := context.WithTimeout(ctx, time.Nanosecond)
	defer cancel()
	time.Sleep(time.Millisecond)
	if _, err := fw.Forward(dctx, lm, []byte("z")); !errors.Is(err, block.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("expired ctx: %v", err)
	}
}

func TestJoinErrors(t *testing.T) {
	ctx := context.Background()
	ok := fsm.Member{ID: "n9", RaftAddr: "n9:1", DataAddr: "127.0.0.1:2", HTTPAddr: "127.0.0.1:3"}
	if err := control.Join(ctx, nil, ok); !errors.Is(err, block.ErrInvalidArgument) {
		t.Errorf("no addrs: %v", err)
	}
	bad := ok
	bad.HTTPAddr = ""
	if err := control.Join(ctx, []string{"127.0.0.1:1"}, bad); !errors.Is(err, block.ErrInvalidArgument) {
		t.Errorf("bad self: %v", err)
	}
	// Nothing listens: retries until the deadline, then says why.
	dctx, cancel := context.WithTimeout(ctx, 400*time.Millisecond)
	defer cancel()
	err := control.Join(dctx, []string{"127.0.0.1:1", "http://127.0.0.1:2/"}, ok)
	if !errors.Is(err, block.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("unreachable: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*control.Config)
		ok   bool
	}{
		{"default", func(*control.Config) {}, true},
		{"token", func(c *control.Config) { c.Token = "abc-123" }, true},
		{"zero timeout", func(c *control.Config) { c.Timeout = 0 }, false},
		{"zero leader wait", func(c *control.Config) { c.LeaderWait = 0 }, false},
		{"small body", func(c *control.Config) { c.MaxBodyBytes = 10 }, false},
		{"token with space", func(c *control.Config) { c.Token = "a b" }, false},
	} {
		c := control.DefaultConfig()
		tc.mod(&c)
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func FuzzJoinRequest(f *testing.F) {
	f.Add([]byte(`{"id":"n9","raft_addr":"n9:1","data_addr":"127.0.0.1:2","http_addr":"127.0.0.1:3","capacity":5}`))
	f.Add([]byte(`{"id":"","state":"dead"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m control.Member
		if control.DecodeJSONBytes(b, &m, false) != nil {
			return
		}
		fm, err := m.FSM()
		if err != nil {
			return
		}
		if err := fm.Validate(); err != nil {
			t.Fatalf("accepted member fails fsm validation: %v", err)
		}
		back := control.FromMember(fm)
		if back.ID != m.ID || back.RaftAddr != m.RaftAddr || back.HTTPAddr != m.HTTPAddr || back.State != "alive" {
			t.Fatalf("round trip %+v -> %+v", m, back)
		}
		enc, _ := json.Marshal(back)
		var again control.Member
		if err := control.DecodeJSONBytes(bytes.TrimSpace(enc), &again, false); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
	})
}

// TestForwardWaitsForALeader: a member that knows no leader (here: cut off
// from the others until it has lost the leader) holds a membership request
// until a leader is known again, then forwards it, instead of answering 503
// to a request that succeeds a moment later.
//
// The wait is a minute here, so that a loaded machine that takes seconds to
// elect and announce the leader again does not fail the test: what is
// checked is that the join waited for the heal and then succeeded.
func TestForwardWaitsForALeader(t *testing.T) {
	c := controltest.New(t, 3, control.WithLeaderWait(time.Minute))
	c.WaitLeader()
	f := c.Follower()
	cut := func(connect bool) { f.Cut(c.Nodes, connect) }
	cut(false)
	c.Eventually("the cut-off follower knows no leader", func() bool {
		id, _ := f.Raft.Leader()
		return id == ""
	})
	n4 := c.Add(false)
	const heal = 400 * time.Millisecond
	time.AfterFunc(heal, func() { cut(true) })
	start := time.Now()
	m, err := control.NewClient(f.Addr()).Join(context.Background(), control.FromMember(n4.Member()))
	if err != nil {
		t.Fatalf("join through a follower that regains a leader after %v: %v", heal, err)
	}
	waited := time.Since(start)
	if waited < heal || m.ID != "n4" {
		t.Fatalf("join answered %+v after %v: it did not wait for the leader", m, waited)
	}
	t.Logf("join through the cut-off follower answered %v after the request (heal at %v)", waited, heal)
	c.Eventually("n4 is a voter", func() bool {
		for _, tn := range c.Nodes[:3] {
			if tn.Raft.IsLeader() {
				return controltest.HasVoter(tn.Raft, "n4")
			}
		}
		return false
	})
}

func TestBadJoinInput(t *testing.T) {
	c := controltest.New(t, 1)
	tn := c.Nodes[0]
	good := `{"id":"n9","raft_addr":"n9:1","data_addr":"127.0.0.1:2","http_addr":"127.0.0.1:3"}`
	cases := []controltest.ErrorCase{
		{Name: "join not json", Method: "POST", Path: control.PathJoin, Body: "{", Status: 400, Code: "InvalidArgument"},
		{Name: "join empty", Method: "POST", Path: control.PathJoin, Body: "", Status: 400, Code: "InvalidArgument"},
		{Name: "join unknown field", Method: "POST", Path: control.PathJoin, Body: strings.Replace(good, `"id"`, `"bogus":1,"id"`, 1), Status: 400, Code: "InvalidArgument"},
		{Name: "join trailing data", Method: "POST", Path: control.PathJoin, Body: good + "{}", Status: 400, Code: "InvalidArgument"},
		{Name: "join no id", Method: "POST", Path: control.PathJoin, Body: strings.Replace(good, `"n9"`, `""`, 1), Status: 400, Code: "InvalidArgument"},
		{Name: "join id with space", Method: "POST", Path: control.PathJoin, Body: strings.Replace(good, `"n9"`, `"n 9"`, 1), Status: 400, Code: "InvalidArgument"},
		{Name: "join no http addr", Method: "POST", Path: control.PathJoin, Body: strings.Replace(good, `"127.0.0.1:3"`, `""`, 1), Status: 400, Code: "InvalidArgument"},
		{Name: "join unspecified raft addr", Method: "POST", Path: control.PathJoin, Body: strings.Replace(good, `"n9:1"`, `"0.0.0.0:7000"`, 1), Status: 400, Code: "InvalidArgument"},
		{Name: "join bad port", Method: "POST", Path: control.PathJoin, Body: strings.Replace(good, `"127.0.0.1:2"`, `"127.0.0.1:x"`, 1), Status: 400, Code: "InvalidArgument"},
		{Name: "join negative capacity", Method: "POST", Path: control.PathJoin, Body: strings.Replace(good, `}`, `,"capacity":-1}`, 1), Status: 400, Code: "InvalidArgument"},
		{Name: "join dead state", Method: "POST", Path: control.PathJoin, Body: strings.Replace(good, `}`, `,"state":"dead"}`, 1), Status: 400, Code: "InvalidArgument"},
		{Name: "join too large", Method: "POST", Path: control.PathJoin, Body: `{"id":"` + strings.Repeat("a", 17<<20) + `"}`, Status: 413, Code: "TooLarge"},
		{Name: "unknown internal path", Method: "GET", Path: "/v1/cluster/internal/nope", Body: "", Status: 404, Code: "NotFound"},
		{Name: "propose wrong method", Method: "GET", Path: control.PathPropose, Body: "", Status: 404, Code: "NotFound"},
		{Name: "wrong method", Method: "GET", Path: control.PathJoin, Body: "", Status: 404, Code: "NotFound"},
	}
	controltest.CheckErrorReplies(t, tn.Addr(), cases)
	// Nothing was changed by the bad requests.
	if ms := tn.Raft.FSM().Members(); len(ms) != 1 || len(tn.Raft.Servers()) != 1 {
		t.Errorf("members after bad input: %+v", ms)
	}
}

func TestToken(t *testing.T) {
	// The cluster forms with the token (control.Join sends it).
	c := controltest.New(t, 2, control.WithToken("s3cret"))
	ctx := context.Background()
	leader := c.WaitLeader()
	f := c.Follower()
	lm, _ := f.Raft.LeaderMember()
	if _, err := control.NewForwarder(nil).Forward(ctx, lm, []byte("p")); !errors.Is(err, block.ErrUnauthenticated) {
		t.Errorf("propose without token: %v", err)
	}
	if out, err := control.NewForwarder(nil, control.WithToken("s3cret")).Forward(ctx, lm, []byte("p")); err != nil || string(out) != leader.ID+":p" {
		t.Errorf("propose with token: %q %v", out, err)
	}
	// A join through the follower, relayed with its own token: the
	// leader accepts.
	n3 := c.Add(false)
	if _, err := control.NewClient(f.Addr(), control.WithToken("s3cret")).Join(ctx, control.FromMember(n3.Member())); err != nil {
		t.Errorf("join with token through a follower: %v", err)
	}
	if _, err := control.NewClient(f.Addr()).Join(ctx, control.FromMember(n3.Member())); !errors.Is(err, block.ErrUnauthenticated) {
		t.Errorf("join without token: %v", err)
	}
	// A join with a bad token fails at once, without retrying until ctx
	// ends: a retrying control.Join would return only at the deadline, with
	// DeadlineExceeded in its error.
	jctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	start := time.Now()
	self := fsm.Member{ID: "n9", RaftAddr: "n9:1", DataAddr: "127.0.0.1:2", HTTPAddr: "127.0.0.1:3"}
	err := control.Join(jctx, []string{f.Addr()}, self, control.WithToken("wrong"))
	if !errors.Is(err, block.ErrUnauthenticated) || errors.Is(err, context.DeadlineExceeded) || jctx.Err() != nil {
		t.Errorf("join with wrong token: %v after %v", err, time.Since(start))
	}
	t.Logf("join with a wrong token refused after %v", time.Since(start))
}

// TestNoForwardTarget: a server without a forward target answers a
// forwarded proposal 503 (unavailable), never 200.
func TestNoForwardTarget(t *testing.T) {
	c := controltest.New(t, 1)
	h := control.NewServer(c.Nodes[0].Raft, nil, controltest.Log())
	req := httptest.NewRequest(http.MethodPost, control.PathPropose, strings.NewReader("p"))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get(httpwire.HeaderErrorCode) != "Unavailable" {
		t.Errorf("propose without a target: %d %s", rec.Code, rec.Body)
	}
}

// TestPatterns: every control path is served under one of Patterns, so
// ctxd, which mounts the server there, routes each of them to it, and no
// other path under /v1/cluster/ (an unknown one included) is taken from
// the cluster API's handler.
func TestPatterns(t *testing.T) {
	mux := http.NewServeMux()
	for _, pat := range control.Patterns() {
		mux.HandleFunc(pat, func(http.ResponseWriter, *http.Request) {})
	}
	mux.HandleFunc("/v1/cluster/", func(http.ResponseWriter, *http.Request) {})
	for _, tc := range []struct {
		path    string
		control bool
	}{
		{control.PathJoin, true}, {control.PathPropose, true}, {control.PathReadIndex, true},
		{control.PathSessionEnd, true}, {control.PathTraffic, true},
		{"/v1/cluster/status", false}, {"/v1/cluster/internal/nope", false}, {"/v1/cluster/internal", false},
	} {
		_, pat := mux.Handler(httptest.NewRequest(http.MethodPost, tc.path, nil))
		if got := pat != "/v1/cluster/"; got != tc.control {
			t.Errorf("%s routed to %q; want control: %v (control.Patterns() %v)", tc.path, pat, tc.control, control.Patterns())
		}
	}
}
