package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/gateway/httpapi"
	"github.com/ctxtier/ctxtier/tiers/dram"
)

// TestNamespacesCommand drives `ctxctl namespaces` against a real HTTP API
// server (gateway/httpapi over a DRAM-tier store).
func TestNamespacesCommand(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	cat, err := ctxstore.OpenFileCatalog(filepath.Join(t.TempDir(), "ns.json"))
	if err != nil {
		t.Fatal(err)
	}
	dcfg := dram.DefaultConfig()
	dcfg.Capacity = 16 << 20
	tier, err := dram.New(dcfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tier.Close() })
	store, err := ctxstore.New(ctxstore.DefaultConfig(), cat, tier, log)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go httpapi.New(httpapi.DefaultConfig(), store, nil, log).Serve(ctx, ln)
	addr := ln.Addr().String()
	tests := []struct {
		args    []string
		wantErr string
		wantOut string
	}{
		{[]string{"create", "lmcache", "--kind", "object", "--addr", addr}, "", "lmcache                  object"},
		{[]string{"create", "engines", "--addr", addr}, "", "engines                  block"},
		{[]string{"create", "bad", "--kind", "file", "--addr", addr}, "kind \"file\"", ""},
		{[]string{"create", "--kind", "object"}, "missing NAME", ""},
		{[]string{"list", "--addr", addr}, "", "lmcache                  object"},
		{[]string{"frobnicate", "--addr", addr}, "unknown action", ""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := runNamespaces(ctx, tt.args, &out, &errOut)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !strings.Contains(out.String(), tt.wantOut) {
				t.Fatalf("err %v, out %q, want %q", err, out.String(), tt.wantOut)
			}
		})
	}
	if ns, err := store.Namespace("lmcache"); err != nil || !ns.IsObject() {
		t.Fatalf("lmcache: %+v %v", ns, err)
	}
}
