package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
)

// fakeCluster answers the cluster API with canned replies and records
// what it was sent.
type fakeCluster struct {
	mu    sync.Mutex
	calls []string // "METHOD PATH BODY TOKEN"
	// draining: shards left on each draining member; each status reply
	// shows one fewer. self is the server's address (the leader's).
	draining map[string]int
	self     string
}

func (f *fakeCluster) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, strings.TrimSpace(r.Method+" "+r.URL.Path+" "+string(b)+" "+r.Header.Get(control.HeaderToken)))
	reply := func(v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	switch r.URL.Path {
	case clusterapi.PathStatus:
		l := clusterapi.Member{ID: "n1", RaftAddr: "127.0.0.1:7412", DataAddr: "127.0.0.1:7410", HTTPAddr: "127.0.0.1:7411", Zone: "a", Capacity: 8 << 30, State: "alive", Voter: true, Leader: true}
		f2 := clusterapi.Member{ID: "n2", RaftAddr: "127.0.0.1:7422", DataAddr: "127.0.0.1:7420", HTTPAddr: "127.0.0.1:7421", Capacity: 3 << 29, State: "suspect", Voter: true}
		var drains []cluster.DrainStatus
		for _, id := range slices.Sorted(maps.Keys(f.draining)) {
			left := f.draining[id]
			drains = append(drains, cluster.DrainStatus{ID: id, ShardsLeft: left, BlocksLeft: left, Done: left == 0, Namespaces: map[string]int{"one": left},
				Active: true, MovedShards: uint64(2 - left), MovedBytes: uint64(2-left) << 20})
			f.draining[id] = max(left-1, 0)
		}
		if len(f.draining) > 0 {
			l.HTTPAddr = f.self // WaitDrained asks the leader
		}
		reply(clusterapi.Status{NodeID: "n2", State: "follower", Leader: &l, Members: []clusterapi.Member{l, f2},
			Raft: clusterapi.RaftStatus{Term: 4, CommitIndex: 99, AppliedIndex: 98, LastLogIndex: 99, LastContact: "12ms", NumPeers: 1}, Drains: drains})
	case clusterapi.PathDrain:
		var req clusterapi.DrainRequest
		_ = json.Unmarshal(b, &req)
		if req.Cancel {
			delete(f.draining, req.ID)
			reply(clusterapi.DrainResponse{ID: req.ID, State: "alive"})
			return
		}
		if f.draining == nil {
			f.draining = map[string]int{}
		}
		f.draining[req.ID] = 2
		reply(clusterapi.DrainResponse{ID: req.ID, State: "draining", Drain: &cluster.DrainStatus{ID: req.ID, ShardsLeft: 2, BlocksLeft: 2, Namespaces: map[string]int{"one": 2}}})
	case control.PathJoin:
		var m clusterapi.Member
		_ = json.Unmarshal(b, &m)
		m.Voter = true
		reply(control.JoinResponse{Member: m})
	case clusterapi.PathRemove:
		if strings.Contains(string(b), `"ghost"`) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(404)
			_, _ = w.Write([]byte(`{"code":"NotFound","message":"not found: no member \"ghost\""}`))
			return
		}
		delete(f.draining, "n3")
		reply(clusterapi.RemoveResponse{Removed: "n3"})
	case clusterapi.PathTransfer:
		reply(clusterapi.TransferResponse{Previous: "n1", Leader: "n2"})
	case clusterapi.PathKeys:
		if r.Method == http.MethodGet {
			reply([]clusterapi.Key{{AccessKeyID: "CTXLISTED", Namespaces: []string{"a"}, Description: "ops"}})
			return
		}
		var req clusterapi.CreateKeyRequest
		_ = json.Unmarshal(b, &req)
		reply(clusterapi.Key{AccessKeyID: "CTXNEW", SecretAccessKey: "sekrit", Namespaces: req.Namespaces, Description: req.Description})
	case clusterapi.PathKeysRevoke:
		var req clusterapi.RevokeKeyRequest
		_ = json.Unmarshal(b, &req)
		reply(req)
	case clusterapi.PathRepair:
		reply(map[string]any{"node_id": "n2", "repair": map[string]any{"pending_blocks": 5, "state": "running"}})
	default:
		http.NotFound(w, r)
	}
}

