package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
)

// raftView is one node's Raft term and the leader it knows.
type raftView struct {
	term   uint64
	leader string
}

func raftViews(t *testing.T, nodes []*testNode) map[string]raftView {
	t.Helper()
	views := map[string]raftView{}
	for _, nd := range nodes {
		st, err := clusterapi.NewClient(nd.http, control.WithToken(testSecret)).Status(withTimeout(t, 10*time.Second))
		if err != nil {
			t.Fatalf("%s status: %v", nd.id, err)
		}
		v := raftView{term: st.Raft.Term}
		if st.Leader != nil {
			v.leader = st.Leader.ID
		}
		views[nd.id] = v
	}
	return views
}

// TestRaftPortRefusesStrangers (issue 18, secure by default): in a
// three-node cluster with a cluster secret, a client speaking
// hashicorp/raft's own wire (a NetworkTransport, as a node without the
// secret or of the previous version would) gets no answer from any node's
// Raft port to a RequestVote or an AppendEntries carrying a far higher
// term, and the cluster's term and leader do not move. Each node logs the
// refusal. Without the handshake every node answers such an RPC and takes
// the probe's term, so the leader steps down.
func TestRaftPortRefusesStrangers(t *testing.T) {
	nodes, _ := startCluster(t, 3)
	before := raftViews(t, nodes)
	var maxTerm uint64
	for _, v := range before {
		maxTerm = max(maxTerm, v.term)
	}
	probeTerm := maxTerm + 1000

	stranger, err := hraft.NewTCPTransport("127.0.0.1:0", nil, 1, 3*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	self := stranger.LocalAddr()
	for _, nd := range nodes {
		target := hraft.ServerAddress(nd.raft)
		probes := []struct {
			name string
			send func() (uint64, error)
		}{
			{"RequestVote", func() (uint64, error) {
				var resp hraft.RequestVoteResponse
				err := stranger.RequestVote(hraft.ServerID(nd.id), target, &hraft.RequestVoteRequest{
					RPCHeader: hraft.RPCHeader{ProtocolVersion: hraft.ProtocolVersionMax, ID: []byte("intruder"), Addr: []byte(self)},
					Term:      probeTerm, LastLogIndex: 1 << 40, LastLogTerm: probeTerm,
				}, &resp)
				return resp.Term, err
			}},
			{"AppendEntries", func() (uint64, error) {
				var resp hraft.AppendEntriesResponse
				err := stranger.AppendEntries(hraft.ServerID(nd.id), target, &hraft.AppendEntriesRequest{
					RPCHeader: hraft.RPCHeader{ProtocolVersion: hraft.ProtocolVersionMax, ID: []byte("intruder"), Addr: []byte(self)},
					Term:      probeTerm, LeaderCommitIndex: 0,
				}, &resp)
				return resp.Term, err
			}},
		}
		for _, p := range probes {
			term, err := p.send()
			if err == nil {
				t.Errorf("%s answered a stranger's %s (term %d in its response)", nd.id, p.name, term)
				continue
			}
			t.Logf("%s %s: %v", nd.id, p.name, err)
		}
	}

	// Raft keeps running as before: same leader everywhere, no term moved
	// towards the probe's (a spurious election under load moves it by one
	// or two, never by a thousand).
	time.Sleep(2 * time.Second) // several heartbeats
	after := raftViews(t, nodes)
	for _, nd := range nodes {
		b, a := before[nd.id], after[nd.id]
		if a.term >= probeTerm {
			t.Errorf("%s took the stranger's term: %d (probe %d)", nd.id, a.term, probeTerm)
		}
		if a.term == b.term && a.leader != b.leader {
			t.Errorf("%s changed its leader from %q to %q in the same term", nd.id, b.leader, a.leader)
		}
		if a.term != b.term && a.term < probeTerm {
			t.Logf("%s: term %d -> %d (an election of the cluster's own)", nd.id, b.term, a.term)
		}
	}
	if _, ok := leaderOf(t, nodes); !ok {
		t.Fatal("no leader after the probes")
	}
	for _, nd := range nodes {
		if !strings.Contains(nd.p.Log(), "failed the cluster-secret handshake") {
			t.Errorf("%s did not log the refused stranger", nd.id)
		}
	}
	// The cluster still commits: a namespace created now is seen by all.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	replicated(t, nodes[0], "after-probe")
	for _, nd := range nodes {
		waitFor(t, 10*time.Second, nd.id+" sees the namespace", func() bool {
			_, err := httpClient(t, nd.http).Namespace(ctx, "after-probe")
			return err == nil
		})
	}
}
