package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
)

// readyPeer is the peer (data) address the process logged in its "ctxd
// ready" line.
func (p *proc) readyPeer() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, line := range strings.Split(p.log.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "ctxd ready" {
			s, _ := rec["peer"].(string)
			return s
		}
	}
	return ""
}

// TestRestartOnNewPeerPortReadyOnlyWhenRegistered: a node restarted on
// another peer port (the test processes' ports are ephemeral, as a pod's
// address is after a reschedule) answers /readyz 200 only once the
// cluster's record of it carries the new address. Before that, other
// members write its shards to the old port, those writes fail, and puts
// are acknowledged without its shard: an operator who restarts the next
// node on the strength of /readyz and pending repair 0 would lose such a
// block (the rolling-restart loss seen once in CI, TestReliability/dram).
func TestRestartOnNewPeerPortReadyOnlyWhenRegistered(t *testing.T) {
	nodes, join := startCluster(t, 3)
	for round := range 3 {
		// The leader, restarted at once: it comes back while the others
		// elect, its first registration finds no leader, and in the CI run
		// that lost a block it was ready 180 ms before its record changed.
		nd, ok := leaderOf(t, nodes)
		if !ok {
			t.Fatal("no leader")
		}
		old := nd.p.readyPeer()
		nd.p.Kill()
		nd.p = startCtxd(t, nd.args(join)...)
		peer := nd.p.readyPeer()
		if peer == "" || peer == old {
			t.Fatalf("round %d: %s logged peer address %q, before %q: the test needs a new one", round, nd.id, peer, old)
		}
		took := waitFor(t, 60*time.Second, nd.id+" ready", func() bool {
			resp, err := http.Get("http://" + nd.http + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
		// Ready: the record committed, so the leader (which applies a
		// commit before it answers the proposal) has the new address.
		var ld *testNode
		var st clusterapi.Status
		waitFor(t, 30*time.Second, "a leader's status", func() bool {
			if ld, ok = leaderOf(t, nodes); !ok {
				return false
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var err error
			st, err = clusterapi.NewClient(ld.http, control.WithToken(testSecret)).Status(ctx)
			return err == nil
		})
		found := false
		for _, m := range st.Members {
			if m.ID == nd.id {
				found = true
				if m.DataAddr != peer {
					t.Fatalf("round %d: %s is ready, but the leader %s records its data address as %s, not this start's %s", round, nd.id, ld.id, m.DataAddr, peer)
				}
			}
		}
		if !found {
			t.Fatalf("round %d: the leader %s has no record of %s", round, ld.id, nd.id)
		}
		t.Logf("round %d: %s restarted on peer %s (was %s), /readyz 200 %v after its \"ctxd ready\" line", round, nd.id, peer, old, took)
	}
}