func TestClusterCommands(t *testing.T) {
	fake := &fakeCluster{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	fake.self = addr
	ctx := context.Background()
	cases := []struct {
		name     string
		args     []string
		wantOut  []string
		wantCall string
	}{
		{"status table", []string{"status", "--addr", addr}, []string{"node n2 (follower), leader n1 at 127.0.0.1:7411", "term 4, commit 99, applied 98",
			"n1  alive    yes    *       a     8GiB", "n2  suspect  yes", "1.5GiB"}, "GET /v1/cluster/status"},
		{"status json", []string{"status", "--json", "--addr", addr}, []string{`"node_id": "n2"`, `"leader": {`}, "GET /v1/cluster/status"},
		{"join", []string{"join", "--addr", addr, "--token", "tok", "--id", "n4", "--raft-addr", "127.0.0.1:7442", "--data-addr", "127.0.0.1:7440",
			"--http-addr", "127.0.0.1:7441", "--zone", "b", "--capacity", "2GiB"}, []string{"joined n4 (raft 127.0.0.1:7442, http 127.0.0.1:7441) as a voter"},
			`POST /v1/cluster/join {"id":"n4","raft_addr":"127.0.0.1:7442","data_addr":"127.0.0.1:7440","http_addr":"127.0.0.1:7441","zone":"b","capacity":2147483648,"voter":false} tok`},
		{"remove drains first", []string{"remove", "n3", "--addr", addr, "--interval", "5ms"}, []string{"draining n3: 2 shards of 2 blocks (one 2) to move",
			"n3: 1 shard left, 1 moved", "n3: 0 shards left, 2 moved", "drained n3", "removed n3"}, `POST /v1/cluster/remove {"id":"n3"}`},
		{"remove --force", []string{"remove", "--force", "n3", "--addr", addr}, []string{"removed n3"}, `POST /v1/cluster/remove {"id":"n3","force":true}`},
		{"drain two", []string{"drain", "n4", "n5", "--addr", addr, "--interval", "5ms"}, []string{"draining n4: 2 shards", "draining n5: 2 shards", "drained n4", "drained n5"},
			"GET /v1/cluster/status"},
		{"drain no wait", []string{"drain", "n6", "--no-wait", "--addr", addr}, []string{"draining n6: 2 shards of 2 blocks"}, `POST /v1/cluster/drain {"id":"n6"}`},
		{"status shows drains", []string{"status", "--addr", addr}, []string{"n2  suspect  yes", "drain n4: done, nothing left on it; moved 2 shards (2MiB)", "drain n6: 2 shards of 2 blocks (one 2) left; moved 0 shards"}, "GET /v1/cluster/status"},
		{"drain cancel", []string{"drain", "--cancel", "n6", "--addr", addr}, []string{"drain of n6 cancelled"}, `POST /v1/cluster/drain {"id":"n6","cancel":true}`},
		{"transfer any", []string{"transfer-leadership", "--addr", addr}, []string{"leadership: n1 -> n2"}, `POST /v1/cluster/transfer-leadership {}`},
		{"transfer to", []string{"transfer-leadership", "--addr", addr, "n2"}, []string{"leadership: n1 -> n2"}, `POST /v1/cluster/transfer-leadership {"id":"n2"}`},
		{"repair", []string{"repair", "--addr", addr}, []string{"repair on node n2", "pending_blocks  5", "state           running"}, "GET /v1/cluster/repair"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if err := runCluster(ctx, tc.args, &out, &errOut); err != nil {
				t.Fatalf("%v (%s)", err, errOut.String())
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			fake.mu.Lock()
			last := fake.calls[len(fake.calls)-1]
			fake.mu.Unlock()
			if last != tc.wantCall {
				t.Errorf("sent %q\nwant %q", last, tc.wantCall)
			}
		})
	}

	t.Setenv("CTXTIER_CLUSTER_TOKEN", "from-env")
	var out, errOut bytes.Buffer
	if err := runCluster(ctx, []string{"remove", "--addr", addr, "ghost"}, &out, &errOut); !errors.Is(err, block.ErrNotFound) {
		t.Errorf("remove ghost: %v", err)
	}
	if last := fake.calls[len(fake.calls)-1]; !strings.HasSuffix(last, " from-env") {
		t.Errorf("token from env not sent: %q", last)
	}
	n := len(fake.calls)
	for _, bad := range [][]string{
		{}, {"frobnicate", "--addr", addr}, {"remove", "--addr", addr}, {"remove", "--addr", addr, "a", "b"},
		{"transfer-leadership", "--addr", addr, "a", "b"}, {"status", "--addr", addr, "extra"},
		{"drain", "--addr", addr}, {"drain", "--cancel", "--addr", addr, "a", "b"}, {"drain", "--interval", "0s", "--addr", addr, "a"},
		{"status", "--force", "--addr", addr},
		{"join", "--addr", addr, "--id", "n4"},
		{"join", "--addr", addr, "--id", "n4", "--raft-addr", "h:1", "--data-addr", "h:2", "--http-addr", "h:3", "--capacity", "lots"},
		{"status", "--bogus"}, {"status", "--token", "has space", "--addr", addr},
	} {
		if err := runCluster(ctx, bad, &out, &errOut); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
	if len(fake.calls) != n {
		t.Errorf("bad invocations sent %d requests", len(fake.calls)-n)
	}
	// Nothing listening: a clear unavailable error.
	if err := runCluster(ctx, []string{"status", "--addr", "127.0.0.1:1"}, &out, &errOut); !errors.Is(err, block.ErrUnavailable) {
		t.Errorf("no server: %v", err)
	}
}

func TestBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{{"0", 0, true}, {"123", 123, true}, {"5B", 5, true}, {"2GiB", 2 << 30, true}, {"1TiB", 1 << 40, true}, {"1.5GiB", 0, false}, {"-1", 0, false}, {"x", 0, false}} {
		got, err := parseBytes(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseBytes(%q) = %d, %v", tc.in, got, err)
		}
	}
	for in, want := range map[int64]string{0: "-", 512: "512B", 1 << 30: "1GiB", 3 << 29: "1.5GiB"} {
		if got := formatBytes(in); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", in, got, want)
		}
	}
}

