package raft

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/internal/freeport"
	"github.com/ctxtier/ctxtier/raft/fsm"
	"github.com/ctxtier/ctxtier/raft/tlstest"
)

// testCA makes a CA and returns it with a function issuing leaf
// certificates (for both server and client auth) valid for 127.0.0.1.
func testCA(t *testing.T) (*x509.CertPool, func() tls.Certificate) {
	ca := tlstest.NewCA(t)
	return ca.Pool(), func() tls.Certificate { return ca.Issue(t, "node") }
}

func freeAddr(t *testing.T) string { return freeport.Addr(t) }

func tcpConfig(t *testing.T, id string, tlsc *TLS) Config {
	cfg := DefaultConfig()
	cfg.NodeID = id
	cfg.RaftAddr = freeAddr(t)
	cfg.DataDir = t.TempDir()
	cfg.TLS = tlsc
	cfg.Secret = testSecret
	return cfg
}

// Two nodes over real TCP with mutual TLS on 127.0.0.1: one bootstraps, the
// other joins and replicates; a peer with a certificate from another CA is
// refused.
func TestTCPMutualTLS(t *testing.T) {
	pool, issue := testCA(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	reg := prometheus.NewRegistry()
	c1 := tcpConfig(t, "t1", &TLS{Certificate: issue(), RootCAs: pool, Mutual: true})
	n1, err := Open(ctx, c1, quietLog(), reg)
	if err != nil {
		t.Fatal(err)
	}
	defer n1.Close()
	c2 := tcpConfig(t, "t2", &TLS{Certificate: issue(), RootCAs: pool, Mutual: true})
	c2.Bootstrap = false
	n2, err := Open(ctx, c2, quietLog(), reg)
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close()
	// Join may report ErrOutcomeUnknown when the slow first TLS handshake
	// costs the leader its lease; like any client, retry (Join is idempotent).
	eventually(t, "join over TLS", func() bool {
		l := (&cluster{t: t}).waitLeader(n1, n2)
		return l.Join(ctx, fsm.Member{ID: "t2", RaftAddr: c2.RaftAddr}) == nil
	})
	eventually(t, "put over TLS", func() bool {
		l := (&cluster{t: t}).waitLeader(n1, n2)
		_, err := l.Propose(ctx, putOp(42, 42))
		return err == nil
	})
	for _, n := range []*Node{n1, n2} {
		eventually(t, "replication over TLS", func() bool { _, ok := n.FSM().Lookup(block.NewKey(block.DefaultNamespace, 42)); return ok })
	}

	// A stranger whose certificate chains to another CA cannot get in.
	_, otherIssue := testCA(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// It holds the cluster secret: only its certificate is wrong.
	stranger := NewStreamLayer(ln, nil, &TLS{Certificate: otherIssue(), RootCAs: pool, Mutual: true}, testAuth(t, testSecret, 0))
	defer stranger.Close()
	conn, err := stranger.Dial(rafAddr(c1.RaftAddr), 2*time.Second)
	if err == nil {
		// TLS 1.3 reports a rejected client certificate on the first read.
		conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
	}
	if err == nil {
		t.Fatal("peer with an untrusted client certificate was accepted")
	}
	if appends, _ := counterSum(t, reg, "ctxtier_raft_wal_log_appends_total"); appends == 0 {
		t.Error("raft-wal metrics missing or zero")
	}
}

func rafAddr(s string) hraft.ServerAddress { return hraft.ServerAddress(s) }

// A node restarted on its data directory recovers its state from the WAL
// and snapshots, and does not bootstrap again.
func TestOpenRestartRecovers(t *testing.T) {
	ctx := context.Background()
	cfg := tcpConfig(t, "r1", nil)
	n, err := Open(ctx, cfg, quietLog(), nil)
	if err != nil {
		t.Fatal(err)
	}
	(&cluster{t: t}).waitLeader(n)
	if _, err := n.Propose(ctx, putOp(1, 1)); err != nil {
		t.Fatal(err)
	}
	if err := n.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Propose(ctx, putOp(2, 2)); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n, err = Open(ctx, cfg, quietLog(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	(&cluster{t: t}).waitLeader(n)
	f, err := n.Read(ctx, ReadLinearizable)
	if err != nil {
		t.Fatal(err)
	}
	if f.Len() != 2 {
		t.Fatalf("after restart: %d entries", f.Len())
	}
	res, err := n.Propose(ctx, putOp(2, 2))
	if err != nil || res[0].Status != fsm.StatusExisted {
		t.Fatalf("re-put after restart: %+v %v", res, err)
	}
}

// Join checks a new voter's certificate over its Raft address before adding
// it: a node the cluster could not replicate to never takes a vote.
func TestJoinChecksPeerCertificate(t *testing.T) {
	pool, issue := testCA(t)
	otherPool, otherIssue := testCA(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c1 := tcpConfig(t, "j1", &TLS{Certificate: issue(), RootCAs: pool, Mutual: true})
	n1, err := Open(ctx, c1, quietLog(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n1.Close()
	(&cluster{t: t}).waitLeader(n1)
	cases := []struct {
		name string
		tls  *TLS
		want error // nil: joins
	}{
		{"certificate from another CA", &TLS{Certificate: otherIssue(), RootCAs: otherPool, Mutual: true}, block.ErrPermissionDenied},
		{"trusts another CA, refuses ours", &TLS{Certificate: issue(), RootCAs: otherPool, Mutual: true}, block.ErrPermissionDenied},
		{"plain TCP", nil, block.ErrUnavailable},
		{"same CA", &TLS{Certificate: issue(), RootCAs: pool, Mutual: true}, nil},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tcpConfig(t, fmt.Sprintf("j%d", i+2), tc.tls)
			cfg.Bootstrap = false
			n, err := Open(ctx, cfg, quietLog(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			m := fsm.Member{ID: cfg.NodeID, RaftAddr: cfg.RaftAddr}
			err = n1.Join(ctx, m)
			if tc.want == nil {
				// Going from one voter to two, a loaded machine can cost
				// the leader its lease before the new voter answers: the
				// join then says its outcome is unknown and asks for a
				// retry, which is what a joining node does.
				for attempt := 1; errors.Is(err, ErrOutcomeUnknown) && attempt <= 10; attempt++ {
					t.Logf("join attempt %d: %v; retrying", attempt, err)
					leader := (&cluster{t: t}).waitLeader(n1, n)
					if hasServer(leader, cfg.NodeID) {
						err = nil
						break
					}
					err = leader.Join(ctx, m)
				}
				if err != nil {
					t.Fatalf("join: %v", err)
				}
				if leader := (&cluster{t: t}).waitLeader(n1, n); !hasServer(leader, cfg.NodeID) {
					t.Fatalf("joined node %s is not in the leader's configuration", cfg.NodeID)
				}
				return
			}
			t.Logf("refused: %v", err)
			if !errors.Is(err, tc.want) {
				t.Fatalf("join: %v, want %v", err, tc.want)
			}
			for _, s := range n1.Servers() {
				if s.ID == cfg.NodeID {
					t.Fatalf("refused node %s is in the configuration", s.ID)
				}
			}
			if _, ok := n1.FSM().Member(cfg.NodeID); ok {
				t.Fatalf("refused node %s has a member record", cfg.NodeID)
			}
		})
	}
	// An address nobody listens on is unavailable (retryable), not refused.
	if err := n1.deps.Probe(ctx, freeAddr(t)); !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("check of a closed port: %v", err)
	}
}

// Join over plain TCP probes the joiner's Raft address before adding a
// voter: an address nobody answers on is refused, and the single node
// keeps its quorum (it still commits), while a listening joiner is added.
func TestJoinRefusesUnreachableRaftAddress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n1, err := Open(ctx, tcpConfig(t, "u1", nil), quietLog(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n1.Close()
	(&cluster{t: t}).waitLeader(n1)
	dead := freeAddr(t) // nothing listens there
	err = n1.Join(ctx, fsm.Member{ID: "ghost", RaftAddr: dead})
	if !errors.Is(err, block.ErrInvalidArgument) {
		t.Fatalf("join of an unreachable address: %v, want ErrInvalidArgument", err)
	}
	for _, s := range n1.Servers() {
		if s.ID == "ghost" {
			t.Fatal("the unreachable joiner became a member")
		}
	}
	if _, ok := n1.FSM().Member("ghost"); ok {
		t.Fatal("the unreachable joiner has a member record")
	}
	if res, err := n1.Propose(ctx, putOp(1, 1)); err != nil || res[0].Status != fsm.StatusCreated {
		t.Fatalf("the node lost its quorum: %+v %v", res, err)
	}
	cfg := tcpConfig(t, "u2", nil)
	cfg.Bootstrap = false
	n2, err := Open(ctx, cfg, quietLog(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close()
	if err := n1.Join(ctx, fsm.Member{ID: "u2", RaftAddr: cfg.RaftAddr}); err != nil {
		t.Fatalf("join of a listening node: %v", err)
	}
}

// hasServer reports whether id is in n's Raft configuration.
func hasServer(n *Node, id string) bool {
	for _, s := range n.Servers() {
		if s.ID == id {
			return true
		}
	}
	return false
}
