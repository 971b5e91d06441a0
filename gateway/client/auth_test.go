package client

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/blocktest"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/gateway/httpapi"
	"github.com/ctxtier/ctxtier/gateway/native"
	"github.com/ctxtier/ctxtier/gateway/native/nativetest"
)

var (
	authKeyA = credential.Credential{AccessKeyID: "CTXAAAAAAAAAAAAAAAAA", Secret: "secret-a-0123456789", Namespaces: []string{"a"}}
	authKeys = credential.Static{authKeyA.AccessKeyID: authKeyA}
)

func TestNativeAuth(t *testing.T) {
	srv, err := nativetest.StartWithOptions(t, native.DefaultConfig(), blocktest.New(),
		[]native.Option{native.WithAuth(authKeys)}, block.Namespace{Name: "a"}, block.Namespace{Name: "b"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	for name, o := range map[string]Options{
		"none":         {Conns: 1},
		"wrong secret": {Conns: 1, AccessKeyID: authKeyA.AccessKeyID, Secret: "wrong"},
		"unknown key":  {Conns: 1, AccessKeyID: "CTXNOSUCHKEYXXXXXXXX", Secret: authKeyA.Secret},
	} {
		if c, err := Dial(ctx, srv.Addr, o); !errors.Is(err, block.ErrUnauthenticated) {
			if c != nil {
				c.Close()
			}
			t.Fatalf("%s: Dial error %v, want Unauthenticated", name, err)
		}
	}
	if _, err := Dial(ctx, srv.Addr, Options{Conns: 1, AccessKeyID: authKeyA.AccessKeyID}); !errors.Is(err, block.ErrInvalidArgument) {
		t.Fatalf("id without secret: %v", err)
	}

	c, err := Dial(ctx, srv.Addr, Options{Conns: 2, AccessKeyID: authKeyA.AccessKeyID, Secret: authKeyA.Secret})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ka, kb, kz := block.NewKey("a", 1), block.NewKey("b", 1), block.NewKey("z", 1)
	if err := c.Put(ctx, ka, []byte("mine")); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(ctx, ka); err != nil || string(got) != "mine" {
		t.Fatalf("get a: %q %v", got, err)
	}
	for _, k := range []block.Key{kb, kz} {
		if err := c.Put(ctx, k, []byte("theirs")); !errors.Is(err, block.ErrPermissionDenied) {
			t.Fatalf("put %s: %v", k, err)
		}
		if _, err := c.Get(ctx, k); !errors.Is(err, block.ErrPermissionDenied) {
			t.Fatalf("get %s: %v", k, err)
		}
		if _, err := c.Lookup(ctx, []block.Key{k}); !errors.Is(err, block.ErrPermissionDenied) {
			t.Fatalf("lookup %s: %v", k, err)
		}
	}
	// A batch spanning a and b: a's items succeed, b's are denied.
	_, errs, err := c.ExistsBatch(ctx, []block.Key{ka, kb})
	if err != nil || errs[0] != nil || !errors.Is(errs[1], block.ErrPermissionDenied) {
		t.Fatalf("mixed batch: %v %v", errs, err)
	}
}

func TestHTTPAuth(t *testing.T) {
	cat, err := ctxstore.OpenFileCatalog("")
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"a", "b"} {
		if err := cat.CreateNamespace(context.Background(), block.Namespace{Name: ns}); err != nil {
			t.Fatal(err)
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := ctxstore.New(ctxstore.DefaultConfig(), cat, blocktest.New(), log)
	if err != nil {
		t.Fatal(err)
	}
	srv := httpapi.New(httpapi.DefaultConfig(), st, nil, log, httpapi.WithAuth(authKeys, nil))
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	ctx := context.Background()

	cfg := HTTPDefaultConfig()
	cfg.BaseURL = ts.URL
	anon, err := NewHTTP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	if _, err := anon.ListNamespaces(ctx); !errors.Is(err, block.ErrUnauthenticated) {
		t.Fatalf("anonymous: %v", err)
	}
	cfg.AccessKeyID, cfg.Secret = authKeyA.AccessKeyID, "wrong"
	bad, _ := NewHTTP(cfg)
	defer bad.Close()
	if _, err := bad.Get(ctx, block.NewKey("a", 1)); !errors.Is(err, block.ErrUnauthenticated) {
		t.Fatalf("wrong secret: %v", err)
	}

	cfg.Secret = authKeyA.Secret
	c, err := NewHTTP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ka, kb := block.NewKey("a", 1), block.NewKey("b", 1)
	if err := c.Put(ctx, ka, []byte("mine"), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(ctx, ka); err != nil || string(got) != "mine" {
		t.Fatalf("get a: %q %v", got, err)
	}
	if _, err := c.Stat(ctx, ka); err != nil {
		t.Fatal(err)
	}
	if errs, err := c.PutBatch(ctx, []HTTPPutItem{{Key: block.NewKey("a", 2), Data: []byte("two")}}); err != nil || errs[0] != nil {
		t.Fatalf("batch put: %v %v", errs, err)
	}
	if n, err := c.Lookup(ctx, []block.Key{ka, block.NewKey("a", 2)}); err != nil || n != 2 {
		t.Fatalf("lookup: %d %v", n, err)
	}
	if err := c.Put(ctx, kb, []byte("theirs"), block.PutOptions{}); !errors.Is(err, block.ErrPermissionDenied) {
		t.Fatalf("put b: %v", err)
	}
	if _, err := c.Stat(ctx, kb); !errors.Is(err, block.ErrPermissionDenied) {
		t.Fatalf("stat b: %v", err)
	}
	list, err := c.ListNamespaces(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "a" {
		t.Fatalf("list: %v %v", list, err)
	}
}
