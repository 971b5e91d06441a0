package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster"
)

// fakeMember serves PathSessionEnd the way answer says (a unit-test
// stand-in for another member's handler).
func fakeMember(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, req SessionEndRequest)) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != PathSessionEnd || r.Header.Get(HeaderToken) != "s3cret" {
			http.Error(w, "wrong path or token", http.StatusUnauthorized)
			return
		}
		var req SessionEndRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		answer(w, r, req)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

func counterValue(t *testing.T, reg *prometheus.Registry, name, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if result == "" || labelIs(m, "result", result) {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s{result=%q}", name, result)
	return 0
}

func labelIs(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// TestSessionFanout asks every other live member, in parallel, and counts
// who acknowledged: a member that answers as another id, fails or outlives
// the member timeout is a failure; a dead member or one without an HTTP
// address is skipped; one that left and this node are not counted.
func TestSessionFanout(t *testing.T) {
	var mu sync.Mutex
	asked := map[string]SessionEndRequest{}
	ok := func(id string, n int) func(http.ResponseWriter, *http.Request, SessionEndRequest) {
		return func(w http.ResponseWriter, _ *http.Request, req SessionEndRequest) {
			mu.Lock()
			asked[id] = req
			mu.Unlock()
			WriteJSON(w, http.StatusOK, SessionEndResponse{NodeID: id, Released: n})
		}
	}
	members := []cluster.Member{
		{ID: "self", HTTPAddr: "127.0.0.1:9", State: cluster.MemberAlive},
		{ID: "b", HTTPAddr: fakeMember(t, ok("b", 3)), State: cluster.MemberAlive},
		{ID: "c", HTTPAddr: fakeMember(t, ok("c", 4)), State: cluster.MemberDraining},
		{ID: "d", HTTPAddr: fakeMember(t, ok("other", 9)), State: cluster.MemberAlive},
		{ID: "e", HTTPAddr: fakeMember(t, func(w http.ResponseWriter, _ *http.Request, _ SessionEndRequest) {
			writeError(w, fmt.Errorf("%w: broken", block.ErrNoSpace))
		}), State: cluster.MemberAlive},
		{ID: "f", HTTPAddr: fakeMember(t, func(_ http.ResponseWriter, r *http.Request, _ SessionEndRequest) {
			<-r.Context().Done() // never answers in time
		}), State: cluster.MemberAlive},
		{ID: "g", HTTPAddr: "127.0.0.1:9", State: cluster.MemberDead},
		{ID: "h", State: cluster.MemberAlive},
		{ID: "i", HTTPAddr: "127.0.0.1:9", State: cluster.MemberLeft},
	}
	reg := prometheus.NewRegistry()
	cfg := DefaultSessionFanoutConfig()
	cfg.NodeID = "self"
	cfg.MemberTimeout = 500 * time.Millisecond
	f, err := NewSessionFanout(cfg, func() []cluster.Member { return members }, reg, nil, WithToken("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	res := f.EndSession(context.Background(), "ns1", 42)
	if want := (FanoutResult{Asked: 5, Acked: 2, Skipped: 2, Released: 7}); res != want {
		t.Fatalf("fan-out %+v, want %+v", res, want)
	}
	want := SessionEndRequest{Namespace: "ns1", Session: 42}
	if asked["b"] != want || asked["c"] != want {
		t.Fatalf("members asked %+v", asked)
	}
	for _, c := range []struct {
		name, result string
		want         float64
	}{
		{"ctxtier_session_end_members_total", "acked", 2},
		{"ctxtier_session_end_members_total", "failed", 3},
		{"ctxtier_session_end_members_total", "skipped", 2},
		{"ctxtier_session_end_peer_released_blocks_total", "", 7},
	} {
		if got := counterValue(t, reg, c.name, c.result); got != c.want {
			t.Errorf("%s{result=%q} = %v, want %v", c.name, c.result, got, c.want)
		}
	}
}

// TestSessionFanoutConfig rejects what cannot work.
func TestSessionFanoutConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*SessionFanoutConfig)
		ok   bool
	}{
		{"valid", func(c *SessionFanoutConfig) { c.NodeID = "n1" }, true},
		{"no node id", func(*SessionFanoutConfig) {}, false},
		{"no timeout", func(c *SessionFanoutConfig) { c.NodeID, c.MemberTimeout = "n1", 0 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultSessionFanoutConfig()
			tc.edit(&c)
			if err := c.Validate(); (err == nil) != tc.ok || (err != nil && !errors.Is(err, block.ErrInvalidArgument)) {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}
