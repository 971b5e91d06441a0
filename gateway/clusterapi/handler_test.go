package clusterapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

func TestStatusLeaderAndFollower(t *testing.T) {
	c := newCluster(t, 3)
	ctx := context.Background()
	leader := c.waitLeader()
	for _, tn := range c.nodes {
		resp, err := http.Get("http://" + tn.addr() + PathStatus)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var top map[string]json.RawMessage
		if resp.StatusCode != 200 || json.Unmarshal(raw, &top) != nil || top["leader"] == nil || top["members"] == nil || top["raft"] == nil {
			t.Fatalf("%s: status %d body %s", tn.id, resp.StatusCode, raw)
		}
		st, err := NewClient(tn.addr()).Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wantState := "follower"
		if tn == leader {
			wantState = "leader"
		}
		if st.NodeID != tn.id || st.State != wantState {
			t.Errorf("%s: node_id %q state %q, want %q", tn.id, st.NodeID, st.State, wantState)
		}
		if st.Leader == nil || st.Leader.ID != leader.id || st.Leader.HTTPAddr != leader.addr() || !st.Leader.Leader {
			t.Errorf("%s: leader %+v, want %s at %s", tn.id, st.Leader, leader.id, leader.addr())
		}
		if got := memberIDs(st.Members); got != "n1/alive/voter=true,n2/alive/voter=true,n3/alive/voter=true" {
			t.Errorf("%s: members %s", tn.id, got)
		}
		for _, m := range st.Members {
			if m.HTTPAddr != c.byID(m.ID).addr() || m.RaftAddr != m.ID+":1" || m.Zone != "z1" || m.Capacity != 1<<30 || m.DataAddr == "" {
				t.Errorf("%s: member %+v", tn.id, m)
			}
		}
		if st.Raft.Term == 0 || st.Raft.CommitIndex == 0 || st.Raft.AppliedIndex == 0 || st.Raft.NumPeers != 2 || st.Raft.LastContact == "" {
			t.Errorf("%s: raft %+v", tn.id, st.Raft)
		}
		var extra struct{ Node string }
		if err := json.Unmarshal(st.Extra, &extra); err != nil || extra.Node != tn.id {
			t.Errorf("%s: extra %s", tn.id, st.Extra)
		}
		rep, err := NewClient(tn.addr()).Repair(ctx)
		if err != nil || rep.NodeID != tn.id || !strings.Contains(string(rep.Repair), `"rebuilt_blocks":7`) {
			t.Errorf("%s: repair %+v %s %v", tn.id, rep, rep.Repair, err)
		}
	}
}

func TestMembershipThroughFollowers(t *testing.T) {
	c := newCluster(t, 3)
	ctx := context.Background()
	leader := c.waitLeader()
	f := c.follower()

	// Join n4 by posting to a follower: it forwards to the leader.
	n4 := c.add(false)
	m, err := NewClient(f.addr()).Join(ctx, FromMember(n4.member()))
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != "n4" || !m.Voter || m.HTTPAddr != n4.addr() {
		t.Errorf("join reply %+v", m)
	}
	c.eventually("n4 is a voter that knows the leader", func() bool {
		lid, _ := n4.node.Leader()
		return lid == leader.id && hasVoter(leader.node, "n4")
	})
	// Joining again changes nothing and succeeds.
	if _, err := NewClient(f.addr()).Join(ctx, FromMember(n4.member())); err != nil {
		t.Fatalf("second join: %v", err)
	}

	// Transfer leadership to n4 through a follower.
	tr, err := NewClient(f.addr()).TransferLeadership(ctx, "n4")
	if err != nil {
		t.Fatal(err)
	}
	if tr.Previous != leader.id {
		t.Errorf("transfer %+v, previous want %s", tr, leader.id)
	}
	c.eventually("n4 leads", n4.node.IsLeader)
	// Transfer to the leader itself is a no-op.
	if tr, err := NewClient(n4.addr()).TransferLeadership(ctx, "n4"); err != nil || tr.Leader != "n4" {
		t.Fatalf("self transfer %+v %v", tr, err)
	}

	// Remove the leader (n4) through a follower: n4 hands leadership over,
	// then the new leader removes it and marks it left.
	if err := NewClient(f.addr()).Remove(ctx, "n4"); err != nil {
		t.Fatal(err)
	}
	var newLeader *tnode
	c.eventually("a new leader without n4", func() bool {
		for _, tn := range c.nodes[:3] {
			if tn.node.IsLeader() && !hasVoter(tn.node, "n4") {
				newLeader = tn
				return true
			}
		}
		return false
	})
	c.eventually("n4 marked left", func() bool {
		mm, ok := newLeader.node.FSM().Member("n4")
		return ok && mm.State == fsm.MemberLeft
	})
	c.eventually("the follower's status shows n4 left", func() bool {
		st, err := NewClient(f.addr()).Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(memberIDs(st.Members), "n4/left/voter=false")
	})

	// Remove a follower by id, on the leader directly; then an unknown id.
	victim := c.follower()
	if victim == f {
		for _, tn := range c.nodes[:3] {
			if !tn.node.IsLeader() && tn != f {
				victim = tn
			}
		}
	}
	if err := NewClient(newLeader.addr()).Remove(ctx, victim.id); err != nil {
		t.Fatal(err)
	}
	if hasVoter(newLeader.node, victim.id) {
		t.Errorf("%s still a voter", victim.id)
	}
	if err := NewClient(f.addr()).Remove(ctx, "nope"); !errors.Is(err, block.ErrNotFound) {
		t.Errorf("remove unknown: %v", err)
	}
	// Transfer with no id picks a follower.
	l := c.waitLeader()
	tr, err = NewClient(l.addr()).TransferLeadership(ctx, "")
	if err != nil || tr.Previous != l.id {
		t.Fatalf("transfer to any: %+v %v", tr, err)
	}
	c.eventually("leadership moved", func() bool { return !l.node.IsLeader() && c.waitLeader() != l })
}

