package main

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
	"github.com/ctxtier/ctxtier/gateway/client"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
)

// TestClusterSessionEndReleasesEveryMember starts three real ctxd
// processes and a namespace of three replicas (a copy of every block on
// every member), and puts the blocks of three agent sessions through node
// A with session hints (reuse=session, a 10-minute retain window, a
// session id). Then:
//   - END_SESSION over the native protocol through A releases A's copies
//     (its reply) and B's and C's (A's fan-out counters: two members
//     acknowledged, 2×blocks released there); B and C then answer 0 for
//     it on their internal endpoint: their copies are released already.
//   - The internal endpoint releases on the member called only: session
//     12 ended on B's internal endpoint still has all its copies on C.
//     Without the cluster token it is refused.
//   - The HTTP form through B (another receiver) releases B's copies and
//     fans out to A and C.
func TestClusterSessionEndReleasesEveryMember(t *testing.T) {
	nodes, _ := startCluster(t, 3)
	const ns = "agent"
	createOnLeader(t, nodes, block.Namespace{Name: ns, DataShards: 1, ParityShards: 2})
	a, b, c := nodes[0], nodes[1], nodes[2]
	ctx := withTimeout(t, 4*time.Minute)
	nc, err := client.Dial(ctx, a.p.Native, client.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if !nc.SessionsAccepted() {
		t.Fatal("ctxd did not accept agent sessions")
	}
	blocks := map[uint64]int{11: 4, 12: 3, 13: 5}
	for _, s := range []uint64{11, 12, 13} {
		for i := range blocks[s] {
			k := block.NewKey(ns, s*1000+uint64(i))
			data := fmt.Appendf(nil, "session %d block %d", s, i)
			opts := block.PutOptions{Reuse: block.ReuseSession, Retain: 10 * time.Minute, Session: s}
			// The namespace may reach A's index a moment after the leader's.
			waitFor(t, 30*time.Second, "put through A", func() bool {
				err = nc.PutWithOptions(ctx, k, data, opts)
				return err == nil
			})
		}
	}
	internal := func(nd *testNode, s uint64) int {
		t.Helper()
		r, err := clusterapi.NewClient(nd.http, control.WithToken(testSecret)).EndSession(ctx, ns, s)
		if err != nil {
			t.Fatalf("internal session end %d on %s: %v", s, nd.id, err)
		}
		if r.NodeID != nd.id {
			t.Fatalf("internal session end on %s answered by %q", nd.id, r.NodeID)
		}
		return r.Released
	}
	acked := func(nd *testNode) float64 {
		return metricValue(t, nd.http, `ctxtier_session_end_members_total{result="acked"}`)
	}
	peerReleased := func(nd *testNode) float64 {
		return metricValue(t, nd.http, "ctxtier_session_end_peer_released_blocks_total")
	}

	// Session 11: native END_SESSION through A.
	n, err := nc.EndSession(ctx, ns, 11)
	if err != nil {
		t.Fatal(err)
	}
	if n != blocks[11] {
		t.Fatalf("END_SESSION 11 through A released %d blocks there, want %d", n, blocks[11])
	}
	if got := acked(a); got != 2 {
		t.Fatalf("%v members acknowledged session 11's end, want 2", got)
	}
	if got := peerReleased(a); got != float64(2*blocks[11]) {
		t.Fatalf("the other members released %v blocks of session 11, want %d", got, 2*blocks[11])
	}
	for _, nd := range []*testNode{b, c} {
		if got := internal(nd, 11); got != 0 {
			t.Fatalf("%s still held %d unreleased blocks of session 11", nd.id, got)
		}
	}

	// Session 12: the internal endpoint releases on the member called only.
	if _, err := clusterapi.NewClient(b.http).EndSession(ctx, ns, 12); !errors.Is(err, block.ErrUnauthenticated) {
		t.Fatalf("internal session end without the cluster token: %v", err)
	}
	if got := internal(b, 12); got != blocks[12] {
		t.Fatalf("B released %d blocks of session 12, want %d", got, blocks[12])
	}
	if got := internal(c, 12); got != blocks[12] {
		t.Fatalf("C released %d blocks of session 12 after B's internal end, want %d (B fanned out)", got, blocks[12])
	}
	if got := acked(b); got != 0 {
		t.Fatalf("B fanned an internal session end out to %v members", got)
	}

	// Session 13: the HTTP form through B.
	hn, err := httpClient(t, b.http).EndSession(ctx, ns, 13)
	if err != nil {
		t.Fatal(err)
	}
	if hn != blocks[13] {
		t.Fatalf("HTTP session end 13 through B released %d blocks there, want %d", hn, blocks[13])
	}
	if got, want := peerReleased(b), float64(2*blocks[13]); got != want || acked(b) != 2 {
		t.Fatalf("B's fan-out: %v members acknowledged, %v blocks released, want 2 and %v", acked(b), got, want)
	}
	for _, nd := range []*testNode{a, c} {
		if got := internal(nd, 13); got != 0 {
			t.Fatalf("%s still held %d unreleased blocks of session 13", nd.id, got)
		}
	}
}
