package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
	"github.com/ctxtier/ctxtier/gateway/client"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
	"github.com/ctxtier/ctxtier/internal/clustersecret"
	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/raft/tlstest"
)

func tlsArgs(f tlstest.Files) []string {
	return []string{"--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-ca", f.CA, "--tls-mutual"}
}

// TestClusterTLS: three ctxd processes with --tls-* --tls-mutual form a
// cluster over TLS Raft and spread replicas and erasure-coded shards over
// TLS peer connections; every block reads back through every node. The
// peer port refuses a plain client. A fourth node whose certificate comes
// from another CA is refused when it joins and never becomes a member.
func TestClusterTLS(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t)
	files := map[string]tlstest.Files{}
	nodes, join := startClusterWith(t, 3, func(id string) []string {
		files[id] = ca.WriteFiles(t, dir, id)
		return tlsArgs(files[id])
	})
	for _, nd := range nodes {
		if !strings.Contains(nd.p.Log(), `"node_tls":"mutual"`) {
			t.Fatalf("%s did not report node_tls mutual", nd.id)
		}
	}
	ctx := withTimeout(t, time.Minute)

	// r3: three replicas, so every node holds every block; ec: two data
	// shards and one parity, so every read needs shards from other nodes.
	replicated(t, nodes[0], "r3")
	if _, err := httpClient(t, nodes[0].http).CreateNamespace(ctx, block.Namespace{Name: "ec", DataShards: 2, ParityShards: 1}); err != nil {
		t.Fatal(err)
	}
	const blocks = 6
	key := func(i int) block.Key {
		return block.NewKey([]string{"r3", "ec"}[i%2], uint64(7000+i))
	}
	for i := range blocks {
		if err := httpClient(t, nodes[i%3].http).Put(ctx, key(i), blockBytes(i, 24<<10), block.PutOptions{}); err != nil {
			t.Fatalf("put %v through %s: %v", key(i), nodes[i%3].id, err)
		}
	}
	for _, nd := range nodes {
		hc := httpClient(t, nd.http)
		// A follower answers from its own copy of the index, which may
		// trail the put by a moment.
		waitFor(t, 10*time.Second, nd.id+" to see every block", func() bool {
			for i := range blocks {
				if _, err := hc.Stat(ctx, key(i)); err != nil {
					return false
				}
			}
			return true
		})
		for i := range blocks {
			got, err := hc.Get(ctx, key(i))
			if err != nil || !bytes.Equal(got, blockBytes(i, 24<<10)) {
				t.Fatalf("%s: get %v: %v", nd.id, key(i), err)
			}
		}
	}

	// The peer listener speaks only TLS, to a client with a certificate.
	st, err := clusterapi.NewClient(nodes[0].http, control.WithToken(testSecret)).Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var dataAddr string
	for _, m := range st.Members {
		if m.ID == "n2" {
			dataAddr = m.DataAddr
		}
	}
	if c, err := client.Dial(ctx, dataAddr, client.Options{DialTimeout: 2 * time.Second}); err == nil {
		c.Close()
		t.Fatal("the peer listener accepted a plain-TCP client")
	}
	n1TLS, err := raft.LoadTLS(files["n1"].Cert, files["n1"].Key, files["n1"].CA, "", true)
	if err != nil {
		t.Fatal(err)
	}
	// A trusted certificate alone is not enough: the node identity is
	// required too.
	if _, err := client.Dial(ctx, dataAddr, client.Options{DialTimeout: 2 * time.Second, TLS: n1TLS.ClientConfig("")}); !errors.Is(err, block.ErrUnauthenticated) {
		t.Fatalf("peer listener over mutual TLS without the cluster secret: %v", err)
	}
	c, err := client.Dial(ctx, dataAddr, client.Options{DialTimeout: 2 * time.Second, TLS: n1TLS.ClientConfig(""),
		AccessKeyID: clustersecret.NodeAccessKeyID, Secret: testSecret})
	if err != nil {
		t.Fatalf("peer listener over mutual TLS: %v", err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close()

	// A node with a certificate from another CA asks to join over HTTP; the
	// leader's TLS check of its Raft address refuses it.
	other := tlstest.NewCA(t)
	n4 := &testNode{id: "n4", http: freeAddr(t), raft: freeAddr(t), dataDir: t.TempDir(), extra: tlsArgs(other.WriteFiles(t, dir, "n4"))}
	n4.p = startCtxd(t, n4.args(join)...)
	waitFor(t, 15*time.Second, "n4's join to be refused", func() bool {
		l := n4.p.Log()
		return strings.Contains(l, "joining the cluster failed") && strings.Contains(l, "permission denied") && strings.Contains(l, "certificate")
	})
	for _, l := range strings.Split(n4.p.Log(), "\n") {
		if strings.Contains(l, "joining the cluster failed") {
			t.Logf("n4: %s", l)
		}
	}
	if st, err = clusterapi.NewClient(nodes[0].http, control.WithToken(testSecret)).Status(ctx); err != nil {
		t.Fatal(err)
	}
	voters := 0
	for _, m := range st.Members {
		if m.ID == "n4" {
			t.Fatalf("n4 became a member: %+v", m)
		}
		if m.Voter {
			voters++
		}
	}
	if voters != 3 {
		t.Fatalf("%d voters, want 3: %+v", voters, st.Members)
	}
	refused := false
	for _, nd := range nodes {
		refused = refused || strings.Contains(nd.p.Log(), `"msg":"join refused"`)
	}
	if !refused {
		t.Fatal("no node logged the refused join")
	}
}
