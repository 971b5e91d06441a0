package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
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