func hasVoter(n *raft.Node, id string) bool {
	for _, s := range n.Servers() {
		if s.ID == id && s.Voter {
			return true
		}
	}
	return false
}

func TestProposeForwarding(t *testing.T) {
	c := newCluster(t, 3)
	ctx := context.Background()
	leader := c.waitLeader()
	f := c.follower()
	fw := NewForwarder(nil)

	lm, ok := f.node.LeaderMember()
	if !ok {
		t.Fatal("follower knows no leader")
	}
	out, err := fw.Forward(ctx, lm, []byte("batch-1"))
	if err != nil || string(out) != leader.id+":batch-1" {
		t.Fatalf("forward: %q %v", out, err)
	}
	if len(leader.fwd.got) != 1 || len(f.fwd.got) != 0 {
		t.Errorf("leader got %d, follower %d", len(leader.fwd.got), len(f.fwd.got))
	}

	// A stale leader view: the follower answers 503 naming the leader.
	_, err = fw.Forward(ctx, f.member(), []byte("x"))
	var hint *LeaderHintError
	if !errors.As(err, &hint) || hint.LeaderHTTPAddr != leader.addr() || hint.LeaderID != leader.id ||
		!errors.Is(err, raft.ErrNotLeader) || !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("forward to follower: %v", err)
	}
	if len(f.fwd.got) != 0 {
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
			leader.fwd.mu.Lock()
			leader.fwd.err = tc.err
			leader.fwd.mu.Unlock()
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

func TestBadInput(t *testing.T) {
	c := newCluster(t, 1)
	tn := c.nodes[0]
	good := `{"id":"n9","raft_addr":"n9:1","data_addr":"127.0.0.1:2","http_addr":"127.0.0.1:3"}`
	cases := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"join not json", "POST", PathJoin, "{", 400, "InvalidArgument"},
		{"join empty", "POST", PathJoin, "", 400, "InvalidArgument"},
		{"join unknown field", "POST", PathJoin, strings.Replace(good, `"id"`, `"bogus":1,"id"`, 1), 400, "InvalidArgument"},
		{"join trailing data", "POST", PathJoin, good + "{}", 400, "InvalidArgument"},
		{"join no id", "POST", PathJoin, strings.Replace(good, `"n9"`, `""`, 1), 400, "InvalidArgument"},
		{"join id with space", "POST", PathJoin, strings.Replace(good, `"n9"`, `"n 9"`, 1), 400, "InvalidArgument"},
		{"join no http addr", "POST", PathJoin, strings.Replace(good, `"127.0.0.1:3"`, `""`, 1), 400, "InvalidArgument"},
		{"join unspecified raft addr", "POST", PathJoin, strings.Replace(good, `"n9:1"`, `"0.0.0.0:7000"`, 1), 400, "InvalidArgument"},
		{"join bad port", "POST", PathJoin, strings.Replace(good, `"127.0.0.1:2"`, `"127.0.0.1:x"`, 1), 400, "InvalidArgument"},
		{"join negative capacity", "POST", PathJoin, strings.Replace(good, `}`, `,"capacity":-1}`, 1), 400, "InvalidArgument"},
		{"join dead state", "POST", PathJoin, strings.Replace(good, `}`, `,"state":"dead"}`, 1), 400, "InvalidArgument"},
		{"join too large", "POST", PathJoin, `{"id":"` + strings.Repeat("a", 17<<20) + `"}`, 413, "TooLarge"},
		{"remove no id", "POST", PathRemove, `{}`, 400, "InvalidArgument"},
		{"remove unknown", "POST", PathRemove, `{"id":"zz"}`, 404, "NotFound"},
		{"remove only voter", "POST", PathRemove, `{"id":"n1"}`, 400, "InvalidArgument"},
		{"transfer unknown", "POST", PathTransfer, `{"id":"zz"}`, 400, "InvalidArgument"},
		{"transfer bad json", "POST", PathTransfer, `[]`, 400, "InvalidArgument"},
		{"unknown path", "GET", "/v1/cluster/nope", "", 404, "NotFound"},
		{"wrong method", "GET", PathJoin, "", 404, "NotFound"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, "http://"+tn.addr()+tc.path, strings.NewReader(tc.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var eb httpwire.ErrorBody
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || json.Unmarshal(b, &eb) != nil || eb.Code != tc.code || eb.Message == "" || resp.Header.Get(httpwire.HeaderErrorCode) != tc.code {
				t.Errorf("got %d %s, want %d %s", resp.StatusCode, b, tc.status, tc.code)
			}
		})
	}
	// Nothing was changed by the bad requests.
	if ms := tn.node.FSM().Members(); len(ms) != 1 || len(tn.node.Servers()) != 1 {
		t.Errorf("members after bad input: %+v", ms)
	}
}