// TestClusterTLSCA: with --tls-ca (or $CTXTIER_TLS_CA) ctxctl talks https
// to a ctxd run with --tls-clients and trusts that CA; without it, the
// certificate is not trusted.
func TestClusterTLSCA(t *testing.T) {
	fake := &fakeCluster{}
	srv := httptest.NewTLSServer(fake)
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var out, errOut bytes.Buffer
	if err := runCluster(ctx, []string{"status", "--addr", addr, "--tls-ca", caFile}, &out, &errOut); err != nil {
		t.Fatalf("status over https: %v (%s)", err, errOut.String())
	}
	if !strings.Contains(out.String(), "leader n1") {
		t.Fatalf("output:\n%s", out.String())
	}
	t.Setenv("CTXTIER_TLS_CA", caFile)
	out.Reset()
	if err := runKeys(ctx, []string{"list", "--addr", addr, "--cluster-secret", "from-flag-0123456789"}, &out, &errOut); err != nil || !strings.Contains(out.String(), "CTXLISTED") {
		t.Fatalf("keys over https: %v\n%s", err, out.String())
	}
	t.Setenv("CTXTIER_TLS_CA", "")
	if err := runCluster(ctx, []string{"status", "--addr", addr}, &out, &errOut); err == nil {
		t.Fatal("plain http to a TLS server succeeded")
	}
	if err := runCluster(ctx, []string{"status", "--addr", addr, "--tls-ca", filepath.Join(t.TempDir(), "missing.pem")}, &out, &errOut); err == nil {
		t.Fatal("a missing CA file was accepted")
	}
}
