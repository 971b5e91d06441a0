package raft

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// testCA makes a CA and returns it with a function issuing leaf
// certificates (for both server and client auth) valid for 127.0.0.1.
func testCA(t *testing.T) (*x509.CertPool, func() tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ctxtier test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	serial := int64(2)
	issue := func() tls.Certificate {
		lk, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		serial++
		lt := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "node"}, NotBefore: time.Now().Add(-time.Hour),
			NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
		ld, err := x509.CreateCertificate(rand.Reader, lt, ca, &lk.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{ld}, PrivateKey: lk}
	}
	return pool, issue
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func tcpConfig(t *testing.T, id string, tlsc *TLS) Config {
	cfg := DefaultConfig()
	cfg.NodeID = id
	cfg.RaftAddr = freeAddr(t)
	cfg.DataDir = t.TempDir()
	cfg.TLS = tlsc
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
	stranger := NewStreamLayer(ln, nil, &TLS{Certificate: otherIssue(), RootCAs: pool, Mutual: true})
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
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range fams {
		if f.GetName() == "ctxtier_raft_wal_log_appends_total" {
			for _, m := range f.GetMetric() {
				found = found || m.GetCounter().GetValue() > 0
			}
		}
	}
	if !found {
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
