package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/internal/freeport"
	"github.com/ctxtier/ctxtier/tiers/policy"
)

// nodeTestConfig is a one-node configuration on fresh 127.0.0.1 ports with
// its data (and an NVMe tier) under dir.
func nodeTestConfig(t *testing.T, dir string) Config {
	cfg := DefaultConfig()
	cfg.DataDir = dir
	cfg.NodeID = "n1"
	cfg.Listen, cfg.HTTPListen, cfg.PeerListen = freeport.Addr(t), freeport.Addr(t), freeport.Addr(t)
	cfg.RaftListen, cfg.S3AdminAddr, cfg.RESPListen = freeport.Addr(t), freeport.Addr(t), freeport.Addr(t)
	cfg.DRAMCapacity = 16 << 20
	cfg.NVMeDir = filepath.Join(dir, "nvme")
	cfg.NVMeCapacity, cfg.NVMeSegment = 64<<20, 8<<20
	cfg.MaxBlockSize = 1 << 20
	cfg.ClusterSecret = "node-test-cluster-secret-0123456789"
	return cfg
}

// TestNewNodeFailureReleasesWhatItOpened fails newNode at several steps
// and checks that what the earlier steps opened was released: every port
// it bound can be bound again, and a node built on the same data directory
// afterwards (Raft's log, the NVMe tier's index and segments) starts.
func TestNewNodeFailureReleasesWhatItOpened(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cases := []struct {
		name string
		// breakIt spoils cfg, possibly by holding one of its ports on busy.
		breakIt func(cfg *Config) (busy string)
		want    string // in the error
		is      error  // errors.Is the error, when set
	}{
		{"the HTTP port is taken (the listeners)", func(cfg *Config) string { return cfg.HTTPListen }, "http listener", nil},
		{"an unknown DRAM policy (the tiers)", func(cfg *Config) string { cfg.DRAMPolicy = "no-such-policy"; return "" }, "no-such-policy", policy.ErrUnknownPolicy},
		{"the S3 port is taken (the servers, after Raft and the tiers)", func(cfg *Config) string { return cfg.S3AdminAddr }, "s3 admin listener", nil},
		{"the RESP port is taken (the last server)", func(cfg *Config) string { return cfg.RESPListen }, "resp listener", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := nodeTestConfig(t, dir)
			good := cfg
			var held net.Listener
			if busy := tc.breakIt(&cfg); busy != "" {
				ln, err := net.Listen("tcp", busy)
				if err != nil {
					t.Fatal(err)
				}
				held = ln
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			n, err := newNode(ctx, cfg, log)
			if err == nil {
				n.close()
				t.Fatal("newNode succeeded on a broken configuration")
			}
			if !strings.Contains(err.Error(), tc.want) || tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("newNode: %v; want an error about %q (is %v)", err, tc.want, tc.is)
			}
			if held != nil {
				held.Close()
			}
			for _, addr := range []string{cfg.Listen, cfg.HTTPListen, cfg.PeerListen, cfg.RaftListen, cfg.S3AdminAddr, cfg.RESPListen} {
				ln, err := net.Listen("tcp", addr)
				if err != nil {
					t.Fatalf("port %s still held after the failed newNode: %v", addr, err)
				}
				ln.Close()
			}
			n, err = newNode(ctx, good, log)
			if err != nil {
				t.Fatalf("newNode on the same data directory after the failure: %v", err)
			}
			defer n.close()
			if n.store == nil || n.local == nil || n.cluster == nil || n.nativeSrv == nil || n.httpSrv == nil || n.peerSrv == nil || n.s3Srv == nil || n.respSrv == nil {
				t.Fatalf("newNode left a part unbuilt: %+v", n)
			}
			// Nothing serves yet, but the parts are connected: the tiers'
			// hooks read namespaces from the bound Raft catalog.
			if _, err := n.hooks.namespace("no-such-namespace"); !errors.Is(err, block.ErrUnknownNamespace) {
				t.Fatalf("hooks.namespace after newNode: %v; want %v from the catalog", err, block.ErrUnknownNamespace)
			}
		})
	}
}

// TestClusterHooksBeforeBind: before the cluster is bound, a namespace
// lookup is unavailable (no quota, no S3) and a drop is not reported.
func TestClusterHooksBeforeBind(t *testing.T) {
	var h clusterHooks
	if _, err := h.namespace(block.DefaultNamespace); !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("namespace before bind: %v; want %v", err, block.ErrUnavailable)
	}
	h.dropped(block.Key{Namespace: block.DefaultNamespace, Hash: 1}) // must not panic without a backend
}
