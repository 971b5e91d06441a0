package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/ctxtier/ctxtier/cmd/internal/subcmd"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
	"github.com/ctxtier/ctxtier/ctxstore/object"
	"github.com/ctxtier/ctxtier/ctxstore/prefill"
	"github.com/ctxtier/ctxtier/ctxstore/router"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
	"github.com/ctxtier/ctxtier/gateway/httpapi"
	"github.com/ctxtier/ctxtier/gateway/kvevent"
	"github.com/ctxtier/ctxtier/gateway/native"
	"github.com/ctxtier/ctxtier/gateway/resp"
	"github.com/ctxtier/ctxtier/gateway/routing"
	"github.com/ctxtier/ctxtier/gateway/s3api"
)

// openServers builds the node's servers over its stores: the peer server,
// the router, the native and HTTP servers (with the cluster API, the routing
// API and the console mounted on HTTP), and the S3 and RESP endpoints when
// configured; then it puts the listeners in TLS as configured.
func (n *node) openServers(context.Context) (err error) {
	cfg := n.cfg
	if n.peerSrv, err = n.peerServer(); err != nil {
		return err
	}
	// Block-API authentication (--auth required): the access keys, scoped
	// to namespaces, guard the native protocol and the HTTP API.
	nopts := []native.Option{native.WithBudget(n.budget)}
	hopts := []httpapi.Option{httpapi.WithMetrics(n.met), httpapi.WithBudget(n.budget), httpapi.WithGatherers(n.nsReg)}
	if cfg.Auth == "required" {
		nopts = append(nopts, native.WithAuth(n.keys))
		hopts = append(hopts, httpapi.WithAuth(n.keys, nil))
	}
	warnOpenListeners(cfg, n.log)

	// The router answers "which worker holds this prefix" from engines' KV
	// events, next to the store, with no network hop. Clients query it over
	// HTTP (/v1/route/query) and on the native listener (ROUTE); the peer
	// listener does not serve it.
	store := n.store
	rcfg := router.DefaultConfig()
	if rcfg.Cost.Prefill, err = prefill.Parse(cfg.RouteModel); err != nil {
		return fmt.Errorf("route-model: %w", err)
	}
	rt, err := router.New(rcfg, router.Deps{
		Tier: store, Pinner: store, Namespaces: store, Log: n.log,
		Hash: func(ns block.Namespace, t []uint32) ([]uint64, error) { return ns.ChainHashes(t) },
	})
	if err != nil {
		return err
	}
	nopts = append(nopts, native.WithRouter(rt))

	ncfg := native.DefaultConfig()
	ncfg.Addr = cfg.Listen
	ncfg.MaxBlockSize = cfg.MaxBlockSize
	ncfg.LeaseTTL = cfg.LeaseTTL
	ncfg.Sendfile = cfg.Sendfile
	if n.nativeSrv, err = native.New(ncfg, store, n.met, n.log, nopts...); err != nil {
		return err
	}
	hcfg := httpapi.DefaultConfig()
	hcfg.Addr = cfg.HTTPListen
	hcfg.MaxBlockSize = cfg.MaxBlockSize
	if err := hcfg.Validate(); err != nil {
		return err
	}
	parts := n.cluster
	n.httpSrv = httpapi.New(hcfg, store, n.reg, n.log, append(hopts, httpapi.WithReady(parts.ready), httpapi.WithUsage(n.stack.NamespaceUsage))...)
	// The cluster API checks the cluster secret itself (all of it with
	// --auth required; otherwise all but status and repair, which with
	// --auth required also take any access key's credentials).
	clusterExtra := func() any {
		return map[string]any{"repair": parts.backend.RepairStatus(), "restore": parts.backend.RestoreStatus(), "rebalance": parts.backend.RebalanceStatus()}
	}
	// A session ended through this node is ended on every other live
	// member too (their replicas and shards), over the cluster API; a
	// member asked that way releases on its own tier stack only.
	fcfg := control.DefaultSessionFanoutConfig()
	fcfg.NodeID = cfg.NodeID
	fanout, err := control.NewSessionFanout(fcfg, parts.node.Members, n.reg, n.log, clusterOpts(cfg, n.tls, n.secret)...)
	if err != nil {
		return err
	}
	parts.backend.SetSessionPeers(fanout)
	// The node-to-node endpoints (join, forwarded proposals, read index,
	// session end, traffic) are the cluster's own (control); the operator
	// endpoints beside them (status, remove, drain, transfer, repair,
	// access keys) are the cluster API, served through control's transport.
	ctl := control.NewServer(parts.node, parts.backend, n.log,
		append(clusterOpts(cfg, n.tls, n.secret), control.WithTraffic(store.Traffic().Snapshot), control.WithSessions(n.local.ReleaseSession))...)
	clusterH := clusterapi.Handler(ctl, parts.backend, clusterExtra, n.log,
		clusterapi.WithProtectStatus(cfg.Auth == "required"), clusterapi.WithStatusReaders(n.httpSrv.Authenticate), clusterapi.WithKeys(n.replicatedKeys))
	n.httpSrv.MountOwnAuth("/v1/cluster/", clusterH)
	for _, p := range control.Patterns() {
		n.httpSrv.MountOwnAuth(p, ctl)
	}

	if n.ingest, err = kvevent.New(kvevent.DefaultConfig(), rt, n.reg, n.log); err != nil {
		return err
	}
	n.httpSrv.Mount("/v1/route/", routing.Handler("/v1/route", rt, n.ingest, n.log))
	// The operator console (/ui/): read-only for anyone, actions with an
	// access key scoped to "*" (replicated, or from this node's key file).
	n.ui, err = newConsole(cfg, n.tls, n.secret, parts.node, func() clusterapi.Status {
		return clusterapi.Snapshot(parts.node, parts.backend, clusterExtra, n.log)
	}, clusterH, n.reg, store.Namespaces, store.Traffic(), newConsoleMembers(clusterOpts(cfg, n.tls, n.secret)), rt, n.replicatedKeys, n.fileKeys, n.log)
	if err != nil {
		return err
	}
	n.httpSrv.MountPage("/ui/", n.ui.Handler())
	if n.subs, err = parseSubscriptions(cfg.KVSubscribe); err != nil {
		return err
	}
	if err := n.openS3(); err != nil {
		return err
	}
	if err := n.openRESP(); err != nil {
		return err
	}
	n.wrapTLS()
	return nil
}

