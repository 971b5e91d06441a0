package clusterapi

import (
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
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control/controltest"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

func TestStatusLeaderAndFollower(t *testing.T) {
	c := newCluster(t, 3)
	ctx := context.Background()
	leader := c.WaitLeader()
	for _, tn := range c.Nodes {
		resp, err := http.Get("http://" + tn.Addr() + PathStatus)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var top map[string]json.RawMessage
		if resp.StatusCode != 200 || json.Unmarshal(raw, &top) != nil || top["leader"] == nil || top["members"] == nil || top["raft"] == nil {
			t.Fatalf("%s: status %d body %s", tn.ID, resp.StatusCode, raw)
		}
		st, err := NewClient(tn.Addr()).Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wantState := "follower"
		if tn == leader {
			wantState = "leader"
		}
		if st.NodeID != tn.ID || st.State != wantState {
			t.Errorf("%s: node_id %q state %q, want %q", tn.ID, st.NodeID, st.State, wantState)
		}
		if st.Leader == nil || st.Leader.ID != leader.ID || st.Leader.HTTPAddr != leader.Addr() || !st.Leader.Leader {
			t.Errorf("%s: leader %+v, want %s at %s", tn.ID, st.Leader, leader.ID, leader.Addr())
		}
		if got := memberIDs(st.Members); got != "n1/alive/voter=true,n2/alive/voter=true,n3/alive/voter=true" {
			t.Errorf("%s: members %s", tn.ID, got)
		}
		for _, m := range st.Members {
			if m.HTTPAddr != c.ByID(m.ID).Addr() || m.RaftAddr != m.ID+":1" || m.Zone != "z1" || m.Capacity != 1<<30 || m.DataAddr == "" {
				t.Errorf("%s: member %+v", tn.ID, m)
			}
		}
		if st.Raft.Term == 0 || st.Raft.CommitIndex == 0 || st.Raft.AppliedIndex == 0 || st.Raft.NumPeers != 2 || st.Raft.LastContact == "" {
			t.Errorf("%s: raft %+v", tn.ID, st.Raft)
		}
		var extra struct{ Node string }
		if err := json.Unmarshal(st.Extra, &extra); err != nil || extra.Node != tn.ID {
			t.Errorf("%s: extra %s", tn.ID, st.Extra)
		}
		rep, err := NewClient(tn.Addr()).Repair(ctx)
		if err != nil || rep.NodeID != tn.ID || !strings.Contains(string(rep.Repair), `"rebuilt_blocks":7`) {
			t.Errorf("%s: repair %+v %s %v", tn.ID, rep, rep.Repair, err)
		}
	}
}

func TestMembershipThroughFollowers(t *testing.T) {
	c := newCluster(t, 3)
	ctx := context.Background()
	leader := c.WaitLeader()
	f := c.Follower()

	// Join n4 by posting to a follower: it forwards to the leader.
	n4 := c.Add(false)
	m, err := NewClient(f.Addr()).Join(ctx, control.FromMember(n4.Member()))
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != "n4" || !m.Voter || m.HTTPAddr != n4.Addr() {
		t.Errorf("join reply %+v", m)
	}
	c.Eventually("n4 is a voter that knows the leader", func() bool {
		lid, _ := n4.Raft.Leader()
		return lid == leader.ID && controltest.HasVoter(leader.Raft, "n4")
	})
	// Joining again changes nothing and succeeds.
	if _, err := NewClient(f.Addr()).Join(ctx, control.FromMember(n4.Member())); err != nil {
		t.Fatalf("second join: %v", err)
	}

	// Transfer leadership to n4 through a follower.
	tr, err := NewClient(f.Addr()).TransferLeadership(ctx, "n4")
	if err != nil {
		t.Fatal(err)
	}
	if tr.Previous != leader.ID {
		t.Errorf("transfer %+v, previous want %s", tr, leader.ID)
	}
	c.Eventually("n4 leads", n4.Raft.IsLeader)
	// Transfer to the leader itself is a no-op.
	if tr, err := NewClient(n4.Addr()).TransferLeadership(ctx, "n4"); err != nil || tr.Leader != "n4" {
		t.Fatalf("self transfer %+v %v", tr, err)
	}

	// Remove the leader (n4) through a follower: n4 hands leadership over,
	// then the new leader removes it and marks it left.
	if err := NewClient(f.Addr()).Remove(ctx, "n4"); err != nil {
		t.Fatal(err)
	}
	var newLeader *controltest.Node
	c.Eventually("a new leader without n4", func() bool {
		for _, tn := range c.Nodes[:3] {
			if tn.Raft.IsLeader() && !controltest.HasVoter(tn.Raft, "n4") {
				newLeader = tn
				return true
			}
		}
		return false
	})
	c.Eventually("n4 marked left", func() bool {
		mm, ok := newLeader.Raft.FSM().Member("n4")
		return ok && mm.State == fsm.MemberLeft
	})
	c.Eventually("the follower's status shows n4 left", func() bool {
		st, err := NewClient(f.Addr()).Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(memberIDs(st.Members), "n4/left/voter=false")
	})

	// Remove a follower by id, on the leader directly; then an unknown id.
	victim := c.Follower()
	if victim == f {
		for _, tn := range c.Nodes[:3] {
			if !tn.Raft.IsLeader() && tn != f {
				victim = tn
			}
		}
	}
	if err := NewClient(newLeader.Addr()).Remove(ctx, victim.ID); err != nil {
		t.Fatal(err)
	}
	if controltest.HasVoter(newLeader.Raft, victim.ID) {
		t.Errorf("%s still a voter", victim.ID)
	}
	if err := NewClient(f.Addr()).Remove(ctx, "nope"); !errors.Is(err, block.ErrNotFound) {
		t.Errorf("remove unknown: %v", err)
	}
	// Transfer with no id picks a follower.
	l := c.WaitLeader()
	tr, err = NewClient(l.Addr()).TransferLeadership(ctx, "")
	if err != nil || tr.Previous != l.ID {
		t.Fatalf("transfer to any: %+v %v", tr, err)
	}
	c.Eventually("leadership moved", func() bool { return !l.Raft.IsLeader() && c.WaitLeader() != l })
}

func TestBadInput(t *testing.T) {
	c := newCluster(t, 1)
	tn := c.Nodes[0]
	cases := []controltest.ErrorCase{
		{Name: "remove no id", Method: "POST", Path: PathRemove, Body: `{}`, Status: 400, Code: "InvalidArgument"},
		{Name: "remove unknown", Method: "POST", Path: PathRemove, Body: `{"id":"zz"}`, Status: 404, Code: "NotFound"},
		{Name: "remove only voter", Method: "POST", Path: PathRemove, Body: `{"id":"n1"}`, Status: 400, Code: "InvalidArgument"},
		{Name: "transfer unknown", Method: "POST", Path: PathTransfer, Body: `{"id":"zz"}`, Status: 400, Code: "InvalidArgument"},
		{Name: "transfer bad json", Method: "POST", Path: PathTransfer, Body: `[]`, Status: 400, Code: "InvalidArgument"},
		{Name: "unknown path", Method: "GET", Path: "/v1/cluster/nope", Body: "", Status: 404, Code: "NotFound"},
		{Name: "wrong method", Method: "GET", Path: PathRemove, Body: "", Status: 404, Code: "NotFound"},
	}
	controltest.CheckErrorReplies(t, tn.Addr(), cases)
	// Nothing was changed by the bad requests.
	if ms := tn.Raft.FSM().Members(); len(ms) != 1 || len(tn.Raft.Servers()) != 1 {
		t.Errorf("members after bad input: %+v", ms)
	}
}

func TestNoRepairAndNoDrainer(t *testing.T) {
	c := newCluster(t, 1)
	tn := c.Nodes[0]
	h := Handler(control.NewServer(tn.Raft, nil, controltest.Log()), nil, nil, controltest.Log())
	for _, tc := range []struct {
		method, path string
		status       int
		body         string
	}{{"GET", PathRepair, 404, ""}, {"POST", PathDrain, 400, `{"id":"n1"}`}} {
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
	c := newCluster(t, 2, control.WithToken("s3cret"))
	ctx := context.Background()
	c.WaitLeader()
	f := c.Follower()
	if _, err := NewClient(f.Addr()).Status(ctx); err != nil {
		t.Fatalf("status needs no token: %v", err)
	}
	if _, err := NewClient(f.Addr()).TransferLeadership(ctx, ""); !errors.Is(err, block.ErrUnauthenticated) {
		t.Errorf("transfer without token: %v", err)
	}
	if _, err := NewClient(f.Addr(), control.WithToken("wrong")).TransferLeadership(ctx, ""); !errors.Is(err, block.ErrUnauthenticated) {
		t.Errorf("transfer with a wrong token: %v", err)
	}
	// The follower forwards with its own token: the leader accepts.
	if _, err := NewClient(f.Addr(), control.WithToken("s3cret")).TransferLeadership(ctx, f.ID); err != nil {
		t.Errorf("transfer with token: %v", err)
	}
}

// TestForwardGivesUpWithoutALeader: a member that cannot reach a leader
// answers 503 (unavailable, no leader known) after the bounded wait.
func TestForwardGivesUpWithoutALeader(t *testing.T) {
	c := newCluster(t, 3)
	c.WaitLeader()
	f := c.Follower()
	for _, o := range c.Nodes {
		if o != f {
			f.Tr.Disconnect(o.Tr.LocalAddr())
			o.Tr.Disconnect(f.Tr.LocalAddr())
		}
	}
	c.Eventually("the cut-off follower knows no leader", func() bool {
		id, _ := f.Raft.Leader()
		return id == ""
	})
	start := time.Now()
	err := NewClient(f.Addr()).Remove(context.Background(), "n3")
	if !errors.Is(err, block.ErrUnavailable) || !strings.Contains(fmt.Sprint(err), "no leader known") {
		t.Fatalf("remove without a leader: %v, want unavailable, no leader known", err)
	}
	if waited, wait := time.Since(start), control.DefaultConfig().LeaderWait; waited < wait {
		t.Fatalf("answered after %v, before the %v wait", waited, wait)
	}
}
