package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
	"github.com/ctxtier/ctxtier/gateway/client"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
	"github.com/ctxtier/ctxtier/raft/tlstest"
)

// TestClusterClientTLS (issue 18 item 4): three ctxd processes with
// --tls-* --tls-mutual --tls-clients --auth required. Joins, forwarding and
// the cluster API run over https; a key is created through one node; the
// native protocol, the HTTP API and the S3 endpoint serve TLS with the node
// certificate (clients trust --tls-ca) and refuse plaintext.
func TestClusterClientTLS(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t)
	nodes := make([]*testNode, 3)
	var joins []string
	var caFile string
	for i := range nodes {
		nd := &testNode{id: fmt.Sprintf("n%d", i+1), http: freeAddr(t), raft: freeAddr(t), dataDir: t.TempDir()}
		f := ca.WriteFiles(t, dir, nd.id)
		caFile = f.CA
		nd.extra = append(tlsArgs(f), "--tls-clients", "--auth", "required")
		nodes[i] = nd
		joins = append(joins, nd.http)
	}
	join := strings.Join(joins, ",")
	for _, nd := range nodes {
		nd.p = startCtxd(t, nd.args(join)...)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	ctls := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool}
	ctx := withTimeout(t, 90*time.Second)
	admin := clusterapi.NewClient(nodes[1].http, control.WithToken(testSecret), control.WithTLS(ctls))
	waitFor(t, 30*time.Second, "three alive voters over https joins", func() bool {
		st, err := admin.Status(context.Background())
		if err != nil {
			return false
		}
		n := 0
		for _, m := range st.Members {
			if m.State == "alive" && m.Voter {
				n++
			}
		}
		return n == 3
	})
	for _, nd := range nodes {
		if !strings.Contains(nd.p.Log(), `"client_tls":true`) {
			t.Fatalf("%s does not report client_tls", nd.id)
		}
	}
	key, err := admin.CreateKey(ctx, []string{"*"}, "admin")
	if err != nil {
		t.Fatal(err)
	}
	httpsClient := func(nd *testNode) *client.HTTPClient {
		cfg := client.HTTPDefaultConfig()
		cfg.BaseURL, cfg.TLS, cfg.AccessKeyID, cfg.Secret = "https://"+nd.http, ctls, key.AccessKeyID, key.SecretAccessKey
		hc, err := client.NewHTTP(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { hc.Close() })
		return hc
	}
	// Namespaces are created on the leader; a follower forwards the
	// block's commit to it over https.
	st, err := admin.Status(ctx)
	if err != nil || st.Leader == nil {
		t.Fatalf("status: %+v %v", st, err)
	}
	var leader, follower *testNode
	for _, nd := range nodes {
		if nd.id == st.Leader.ID {
			leader = nd
		} else {
			follower = nd
		}
	}
	hl := httpsClient(leader)
	waitFor(t, 5*time.Second, "the key on the leader", func() bool { _, err := hl.ListNamespaces(ctx); return err == nil })
	if _, err := hl.CreateNamespace(ctx, block.Namespace{Name: "r3", DataShards: 1, ParityShards: 2}); err != nil {
		t.Fatal(err)
	}
	h3 := httpsClient(follower)
	waitFor(t, 5*time.Second, "the key and namespace on "+follower.id, func() bool { _, err := h3.Namespace(ctx, "r3"); return err == nil })
	want := blockBytes(1, 64<<10)
	k := block.NewKey("r3", 1)
	if err := h3.Put(ctx, k, want, block.PutOptions{}); err != nil {
		t.Fatalf("https put through follower %s: %v", follower.id, err)
	}
	for _, nd := range nodes {
		nc, err := client.Dial(ctx, nd.p.Native, client.Options{Conns: 1, TLS: ctls, AccessKeyID: key.AccessKeyID, Secret: key.SecretAccessKey})
		if err != nil {
			t.Fatalf("%s native over TLS: %v", nd.id, err)
		}
		waitFor(t, 5*time.Second, "the block through "+nd.id, func() bool {
			got, err := nc.Get(ctx, k)
			if err == nil && !bytes.Equal(got, want) {
				t.Fatalf("%s: wrong bytes", nd.id)
			}
			return err == nil
		})
		nc.Close()
		if got, err := httpsClient(nd).Get(ctx, k); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s https get: %d bytes, %v", nd.id, len(got), err)
		}
		// Plaintext is refused on every client port.
		if c, err := client.Dial(ctx, nd.p.Native, client.Options{Conns: 1, DialTimeout: 2 * time.Second, AccessKeyID: key.AccessKeyID, Secret: key.SecretAccessKey}); err == nil {
			c.Close()
			t.Fatalf("%s: the native port accepted a plaintext client", nd.id)
		}
		for _, u := range []string{"http://" + nd.http + "/healthz", "http://" + nd.p.S3 + "/"} {
			if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(u); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode < 400 {
					t.Fatalf("%s: plaintext %s answered %d %s", nd.id, u, resp.StatusCode, b)
				}
			}
		}
		// S3 over TLS answers (an anonymous request is refused by S3 itself).
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: ctls}}
		resp, err := hc.Get("https://" + nd.p.S3 + "/")
		if err != nil {
			t.Fatalf("%s s3 over TLS: %v", nd.id, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !bytes.Contains(body, []byte("AccessDenied")) {
			t.Fatalf("%s anonymous s3 over TLS: %d %s", nd.id, resp.StatusCode, body)
		}
	}
	// A session ended through the follower is ended on the other two
	// members over https (the fan-out's internal calls): they acknowledge
	// and release their replicas, so their own end of it releases none.
	sk := block.NewKey("r3", 2)
	if err := h3.Put(ctx, sk, want, block.PutOptions{Reuse: block.ReuseSession, Retain: 10 * time.Minute, Session: 31}); err != nil {
		t.Fatal(err)
	}
	if n, err := h3.EndSession(ctx, "r3", 31); err != nil || n != 1 {
		t.Fatalf("https session end through %s: %d %v", follower.id, n, err)
	}
	mc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: ctls}}
	resp, err := mc.Get("https://" + follower.http + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range []string{`ctxtier_session_end_members_total{result="acked"} 2`, "ctxtier_session_end_peer_released_blocks_total 2"} {
		if !bytes.Contains(metrics, []byte("\n"+line+"\n")) {
			t.Fatalf("%s's metrics lack %q", follower.id, line)
		}
	}
	for _, nd := range nodes {
		if nd == follower {
			continue
		}
		r, err := clusterapi.NewClient(nd.http, control.WithToken(testSecret), control.WithTLS(ctls)).EndSession(ctx, "r3", 31)
		if err != nil || r.Released != 0 {
			t.Fatalf("%s after the fan-out: %+v %v", nd.id, r, err)
		}
	}
	// A client that does not trust the CA is refused.
	untrusting := clusterapi.NewClient(nodes[0].http, control.WithToken(testSecret), control.WithTLS(&tls.Config{MinVersion: tls.VersionTLS13}))
	if _, err := untrusting.Status(ctx); !errors.Is(err, block.ErrUnavailable) || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("status from a client that does not trust the CA: %v", err)
	}
}
