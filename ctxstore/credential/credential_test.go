package credential

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

func TestAllows(t *testing.T) {
	cases := []struct {
		scope []string
		ns    string
		want  bool
	}{
		{[]string{"a"}, "a", true},
		{[]string{"a"}, "b", false},
		{[]string{"a"}, "ab", false},
		{[]string{"team-a-*"}, "team-a-x", true},
		{[]string{"team-a-*"}, "team-b-x", false},
		{[]string{"x", "*"}, "anything", true},
		{nil, "a", false},
	}
	for _, tc := range cases {
		if got := (Credential{Namespaces: tc.scope}).Allows(tc.ns); got != tc.want {
			t.Errorf("%v allows %q = %v, want %v", tc.scope, tc.ns, got, tc.want)
		}
	}
}

func TestValidateScope(t *testing.T) {
	good := [][]string{{"*"}, {"a"}, {"team-a-*", "b.c"}}
	bad := [][]string{nil, {}, {""}, {"*x"}, {"Upper"}, {"a_b"}, {"**"}}
	for _, s := range good {
		if err := ValidateScope(s); err != nil {
			t.Errorf("ValidateScope(%q) = %v", s, err)
		}
	}
	for _, s := range bad {
		if err := ValidateScope(s); !errors.Is(err, block.ErrInvalidArgument) {
			t.Errorf("ValidateScope(%q) = %v, want ErrInvalidArgument", s, err)
		}
	}
}

func TestFileStoreLifecycle(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := DefaultConfig(dir)
	cfg.ReloadInterval = 0
	s, err := OpenFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lookup("CTXNOPE"); !errors.Is(err, block.ErrUnauthenticated) {
		t.Fatalf("lookup in empty store: %v", err)
	}
	c, err := s.Create(ctx, []string{"a", "team-*"}, "ops")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.AccessKeyID) != 20 || !strings.HasPrefix(c.AccessKeyID, AccessKeyPrefix) || len(c.Secret) != 40 {
		t.Fatalf("key shape: %q / %d-char secret", c.AccessKeyID, len(c.Secret))
	}
	got, err := s.Lookup(c.AccessKeyID)
	if err != nil || got.Secret != c.Secret || !got.Allows("team-x") || got.Allows("b") {
		t.Fatalf("lookup: %+v, %v", got, err)
	}

	// The secret is not in the file in clear, and the node key is private.
	raw, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(c.Secret)) {
		t.Fatal("secret stored in clear")
	}
	if fi, err := os.Stat(filepath.Join(dir, NodeKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("node key: %v %v", fi.Mode(), err)
	}

	// Another process (a second store on the same dir, as ctxctl would be)
	// sees the key, revokes it, and the first store notices without restart.
	other, err := OpenFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	list, err := other.List(ctx)
	if err != nil || len(list) != 1 || list[0].Secret != "" || list[0].Description != "ops" {
		t.Fatalf("list: %+v, %v", list, err)
	}
	if err := other.Revoke(ctx, c.AccessKeyID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lookup(c.AccessKeyID); !errors.Is(err, block.ErrUnauthenticated) {
		t.Fatalf("revoked key still valid in the first store: %v", err)
	}
	if err := other.Revoke(ctx, c.AccessKeyID); !errors.Is(err, block.ErrNotFound) {
		t.Fatalf("second revoke: %v", err)
	}
	if _, err := s.Create(ctx, []string{"Bad"}, ""); !errors.Is(err, block.ErrInvalidArgument) {
		t.Fatalf("bad scope: %v", err)
	}
}

func TestFileStoreTamperAndKeyLoss(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := DefaultConfig(dir)
	cfg.ReloadInterval = 0
	s, err := OpenFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := s.Create(ctx, []string{"a"}, "")
	b, _ := s.Create(ctx, []string{"b"}, "")
	path := filepath.Join(dir, FileName)
	raw, _ := os.ReadFile(path)
	var fd fileData
	if err := json.Unmarshal(raw, &fd); err != nil {
		t.Fatal(err)
	}
	// Swap the two sealed secrets: the AAD binds each to its id.
	fd.Keys[0].SealedSecret, fd.Keys[1].SealedSecret = fd.Keys[1].SealedSecret, fd.Keys[0].SealedSecret
	swapped, _ := json.Marshal(fd)
	if err := os.WriteFile(path+".x", swapped, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".x", path); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFile(cfg); !errors.Is(err, block.ErrChecksum) {
		t.Fatalf("swapped secrets opened: %v", err)
	}
	// The running store keeps the last good keys when the file goes bad.
	if got, err := s.Lookup(a.AccessKeyID); err != nil || got.Secret != a.Secret {
		t.Fatalf("last good keys lost: %v", err)
	}
	_ = b
	// Without the node key the secrets cannot be opened.
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, NodeKeyFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFile(cfg); err == nil || !strings.Contains(err.Error(), "node key") {
		t.Fatalf("open without node key: %v", err)
	}
}
