package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
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

// TestNamespacesQuotaCommands: quotas set at create and by set-quota reach
// the catalog, list and show print them, show prints the node's usage, and
// the DRAM tier keeps the namespace within its quota.
func TestNamespacesQuotaCommands(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	cat, err := ctxstore.OpenFileCatalog(filepath.Join(t.TempDir(), "ns.json"))
	if err != nil {
		t.Fatal(err)
	}
	dcfg := dram.DefaultConfig()
	dcfg.Capacity = 16 << 20
	dcfg.Quota = func(ns string) int64 {
		n, err := cat.Namespace(ns)
		if err != nil {
			return 0
		}
		return n.Quota.DRAM
	}
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
	usage := func() map[block.Tier]map[string]int64 {
		return map[block.Tier]map[string]int64{block.TierDRAM: tier.NamespaceBytes()}
	}
	go httpapi.New(httpapi.DefaultConfig(), store, nil, log, httpapi.WithUsage(usage)).Serve(ctx, ln)
	addr := ln.Addr().String()
	run := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if err := runNamespaces(ctx, append(args, "--addr", addr), &out, &errOut); err != nil {
			t.Fatalf("%v: %v (%s)", args, err, errOut.String())
		}
		return out.String()
	}
	tests := []struct {
		args      []string
		wantOut   []string
		wantQuota block.Quota
	}{
		{[]string{"create", "tenant-a", "--quota-dram", "64KiB", "--quota-nvme", "1GiB"}, []string{"quota=dram=64KiB,nvme=1GiB"}, block.Quota{DRAM: 64 << 10, NVMe: 1 << 30}},
		{[]string{"list"}, []string{"tenant-a", "quota=dram=64KiB,nvme=1GiB", "default", "quota=none"}, block.Quota{DRAM: 64 << 10, NVMe: 1 << 30}},
		{[]string{"set-quota", "tenant-a", "--dram", "32KiB", "--s3", "1TiB"}, []string{"quota=dram=32KiB,s3=1TiB", "dram", "32KiB", "nvme", "unlimited"}, block.Quota{DRAM: 32 << 10, S3: 1 << 40}},
	}
	for _, tt := range tests {
		out := run(tt.args...)
		for _, w := range tt.wantOut {
			if !strings.Contains(out, w) {
				t.Fatalf("%v: output %q lacks %q", tt.args, out, w)
			}
		}
		if ns, err := store.Namespace("tenant-a"); err != nil || ns.Quota != tt.wantQuota {
			t.Fatalf("%v: catalog holds %+v (%v), want %+v", tt.args, ns.Quota, err, tt.wantQuota)
		}
	}
	// Fill past the 32 KiB DRAM quota: show reports at most the quota.
	for i := range 20 {
		data := bytes.Repeat([]byte{byte(i)}, 4096)
		if err := store.Put(ctx, block.NewKey("tenant-a", uint64(i+1)), data, block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	out := run("show", "tenant-a")
	if !strings.Contains(out, fmt.Sprintf("%-6s %14d %14s", "dram", 32<<10, "32KiB")) {
		t.Fatalf("show does not report 32768 bytes in dram:\n%s", out)
	}
	var errOut bytes.Buffer
	err = runNamespaces(ctx, []string{"set-quota", "tenant-a", "--dram", "lots", "--addr", addr}, &bytes.Buffer{}, &errOut)
	if err == nil || !strings.Contains(err.Error(), "size") {
		t.Fatalf("a bad size: %v", err)
	}
	err = runNamespaces(ctx, []string{"show", "nope", "--addr", addr}, &bytes.Buffer{}, &errOut)
	if !errors.Is(err, block.ErrUnknownNamespace) {
		t.Fatalf("show of an unknown namespace: %v", err)
	}
}
