package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/placement"
	"github.com/ctxtier/ctxtier/gateway/native"
	"github.com/ctxtier/ctxtier/gateway/native/nativetest"
)

// fakeMember is one member of a made-up cluster: a real native server over
// an in-memory store, and an HTTP server answering GET /v1/cluster/status
// with its ID and the whole member list.
type fakeMember struct {
	id     string
	native *nativetest.Server
	http   *httptest.Server
}

// startFakeCluster starts one fakeMember per id; members lists every
// member's record (more than the servers: a member the client has no
// address for).
func startFakeCluster(t *testing.T, ids []string, members string) []*fakeMember {
	t.Helper()
	var out []*fakeMember
	for _, id := range ids {
		srv, err := nativetest.Start(t, native.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf(`{"node_id":%q,"state":"follower","members":%s}`, id, members)
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/cluster/status" {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(body))
		}))
		t.Cleanup(hs.Close)
		out = append(out, &fakeMember{id: id, native: srv, http: hs})
	}
	return out
}

func dialFake(t *testing.T, ms []*fakeMember) *Cluster {
	t.Helper()
	cfg := ClusterDefaultConfig()
	for _, m := range ms {
		cfg.Nodes = append(cfg.Nodes, ClusterNode{Native: m.native.Addr, HTTP: m.http.URL})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := DialCluster(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func membersJSON(t *testing.T, recs ...map[string]any) string {
	t.Helper()
	b, err := json.Marshal(recs)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Each block of a batch lands on the member placement ranks first for it
// among the alive members (weighted by capacity, as the cluster weighs
// them); a block owned by a member the client has no address for goes to
// another member; a dead member takes nothing.
func TestClusterPutBatchToOwners(t *testing.T) {
	members := membersJSON(t,
		map[string]any{"id": "a", "capacity": 4 << 30, "state": "alive"},
		map[string]any{"id": "b", "capacity": 1 << 30, "state": "alive"},
		map[string]any{"id": "c", "capacity": 2 << 30, "state": "alive", "zone": "z2"},
		map[string]any{"id": "d", "capacity": 2 << 30, "state": "alive"}, // no address given
		map[string]any{"id": "e", "capacity": 8 << 30, "state": "dead"},
	)
	ms := startFakeCluster(t, []string{"a", "b", "c"}, members)
	c := dialFake(t, ms)
	alive := []placement.Node{
		{ID: "a", Weight: 4}, {ID: "b", Weight: 1}, {ID: "c", Weight: 2, Zone: "z2"}, {ID: "d", Weight: 2},
	}
	const n = 400
	items := make([]PutItem, n)
	for i := range items {
		items[i] = PutItem{Key: block.NewKey("default", uint64(i+1)), Data: payload(uint64(i), 64+i)}
	}
	ctx := context.Background()
	errs, err := c.PutBatch(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	holders := map[string]int{}
	for i, it := range items {
		if errs[i] != nil {
			t.Fatalf("item %d: %v", i, errs[i])
		}
		want, err := placement.Pick(it.Key, alive, 1)
		if err != nil {
			t.Fatal(err)
		}
		if id, ok := c.Owner(it.Key); id != want[0].ID || ok != (id != "d") {
			t.Fatalf("Owner(%s) = %q %v, placement picks %q", it.Key, id, ok, want[0].ID)
		}
		var on []string
		for _, m := range ms {
			if _, err := m.native.Tier.Stat(ctx, it.Key); err == nil {
				on = append(on, m.id)
			}
		}
		if len(on) != 1 || (want[0].ID != "d" && on[0] != want[0].ID) {
			t.Fatalf("%s is on %v, its owner is %s", it.Key, on, want[0].ID)
		}
		holders[want[0].ID]++
	}
	if holders["a"] <= holders["b"] || holders["d"] == 0 || holders["e"] != 0 {
		t.Fatalf("owners %v: a (weight 4) should own more than b (1); d some, dead e none", holders)
	}
	// Read back through the owners into caller buffers (the blocks of a
	// member with a client: these made-up members do not forward to each
	// other as a cluster's would).
	var keys []block.Key
	var bufs, want [][]byte
	for _, it := range items {
		if _, ok := c.Owner(it.Key); ok {
			keys, bufs, want = append(keys, it.Key), append(bufs, make([]byte, len(it.Data))), append(want, it.Data)
		}
	}
	sizes, gerrs, err := c.GetBatchInto(ctx, keys, bufs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		if gerrs[i] != nil || sizes[i] != len(want[i]) || string(bufs[i]) != string(want[i]) {
			t.Fatalf("get %s: size %d err %v", keys[i], sizes[i], gerrs[i])
		}
	}
}

// A member whose connection breaks: its part of a batch is sent through
// the next member instead, and every item is acknowledged.
func TestClusterPutBatchRetriesElsewhere(t *testing.T) {
	members := membersJSON(t,
		map[string]any{"id": "a", "capacity": 1 << 30, "state": "alive"},
		map[string]any{"id": "b", "capacity": 1 << 30, "state": "alive"},
	)
	ms := startFakeCluster(t, []string{"a", "b"}, members)
	c := dialFake(t, ms)
	ms[0].native.Close() // a's native server goes away; its status still says alive
	items := make([]PutItem, 64)
	for i := range items {
		items[i] = PutItem{Key: block.NewKey("default", uint64(i+1)), Data: payload(uint64(i), 100)}
	}
	ctx := context.Background()
	putAllOn(ctx, t, c, items, ms[1])
}

// Bad configurations and a cluster that never answers its status fail with
// clear errors.
func TestClusterConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*ClusterConfig)
	}{
		{"no nodes", func(c *ClusterConfig) { c.Nodes = nil }},
		{"no HTTP address", func(c *ClusterConfig) { c.Nodes = []ClusterNode{{Native: "127.0.0.1:1"}} }},
		{"no refresh", func(c *ClusterConfig) { c.Refresh = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ClusterDefaultConfig()
			cfg.Nodes = []ClusterNode{{Native: "127.0.0.1:1", HTTP: "127.0.0.1:2"}}
			tc.edit(&cfg)
			if _, err := DialCluster(context.Background(), cfg); !errors.Is(err, block.ErrInvalidArgument) {
				t.Fatalf("DialCluster: %v, want ErrInvalidArgument", err)
			}
		})
	}
	srv, err := nativetest.Start(t, native.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(http.NotFoundHandler())
	defer hs.Close()
	cfg := ClusterDefaultConfig()
	cfg.Nodes = []ClusterNode{{Native: srv.Addr, HTTP: hs.URL}}
	if _, err := DialCluster(context.Background(), cfg); err == nil || !errors.Is(err, block.ErrNotFound) {
		t.Fatalf("DialCluster with no status endpoint: %v, want a not-found error", err)
	}
}

// A member whose native port answers nothing when the client starts: its
// blocks go through the member that is up; with none up, DialCluster
// fails with ErrUnavailable.
func TestClusterMemberDownAtDial(t *testing.T) {
	members := membersJSON(t,
		map[string]any{"id": "a", "capacity": 1 << 30, "state": "alive"},
		map[string]any{"id": "b", "capacity": 1 << 30, "state": "alive"},
	)
	ms := startFakeCluster(t, []string{"a", "b"}, members)
	dead := ms[0].native.Addr
	ms[0].native.Close()
	cfg := ClusterDefaultConfig()
	cfg.Native.DialTimeout = time.Second
	cfg.Nodes = []ClusterNode{{Native: dead, HTTP: ms[0].http.URL}, {Native: ms[1].native.Addr, HTTP: ms[1].http.URL}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := DialCluster(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	items := make([]PutItem, 64)
	owned := 0
	for i := range items {
		items[i] = PutItem{Key: block.NewKey("default", uint64(i+1)), Data: payload(uint64(i), 100)}
		if id, ok := c.Owner(items[i].Key); id == "a" {
			owned++
			if ok {
				t.Fatalf("Owner(%s) = a, connected: a was never dialed", items[i].Key)
			}
		}
	}
	if owned == 0 {
		t.Fatal("no block owned by a: the test shows nothing")
	}
	putAllOn(ctx, t, c, items, ms[1])
	if err := c.Refresh(ctx); err != nil { // dials a again, in vain: no error
		t.Fatal(err)
	}
	cfg.Nodes = cfg.Nodes[:1]
	if _, err := DialCluster(ctx, cfg); !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("DialCluster with every node down: %v, want ErrUnavailable", err)
	}
}

// putAllOn puts items through c and checks that every one was acknowledged
// and landed on m.
func putAllOn(ctx context.Context, t *testing.T, c *Cluster, items []PutItem, m *fakeMember) {
	t.Helper()
	errs, err := c.PutBatch(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range items {
		if errs[i] != nil {
			t.Fatalf("item %d: %v", i, errs[i])
		}
		if _, err := m.native.Tier.Stat(ctx, it.Key); err != nil {
			t.Fatalf("%s not on %s: %v", it.Key, m.id, err)
		}
	}
}
