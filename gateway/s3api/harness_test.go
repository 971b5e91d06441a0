package s3api

import (
	"context"
	"encoding/xml"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/tiers/dram"
)

// env is a running S3 server over a real DRAM-tier store on 127.0.0.1.
type env struct {
	srv   *Server
	store *ctxstore.Store
	addr  string
	admin credential.Credential // scope "*"
	teamA credential.Credential // scope "team-a"
	creds credential.Static
}

func newEnv(t *testing.T) *env { return newEnvWith(t, nil, nil) }

// newEnvWith is newEnv with the server's configuration adjusted by mut and
// its log going to log (both may be nil).
func newEnvWith(t *testing.T, mut func(*Config), srvLog *slog.Logger) *env {
	t.Helper()
	return newEnvSized(t, 64<<20, mut, srvLog)
}

// newEnvSized is newEnvWith over a DRAM tier of capacity bytes (large
// objects need room: a full tier evicts).
func newEnvSized(t *testing.T, capacity int64, mut func(*Config), srvLog *slog.Logger) *env {
	t.Helper()
	return newEnvOver(t, capacity, nil, mut, srvLog)
}

// newEnvOver is newEnvSized with the store's DRAM tier seen through wrap
// (nil: as it is).
func newEnvOver(t *testing.T, capacity int64, wrap func(ctxstore.Tier) ctxstore.Tier, mut func(*Config), srvLog *slog.Logger) *env {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	dcfg := dram.DefaultConfig()
	dcfg.Capacity = capacity
	dcfg.MaxBlockSize = 8 << 20
	tier, err := dram.New(dcfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tier.Close() })
	var top ctxstore.Tier = tier
	if wrap != nil {
		top = wrap(tier)
	}
	return newEnvOn(t, top, mut, srvLog)
}

// newEnvOn is a running S3 server over a store on top, with the namespaces
// team-a and team-b.
func newEnvOn(t *testing.T, top ctxstore.Tier, mut func(*Config), srvLog *slog.Logger) *env {
	t.Helper()
	// This machine may export AWS_CA_BUNDLE, which breaks AWS SDK v2 clients.
	t.Setenv("AWS_CA_BUNDLE", "")
	os.Unsetenv("AWS_CA_BUNDLE")
	log := slog.New(slog.DiscardHandler)
	cat, err := ctxstore.OpenFileCatalog(filepath.Join(t.TempDir(), "namespaces.json"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := ctxstore.New(ctxstore.DefaultConfig(), cat, top, log)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"team-a", "team-b"} {
		n := block.DefaultNamespaceConfig()
		n.Name = ns
		if err := st.CreateNamespace(context.Background(), n); err != nil {
			t.Fatal(err)
		}
	}
	e := &env{store: st,
		admin: credential.Credential{AccessKeyID: "CTXADMIN000000000001", Secret: "admin-secret-admin-secret-admin-secret-0", Namespaces: []string{"*"}},
		teamA: credential.Credential{AccessKeyID: "CTXTEAMA000000000001", Secret: "team-a-secret-team-a-secret-team-a-secre", Namespaces: []string{"team-a"}},
	}
	e.creds = credential.Static{e.admin.AccessKeyID: e.admin, e.teamA.AccessKeyID: e.teamA}
	cfg := DefaultConfig()
	cfg.MaxObjectSize = 8 << 20
	if mut != nil {
		mut(&cfg)
	}
	if srvLog == nil {
		srvLog = log
	}
	e.srv, err = New(cfg, st, e.creds, nil, srvLog)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return e
}

// payload returns n deterministic bytes seeded by seed.
func payload(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed) + 1
	for i := range b {
		x = x*1664525 + 1013904223
		b[i] = byte(x >> 24)
	}
	return b
}

func objName(h uint64) string { return block.FormatHash(h) }

func blockKey(ns string, h uint64) block.Key { return block.NewKey(ns, h) }

func xmlUnmarshal(b []byte, v any) error { return xml.Unmarshal(b, v) }
