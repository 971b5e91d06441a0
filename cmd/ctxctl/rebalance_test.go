package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/cluster"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
)

func TestClusterRebalanceStatus(t *testing.T) {
	var mu sync.Mutex
	var asked []string // node ids whose status was read
	var self string
	// Two nodes behind one server: the first status call answers as the
	// follower n2 (naming the leader at this server), the next as the
	// leader n1, with its rebalancing status.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != clusterapi.PathStatus {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		leader := clusterapi.Member{ID: "n1", HTTPAddr: self, State: "alive", Leader: true}
		st := clusterapi.Status{NodeID: "n2", State: "follower", Leader: &leader}
		extra := map[string]any{"rebalance": cluster.RebalanceStatus{LimitBytesPerSec: 32 << 20}}
		if len(asked)%2 == 1 {
			st.NodeID, st.State = "n1", "leader"
			extra["rebalance"] = cluster.RebalanceStatus{Active: true, Running: true, Pending: 120, MovedShards: 80, MovedBytes: 5 << 20,
				RateBytesPerSec: 2 << 20, RateShardsPerSec: 40, LimitBytesPerSec: 32 << 20, ETASeconds: 3,
				LastScan: time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC), ScannedBlocks: 600}
		}
		st.Extra, _ = json.Marshal(extra)
		asked = append(asked, st.NodeID)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(st)
	}))
	defer srv.Close()
	self = srv.Listener.Addr().String()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"table", []string{"rebalance", "status", "--addr", self}, []string{"rebalance on node n1 (leader)", "running    yes", "pending    120", "moved      80", "5MiB",
			"rate       2MiB/s", "40.0 shards/s (limit 32MiB/s)", "eta        3s", "last scan  2026-12-01T18:00:00Z  600 blocks"}},
		{"json", []string{"rebalance", "status", "--json", "--addr", self}, []string{`"node_id": "n1"`, `"pending": 120`, `"moved_bytes": 5242880`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if err := runCluster(ctx, tc.args, &out, &errOut); err != nil {
				t.Fatalf("%v (%s)", err, errOut.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if got := strings.Join(asked[len(asked)-2:], ","); got != "n2,n1" {
				t.Errorf("asked %s, want the node at --addr, then the leader", got)
			}
		})
	}
	for _, bad := range [][]string{{"rebalance", "--addr", self}, {"rebalance", "start", "--addr", self}, {"rebalance", "status", "x", "--addr", self}} {
		var out, errOut bytes.Buffer
		if err := runCluster(ctx, bad, &out, &errOut); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}