func TestNoRepairAndNoForwardTarget(t *testing.T) {
	c := newCluster(t, 1)
	tn := c.nodes[0]
	h := Handler(tn.node, nil, nil, quietLog())
	for _, tc := range []struct {
		method, path string
		status       int
		body         string
	}{{"GET", PathRepair, 404, ""}, {"POST", PathPropose, 503, ""}, {"POST", PathDrain, 400, `{"id":"n1"}`}} {
		rec := newRecorder(h, tc.method, tc.path, []byte(tc.body), nil)
		if rec.Code != tc.status {
			t.Errorf("%s %s: %d %s", tc.method, tc.path, rec.Code, rec.Body)
		}
	}
	rec := newRecorder(h, "GET", PathStatus, nil, nil)
	var st map[string]json.RawMessage
	if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &st) != nil || st["extra"] != nil {
		t.Errorf("status without extra: %d %s", rec.Code, rec.Body)
	}
}

func TestToken(t *testing.T) {
	// The cluster forms with the token (Join sends it).
	c := newCluster(t, 2, WithToken("s3cret"))
	ctx := context.Background()
	leader := c.waitLeader()
	f := c.follower()
	if _, err := NewClient(f.addr()).Status(ctx); err != nil {
		t.Fatalf("status needs no token: %v", err)
	}
	if _, err := NewClient(f.addr()).TransferLeadership(ctx, ""); !errors.Is(err, block.ErrUnauthenticated) {
		t.Errorf("transfer without token: %v", err)
	}
	if _, err := NewClient(f.addr(), WithToken("wrong")).TransferLeadership(ctx, ""); !errors.Is(err, block.ErrUnauthenticated) {
		t.Errorf("transfer with a wrong token: %v", err)
	}
	lm, _ := f.node.LeaderMember()
	if _, err := NewForwarder(nil).Forward(ctx, lm, []byte("p")); !errors.Is(err, block.ErrUnauthenticated) {
		t.Errorf("propose without token: %v", err)
	}
	if out, err := NewForwarder(nil, WithToken("s3cret")).Forward(ctx, lm, []byte("p")); err != nil || string(out) != leader.id+":p" {
		t.Errorf("propose with token: %q %v", out, err)
	}
	// The follower forwards with its own token: the leader accepts.
	if _, err := NewClient(f.addr(), WithToken("s3cret")).TransferLeadership(ctx, f.id); err != nil {
		t.Errorf("transfer with token: %v", err)
	}
	// A join with a bad token fails at once, without retrying until ctx
	// ends: a retrying Join would return only at the deadline, with
	// DeadlineExceeded in its error.
	jctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	start := time.Now()
	self := fsm.Member{ID: "n9", RaftAddr: "n9:1", DataAddr: "127.0.0.1:2", HTTPAddr: "127.0.0.1:3"}
	err := Join(jctx, []string{f.addr()}, self, WithToken("wrong"))
	if !errors.Is(err, block.ErrUnauthenticated) || errors.Is(err, context.DeadlineExceeded) || jctx.Err() != nil {
		t.Errorf("join with wrong token: %v after %v", err, time.Since(start))
	}
	t.Logf("join with a wrong token refused after %v", time.Since(start))
}

