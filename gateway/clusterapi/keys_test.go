package clusterapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/raft"
)

// TestKeysReplicated creates a key through a follower (forwarded to the
// leader), finds it on every node's store, lists and revokes it; anonymous
// and wrong-token calls are refused, and status needs the token when
// protected.
func TestKeysReplicated(t *testing.T) {
	const token = "cluster-secret-0123456789"
	key := bytes.Repeat([]byte{3}, 32)
	c := startCluster(&tcluster{t: t, ctl: []control.Option{control.WithToken(token)}, opts: []Option{WithProtectStatus(true)},
		keys: map[string]*credential.Replicated{}, newKeys: keyStore(t, key)}, 3)
	stores := c.keys
	f := c.Follower()
	ctx := context.Background()

	for _, tc := range []struct {
		name string
		cl   *Client
	}{
		{"anonymous", NewClient(f.Addr())},
		{"wrong token", NewClient(f.Addr(), control.WithToken("not-the-secret-0123"))},
	} {
		if _, err := tc.cl.CreateKey(ctx, []string{"a"}, ""); !errors.Is(err, block.ErrUnauthenticated) {
			t.Errorf("%s create: %v", tc.name, err)
		}
		if _, err := tc.cl.ListKeys(ctx); !errors.Is(err, block.ErrUnauthenticated) {
			t.Errorf("%s list: %v", tc.name, err)
		}
		if _, err := tc.cl.Status(ctx); !errors.Is(err, block.ErrUnauthenticated) {
			t.Errorf("%s status: %v", tc.name, err)
		}
		if _, err := tc.cl.Repair(ctx); !errors.Is(err, block.ErrUnauthenticated) {
			t.Errorf("%s repair: %v", tc.name, err)
		}
	}
	cl := NewClient(f.Addr(), control.WithToken(token))
	if _, err := cl.Status(ctx); err != nil {
		t.Fatalf("status with token: %v", err)
	}
	if _, err := cl.CreateKey(ctx, []string{"Not Valid"}, ""); !errors.Is(err, block.ErrInvalidArgument) {
		t.Fatalf("bad scope: %v", err)
	}
	k, err := cl.CreateKey(ctx, []string{"a", "team-*"}, "tenant a")
	if err != nil {
		t.Fatal(err)
	}
	if k.SecretAccessKey == "" || k.AccessKeyID == "" {
		t.Fatalf("created %+v", k)
	}
	for _, n := range c.Nodes {
		deadline := time.Now().Add(5 * time.Second)
		for {
			got, err := stores[n.ID].Lookup(k.AccessKeyID)
			if err == nil {
				if got.Secret != k.SecretAccessKey || !got.Allows("team-x") || got.Allows("b") {
					t.Fatalf("%s: %+v", n.ID, got)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never saw the key: %v", n.ID, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	list, err := cl.ListKeys(ctx)
	if err != nil || len(list) != 1 || list[0].AccessKeyID != k.AccessKeyID || list[0].SecretAccessKey != "" || list[0].Description != "tenant a" {
		t.Fatalf("list %+v %v", list, err)
	}
	if err := cl.RevokeKey(ctx, k.AccessKeyID); err != nil {
		t.Fatal(err)
	}
	if err := cl.RevokeKey(ctx, k.AccessKeyID); !errors.Is(err, block.ErrNotFound) {
		t.Fatalf("revoke twice: %v", err)
	}
	for _, n := range c.Nodes {
		deadline := time.Now().Add(5 * time.Second)
		for {
			if _, err := stores[n.ID].Lookup(k.AccessKeyID); errors.Is(err, block.ErrUnauthenticated) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still accepts the revoked key", n.ID)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// Without a token, the key endpoints refuse even a caller with none.
func TestKeysNeedToken(t *testing.T) {
	c := startCluster(&tcluster{t: t, keys: map[string]*credential.Replicated{}, newKeys: keyStore(t, bytes.Repeat([]byte{3}, 32))}, 1)
	n := c.Nodes[0]
	if _, err := NewClient(n.Addr()).CreateKey(context.Background(), []string{"a"}, ""); !errors.Is(err, block.ErrUnauthenticated) {
		t.Fatalf("create without a cluster secret: %v", err)
	}
}

// keyStore makes each node's access-key store over its Raft node.
func keyStore(t *testing.T, key []byte) func(*raft.Node) *credential.Replicated {
	return func(n *raft.Node) *credential.Replicated {
		r, err := credential.NewReplicated(n, key)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
}

// TestStatusReaders: with ProtectStatus and StatusReaders (ctxd's --auth
// required: any access key), status and repair answer the token or
// credentials the check accepts, and nothing else; the other endpoints
// still take the token only.
func TestStatusReaders(t *testing.T) {
	const token = "cluster-secret-0123456789"
	readers := func(r *http.Request) error {
		if r.Header.Get("Authorization") == "Bearer good:key" {
			return nil
		}
		return fmt.Errorf("%w: bad key", block.ErrUnauthenticated)
	}
	c := startCluster(&tcluster{t: t, ctl: []control.Option{control.WithToken(token)},
		opts: []Option{WithProtectStatus(true), WithStatusReaders(readers)}}, 1)
	base := "http://" + c.Nodes[0].Addr()
	for _, tc := range []struct {
		name, path, token, auth string
		want                    int
	}{
		{"status, anonymous", PathStatus, "", "", http.StatusUnauthorized},
		{"status, token", PathStatus, token, "", http.StatusOK},
		{"status, wrong token", PathStatus, "not-the-secret-0123", "", http.StatusUnauthorized},
		{"status, accepted key", PathStatus, "", "Bearer good:key", http.StatusOK},
		{"status, refused key", PathStatus, "", "Bearer good:other", http.StatusUnauthorized},
		{"status, wrong token and an accepted key", PathStatus, "not-the-secret-0123", "Bearer good:key", http.StatusUnauthorized},
		{"repair, accepted key", PathRepair, "", "Bearer good:key", http.StatusOK},
		{"repair, refused key", PathRepair, "", "Bearer bad:key", http.StatusUnauthorized},
		{"keys, accepted key", PathKeys, "", "Bearer good:key", http.StatusUnauthorized},
	} {
		req, _ := http.NewRequest("GET", base+tc.path, nil)
		if tc.token != "" {
			req.Header.Set(control.HeaderToken, tc.token)
		}
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d %.200s, want %d", tc.name, resp.StatusCode, body, tc.want)
		}
	}
}
