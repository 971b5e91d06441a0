// Package nativetest starts native-protocol servers for tests: an in-memory
// tier (blocktest.Tier) behind a real ctxstore.Store and a real
// native.Server on a loopback port, torn down with the test.
package nativetest

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/blocktest"
	"github.com/ctxtier/ctxtier/ctxstore/router"
	"github.com/ctxtier/ctxtier/gateway/native"
)

// Server is a running native server over an in-memory tier.
type Server struct {
	Addr   string
	Tier   *blocktest.Tier
	Store  *ctxstore.Store
	Server *native.Server
	done   chan error
	once   sync.Once
	err    error
}

// Start serves a fresh store (catalog with the default namespace plus any
// extra namespaces) on a loopback port. If tb is not nil the server is shut
// down when the test ends; otherwise call Close.
func Start(tb testing.TB, cfg native.Config, extra ...block.Namespace) (*Server, error) {
	return StartWithTier(tb, cfg, blocktest.New(), extra...)
}

// StartWithTier is Start over a given tier; Server.Tier is set when tier is
// a *blocktest.Tier.
func StartWithTier(tb testing.TB, cfg native.Config, tier ctxstore.Tier, extra ...block.Namespace) (*Server, error) {
	return StartWithOptions(tb, cfg, tier, nil, extra...)
}

// StartWithOptions is StartWithTier with server options (native.WithAuth).
func StartWithOptions(tb testing.TB, cfg native.Config, tier ctxstore.Tier, opts []native.Option, extra ...block.Namespace) (*Server, error) {
	cat, err := ctxstore.OpenFileCatalog("")
	if err != nil {
		return nil, err
	}
	for _, ns := range extra {
		if err := cat.CreateNamespace(context.Background(), ns); err != nil {
			return nil, err
		}
	}
	st, err := ctxstore.New(ctxstore.DefaultConfig(), cat, tier, nil)
	if err != nil {
		return nil, err
	}
	srv, err := native.New(cfg, st, nil, nil, opts...)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	mt, _ := tier.(*blocktest.Tier)
	s := &Server{Addr: ln.Addr().String(), Tier: mt, Store: st, Server: srv, done: make(chan error, 1)}
	go func() { s.done <- srv.Serve(context.Background(), ln) }()
	if tb != nil {
		tb.Cleanup(func() { s.Close() })
	}
	return s, nil
}

// Close shuts the server down gracefully (5 s at most) and waits for Serve.
func (s *Server) Close() error {
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.err = s.Server.Shutdown(ctx)
		if serr := <-s.done; s.err == nil {
			s.err = serr
		}
	})
	return s.err
}

// LateRouter is a native.Router whose router is set after the server
// started, since a router over the server's own store needs the store first.
// Until Set, ROUTE answers Unavailable.
type LateRouter struct{ r atomic.Pointer[router.Router] }

// Set installs r.
func (l *LateRouter) Set(r *router.Router) { l.r.Store(r) }

// Route asks the installed router.
func (l *LateRouter) Route(ctx context.Context, q router.Query) (router.Result, error) {
	r := l.r.Load()
	if r == nil {
		return router.Result{}, fmt.Errorf("%w: no router yet", block.ErrUnavailable)
	}
	return r.Route(ctx, q)
}

// StartRouter is StartWithOptions (over a blocktest.Tier) plus a router wired as
// ctxd wires it: the store is its tier index, pinner and namespace resolver,
// token ids hash with each namespace's scheme, and the server answers ROUTE
// with it.
func StartRouter(tb testing.TB, cfg native.Config, rcfg router.Config, opts []native.Option, extra ...block.Namespace) (*Server, *router.Router, error) {
	late := &LateRouter{}
	s, err := StartWithOptions(tb, cfg, blocktest.New(), append(slices.Clip(opts), native.WithRouter(late)), extra...)
	if err != nil {
		return nil, nil, err
	}
	rt, err := router.New(rcfg, router.Deps{Tier: s.Store, Pinner: s.Store, Namespaces: s.Store,
		Hash: func(ns block.Namespace, t []uint32) ([]uint64, error) { return ns.ChainHashes(t) }})
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	late.Set(rt)
	return s, rt, nil
}