func TestJoinErrors(t *testing.T) {
	ctx := context.Background()
	ok := fsm.Member{ID: "n9", RaftAddr: "n9:1", DataAddr: "127.0.0.1:2", HTTPAddr: "127.0.0.1:3"}
	if err := Join(ctx, nil, ok); !errors.Is(err, block.ErrInvalidArgument) {
		t.Errorf("no addrs: %v", err)
	}
	bad := ok
	bad.HTTPAddr = ""
	if err := Join(ctx, []string{"127.0.0.1:1"}, bad); !errors.Is(err, block.ErrInvalidArgument) {
		t.Errorf("bad self: %v", err)
	}
	// Nothing listens: retries until the deadline, then says why.
	dctx, cancel := context.WithTimeout(ctx, 400*time.Millisecond)
	defer cancel()
	err := Join(dctx, []string{"127.0.0.1:1", "http://127.0.0.1:2/"}, ok)
	if !errors.Is(err, block.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("unreachable: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"default", func(*Config) {}, true},
		{"token", func(c *Config) { c.Token = "abc-123" }, true},
		{"zero timeout", func(c *Config) { c.Timeout = 0 }, false},
		{"zero leader wait", func(c *Config) { c.LeaderWait = 0 }, false},
		{"small body", func(c *Config) { c.MaxBodyBytes = 10 }, false},
		{"token with space", func(c *Config) { c.Token = "a b" }, false},
	} {
		c := DefaultConfig()
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
		var m Member
		if decodeJSONBytes(b, &m, false) != nil {
			return
		}
		fm, err := m.FSM()
		if err != nil {
			return
		}
		if err := fm.Validate(); err != nil {
			t.Fatalf("accepted member fails fsm validation: %v", err)
		}
		back := FromMember(fm)
		if back.ID != m.ID || back.RaftAddr != m.RaftAddr || back.HTTPAddr != m.HTTPAddr || back.State != "alive" {
			t.Fatalf("round trip %+v -> %+v", m, back)
		}
		enc, _ := json.Marshal(back)
		var again Member
		if err := decodeJSONBytes(bytes.TrimSpace(enc), &again, false); err != nil {
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
	c := newCluster(t, 3, WithLeaderWait(time.Minute))
	c.waitLeader()
	f := c.follower()
	cut := func(connect bool) {
		for _, o := range c.nodes {
			if o == f {
				continue
			}
			if connect {
				f.tr.Connect(o.tr.LocalAddr(), o.tr)
				o.tr.Connect(f.tr.LocalAddr(), f.tr)
			} else {
				f.tr.Disconnect(o.tr.LocalAddr())
				o.tr.Disconnect(f.tr.LocalAddr())
			}
		}
	}
	cut(false)
	c.eventually("the cut-off follower knows no leader", func() bool {
		id, _ := f.node.Leader()
		return id == ""
	})
	n4 := c.add(false)
	const heal = 400 * time.Millisecond
	time.AfterFunc(heal, func() { cut(true) })
	start := time.Now()
	m, err := NewClient(f.addr()).Join(context.Background(), FromMember(n4.member()))
	if err != nil {
		t.Fatalf("join through a follower that regains a leader after %v: %v", heal, err)
	}
	waited := time.Since(start)
	if waited < heal || m.ID != "n4" {
		t.Fatalf("join answered %+v after %v: it did not wait for the leader", m, waited)
	}
	t.Logf("join through the cut-off follower answered %v after the request (heal at %v)", waited, heal)
	c.eventually("n4 is a voter", func() bool {
		for _, tn := range c.nodes[:3] {
			if tn.node.IsLeader() {
				return hasVoter(tn.node, "n4")
			}
		}
		return false
	})
}

// TestForwardGivesUpWithoutALeader: a member that cannot reach a leader
// answers 503 (unavailable, no leader known) after the bounded wait.
func TestForwardGivesUpWithoutALeader(t *testing.T) {
	c := newCluster(t, 3)
	c.waitLeader()
	f := c.follower()
	for _, o := range c.nodes {
		if o != f {
			f.tr.Disconnect(o.tr.LocalAddr())
			o.tr.Disconnect(f.tr.LocalAddr())
		}
	}
	c.eventually("the cut-off follower knows no leader", func() bool {
		id, _ := f.node.Leader()
		return id == ""
	})
	start := time.Now()
	err := NewClient(f.addr()).Remove(context.Background(), "n3")
	if !errors.Is(err, block.ErrUnavailable) || !strings.Contains(fmt.Sprint(err), "no leader known") {
		t.Fatalf("remove without a leader: %v, want unavailable, no leader known", err)
	}
	if waited, wait := time.Since(start), DefaultConfig().LeaderWait; waited < wait {
		t.Fatalf("answered after %v, before the %v wait", waited, wait)
	}
}