// openS3 builds the S3-compatible endpoint when --s3-admin-addr is set.
func (n *node) openS3() (err error) {
	if n.cfg.S3AdminAddr == "" {
		return nil
	}
	scfg := s3api.DefaultConfig()
	scfg.Addr = n.cfg.S3AdminAddr
	scfg.Budget = n.budget
	scfg.Domains = subcmd.SplitList(n.cfg.S3Domain)
	if n.s3Srv, err = s3api.New(scfg, n.store, n.keys, n.met, n.log); err != nil {
		return err
	}
	n.s3Ln, err = n.listenTCP("s3 admin", n.cfg.S3AdminAddr)
	return err
}

// openRESP builds the Redis-protocol endpoint when --resp-listen is set:
// keyed values as records in the clustered store (ctxstore/object), so every
// node serves every key.
func (n *node) openRESP() error {
	cfg := n.cfg
	if cfg.RESPListen == "" {
		return nil
	}
	dbs, err := parseDatabases(cfg.RESPDatabases)
	if err != nil {
		return err
	}
	ocfg := object.DefaultConfig()
	ocfg.MaxBlockSize = cfg.MaxBlockSize
	objects, err := object.New(ocfg, n.store)
	if err != nil {
		return err
	}
	rcfg := resp.DefaultConfig()
	rcfg.Addr = cfg.RESPListen
	rcfg.Databases = dbs
	rcfg.MaxBulk = cfg.MaxBlockSize
	rcfg.MaxRequest = max(rcfg.MaxRequest, cfg.MaxBlockSize)
	rcfg.MaxDrop = max(rcfg.MaxDrop, cfg.MaxBlockSize)
	ropts := []resp.Option{resp.WithBudget(n.budget)}
	if cfg.Auth == "required" {
		// The same access keys as the native and HTTP ports: the
		// replicated ones, then this node's file.
		ropts = append(ropts, resp.WithAuth(n.keys))
	}
	if n.respSrv, err = resp.New(rcfg, objects, n.met, n.log, ropts...); err != nil {
		return err
	}
	n.respLn, err = n.listenTCP("resp", cfg.RESPListen)
	return err
}

// pprofServer serves Go's profiles on addr (--pprof-listen) until closed.
func pprofServer(addr string, log *slog.Logger) *http.Server {
	pmux := http.NewServeMux()
	pmux.HandleFunc("/debug/pprof/", pprof.Index)
	pmux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	pmux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	pmux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Addr: addr, Handler: pmux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("pprof listener", "err", err)
		}
	}()
	return srv
}
