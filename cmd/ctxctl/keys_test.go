package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/internal/clustersecret"
)

func TestKeysCreateListRevoke(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	if err := runKeys(ctx, []string{"create", "--data-dir", dir, "--namespaces", "team-a, team-b-*", "--description", "ops", "--json"}, &out, &errOut); err != nil {
		t.Fatal(err, errOut.String())
	}
	var created struct {
		ID     string   `json:"access_key_id"`
		Secret string   `json:"secret_access_key"`
		NS     []string `json:"namespaces"`
	}
	if err := json.Unmarshal(out.Bytes(), &created); err != nil || created.ID == "" || len(created.Secret) != 40 || len(created.NS) != 2 {
		t.Fatalf("create output %q: %v", out.String(), err)
	}
	out.Reset()
	if err := runKeys(ctx, []string{"list", "--data-dir", dir}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), created.ID) || !strings.Contains(out.String(), "team-a,team-b-*") || strings.Contains(out.String(), created.Secret) {
		t.Fatalf("list output:\n%s", out.String())
	}
	out.Reset()
	if err := runKeys(ctx, []string{"revoke", created.ID, "--data-dir", dir}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if err := runKeys(ctx, []string{"revoke", "--data-dir", dir, created.ID}, &out, &errOut); !errors.Is(err, block.ErrNotFound) {
		t.Fatalf("second revoke: %v", err)
	}
	out.Reset()
	if err := runKeys(ctx, []string{"list", "--data-dir", dir, "--json"}, &out, &errOut); err != nil || strings.TrimSpace(out.String()) != "[]" {
		t.Fatalf("list after revoke: %q %v", out.String(), err)
	}
	for _, bad := range [][]string{{"create", "--data-dir", dir}, {"create", "--data-dir", dir, "--namespaces", "Bad!"}, {"frobnicate"}, {}} {
		if err := runKeys(ctx, bad, &out, &errOut); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}

// TestKeysRemote drives the cluster's key endpoints with the secret from a
// flag, the environment and a file.
func TestKeysRemote(t *testing.T) {
	fake := &fakeCluster{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	ctx := context.Background()
	secretFile := filepath.Join(t.TempDir(), "cluster.secret")
	if err := clustersecret.Save(secretFile, "from-file-0123456789"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		env      string
		args     []string
		wantOut  string
		wantCall string
	}{
		{"create, flag", "", []string{"create", "--addr", addr, "--cluster-secret", "from-flag-0123456789", "--namespaces", "a,b", "--description", "ops"},
			"secret_access_key sekrit", `POST /v1/cluster/keys {"namespaces":["a","b"],"description":"ops"} from-flag-0123456789`},
		{"list, env", "from-env-0123456789", []string{"list", "--addr", addr}, "CTXLISTED", "GET /v1/cluster/keys  from-env-0123456789"},
		{"revoke, file", "", []string{"revoke", "CTXNEW", "--addr", addr, "--cluster-secret-file", secretFile}, "revoked CTXNEW",
			`POST /v1/cluster/keys/revoke {"id":"CTXNEW"} from-file-0123456789`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CTXTIER_CLUSTER_SECRET", tc.env)
			var out, errOut bytes.Buffer
			if err := runKeys(ctx, tc.args, &out, &errOut); err != nil {
				t.Fatalf("%v (%s)", err, errOut.String())
			}
			if !strings.Contains(out.String(), tc.wantOut) {
				t.Errorf("output lacks %q:\n%s", tc.wantOut, out.String())
			}
			fake.mu.Lock()
			last := fake.calls[len(fake.calls)-1]
			fake.mu.Unlock()
			if last != tc.wantCall {
				t.Errorf("sent %q\nwant %q", last, tc.wantCall)
			}
		})
	}
	t.Setenv("CTXTIER_CLUSTER_SECRET", "")
	var out, errOut bytes.Buffer
	if err := runKeys(ctx, []string{"list", "--addr", addr}, &out, &errOut); err == nil || !strings.Contains(err.Error(), "cluster secret") {
		t.Fatalf("--addr without a secret: %v", err)
	}
}
