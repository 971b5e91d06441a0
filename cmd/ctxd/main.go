// Command ctxd is the ctxtier server: one node of the context memory tier.
// With no flags it starts a single node with data in ./ctxd-data (DRAM over
// an NVMe tier in ./ctxd-data/nvme sized from the free space), the native
// block protocol on 127.0.0.1:7400, HTTP (API, /metrics, /healthz, /readyz)
// on 127.0.0.1:7401 and the Redis protocol on 127.0.0.1:7405. See `ctxd -h`
// and README.md.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ctxtier/ctxtier/cmd/internal/subcmd"
	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/ctxstore/object"
	"github.com/ctxtier/ctxtier/ctxstore/router"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
	"github.com/ctxtier/ctxtier/gateway/httpapi"
	"github.com/ctxtier/ctxtier/gateway/kvevent"
	"github.com/ctxtier/ctxtier/gateway/metrics"
	"github.com/ctxtier/ctxtier/gateway/native"
	"github.com/ctxtier/ctxtier/gateway/peer"
	"github.com/ctxtier/ctxtier/gateway/resp"
	"github.com/ctxtier/ctxtier/gateway/routing"
	"github.com/ctxtier/ctxtier/gateway/s3api"
	"github.com/ctxtier/ctxtier/internal/clustersecret"
	"github.com/ctxtier/ctxtier/internal/membudget"
	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/raft/fsm"
	"github.com/ctxtier/ctxtier/tiers"
	"github.com/ctxtier/ctxtier/tiers/dram"
	"github.com/ctxtier/ctxtier/tiers/nvme"
	"github.com/ctxtier/ctxtier/tiers/policy"
	"github.com/ctxtier/ctxtier/tiers/s3"
)

// openTiers builds the node's tier stack: DRAM, over NVMe unless --nvme-dir
// is off, over S3 when --s3-endpoint is set too (namespaces resolves the S3
// policy). onDrop hears of blocks that leave the node without a delete.

// errLeaderUpToDate skips the namespace sync on the leader (see run).
var errLeaderUpToDate = errors.New("the leader's catalog is up to date")

func openTiers(cfg Config, namespaces func(string) (block.Namespace, error), reg prometheus.Registerer, log *slog.Logger, onDrop func(block.Key)) (*tiers.Manager, func(), error) {
	factory, err := policy.Lookup(cfg.DRAMPolicy)
	if err != nil {
		return nil, nil, err
	}
	dcfg := dram.DefaultConfig()
	dcfg.Capacity = cfg.DRAMCapacity
	dcfg.MemFile = cfg.DRAMMemFile
	dcfg.MaxBlockSize = cfg.MaxBlockSize
	dcfg.Policy = factory
	tcfg := tiers.DefaultConfig()
	tcfg.OnDrop = onDrop
	quotaOf := func(ns string) block.Quota {
		n, err := namespaces(ns)
		if err != nil {
			return block.Quota{}
		}
		return n.Quota
	}
	tcfg.Quota = quotaOf
	var lower *nvme.Tier
	var cold *s3.Tier
	var stack *tiers.Manager
	var built atomic.Pointer[tiers.Manager] // stack, for hooks in other goroutines
	// A block that leaves S3 without a delete (its quota, its TTL, a
	// demotion S3 did not keep) is gone from this node unless NVMe or DRAM
	// still holds it.
	// It is checked off the evicting goroutine: that may be NVMe's own
	// (its quota hands blocks to S3), whose Contains must not be re-entered.
	coldDropped := func(k block.Key) {
		go func() {
			if m := built.Load(); m != nil && (lower == nil || !lower.Contains(k)) {
				m.LowerEvicted(k, nil, 0)
			}
		}()
	}
	if cfg.nvmeEnabled() && cfg.S3Endpoint != "" {
		if cold, err = openS3Tier(cfg, namespaces, reg, log, coldDropped); err != nil {
			return nil, nil, err
		}
	}
	closeCold := func() {
		if cold != nil {
			if err := cold.Close(); err != nil {
				log.Error("closing the s3 tier", "err", err)
			}
		}
	}
	if cfg.nvmeEnabled() {
		ncfg := nvme.DefaultConfig()
		ncfg.Dir = cfg.NVMeDir
		ncfg.Capacity = cfg.NVMeCapacity
		ncfg.SegmentSize = cfg.NVMeSegment
		ncfg.MaxBlockSize = cfg.MaxBlockSize
		ncfg.SyncWrites = cfg.NVMeSync
		ncfg.Quota = func(ns string) int64 { return quotaOf(ns).NVMe }
		if cold != nil {
			ncfg.OnEvict = cold.Demote
		} else {
			ncfg.OnEvict = func(k block.Key, data []byte, sum uint32) {
				if stack != nil {
					stack.LowerEvicted(k, data, sum)
				}
			}
		}
		if lower, err = nvme.New(ncfg, log); err != nil {
			closeCold()
			return nil, nil, err
		}
		reg.MustRegister(nvme.NewCollector(lower))
		if cfg.NVMeAdmit == "tinylfu" {
			blocks := int(max(cfg.NVMeCapacity/(256<<10), 1024))
			tcfg.DemoteAdmission = tiers.LockAdmitter(policy.NewSketchAdmitter(blocks, 2))
		}
	}
	var lw tiers.Lower
	if lower != nil {
		lw = lower
	}
	if cold != nil {
		// Reads try NVMe then S3; S3 hits are written back to NVMe.
		lw = &tiers.Chain{Tiers: []tiers.Lower{lower, cold}, Promote: true}
	}
	stack, err = tiers.New(tcfg, dcfg, lw, log)
	if err != nil {
		if lower != nil {
			lower.Close()
		}
		closeCold()
		return nil, nil, err
	}
	built.Store(stack)
	reg.MustRegister(dram.NewCollector(stack.DRAM()), tiers.NewCollector(stack))
	return stack, func() {
		stack.Close()
		if lower != nil {
			if err := lower.Close(); err != nil {
				log.Error("closing the nvme tier", "err", err)
			}
		}
		closeCold() // after NVMe, which hands it blocks until closed
	}, nil
}

func main() {
	cfg, err := LoadConfig(os.Args[1:], os.LookupEnv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "ctxd: %v\n", err)
		os.Exit(2)
	}
	log := newLogger(cfg, os.Stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("ctxd stopped", "err", err)
		os.Exit(1)
	}
}

// run starts every component and blocks until ctx ends, then shuts down
// gracefully: stop accepting, drain in-flight requests, close the tiers.
func run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	cfg, err := resolveNVMe(cfg, nil, log)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	met := metrics.New(reg)

	tlsc, err := cfg.loadTLS()
	if err != nil {
		return err
	}
	// The listeners come first: their bound ports go into this node's
	// member record.
	nln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("native listener: %w", err)
	}
	defer nln.Close()
	hln, err := net.Listen("tcp", cfg.HTTPListen)
	if err != nil {
		return fmt.Errorf("http listener: %w", err)
	}
	defer hln.Close()
	pln, err := net.Listen("tcp", cfg.PeerListen)
	if err != nil {
		return fmt.Errorf("peer listener: %w", err)
	}
	defer pln.Close()
	self := fsm.Member{ID: cfg.NodeID, Zone: cfg.Zone, Capacity: cfg.DRAMCapacity, State: fsm.MemberAlive}
	if cfg.nvmeEnabled() {
		self.Capacity += cfg.NVMeCapacity
	}
	if self.DataAddr, err = advertised(cfg, cfg.PeerListen, pln.Addr()); err != nil {
		return err
	}
	if self.HTTPAddr, err = advertised(cfg, cfg.HTTPListen, hln.Addr()); err != nil {
		return err
	}

	if self.RaftAddr, err = raftAdvertise(cfg); err != nil {
		return err
	}

	secret, err := nodeSecret(cfg, self, log)
	if err != nil {
		return err
	}

	var backend atomic.Pointer[cluster.Backend]
	// The S3 tier asks namespaces for their policy; they live in Raft, which
	// opens after the tiers.
	var catalogRef atomic.Pointer[raft.Catalog]
	namespaces := func(name string) (block.Namespace, error) {
		if c := catalogRef.Load(); c != nil {
			return c.Namespace(name)
		}
		return block.Namespace{}, fmt.Errorf("%w: namespace catalog not open yet", block.ErrUnavailable)
	}
	stack, closeTiers, err := openTiers(cfg, namespaces, reg, log, func(k block.Key) {
		if b := backend.Load(); b != nil {
			b.Dropped(k)
		}
	})
	if err != nil {
		return err
	}
	defer closeTiers()

	parts, err := openCluster(ctx, cfg, self, secret, tlsc, stack, reg, log)
	if err != nil {
		return err
	}
	defer parts.close(log)
	backend.Store(parts.backend)
	catalog := parts.node.Catalog()
	catalogRef.Store(catalog)
	reg.MustRegister(tiers.NewNamespaceCollector(stack, catalog.Namespaces))

	scfg := ctxstore.DefaultConfig()
	scfg.PinMaxTTL = cfg.PinMaxTTL
	// A namespace created through another node may not have reached this
	// one's FSM yet: a miss is looked up again after a read-index sync. The
	// leader's FSM already holds every namespace it acknowledged (and it
	// waits for a barrier before it reports ready), so it skips the sync.
	// Changes made on a follower are forwarded to the leader.
	nsCatalog := ctxstore.SyncedCatalog(parts.backend.LeaderCatalog(catalog), func(ctx context.Context) error {
		if parts.node.IsLeader() {
			return errLeaderUpToDate
		}
		return parts.backend.SyncRead(ctx)
	}, 2*time.Second)
	// The node's own store serves peers; the clustered one serves clients.
	local, err := ctxstore.New(scfg, nsCatalog, stack, log)
	if err != nil {
		return err
	}
	store, err := ctxstore.New(scfg, nsCatalog, parts.backend, log)
	if err != nil {
		return err
	}
	// Per-namespace traffic of the client-facing store (the peer store's
	// shard traffic is not a namespace's): six series per namespace with
	// traffic on this node (docs/operations.md), in their own registry that
	// /metrics serves beside reg, so that the console's sampler, which
	// gathers reg every 5 s, does not pay for them.
	nsReg := prometheus.NewRegistry()
	nsReg.MustRegister(ctxstore.NewTrafficCollector(store))
	pcfg := native.DefaultConfig()
	pcfg.Addr = cfg.PeerListen
	pcfg.MaxBlockSize = cfg.MaxBlockSize
	// The peer listener serves only other members: it requires the node
	// identity (the cluster secret), whatever --auth says.
	psrv, err := peer.NewServer(pcfg, local, nil, log, native.WithAuth(credential.Static{
		clustersecret.NodeAccessKeyID: {AccessKeyID: clustersecret.NodeAccessKeyID, Secret: secret, Namespaces: []string{credential.ScopeAll}},
	}))
	if err != nil {
		return err
	}

	// Access keys: replicated through Raft (sealed under a key derived from
	// the cluster secret; made with `ctxctl keys --addr`), then this node's
	// own credentials.json (`ctxctl keys --data-dir`).
	sealKey, err := clustersecret.SealingKey(secret)
	if err != nil {
		return err
	}
	replicatedKeys, err := credential.NewReplicated(parts.node, sealKey)
	if err != nil {
		return err
	}
	fileKeys, err := credential.OpenFile(credential.DefaultConfig(cfg.DataDir))
	if err != nil {
		return err
	}
	keys := credential.Chain{replicatedKeys, fileKeys}

	// Block-API authentication (--auth required): the access keys, scoped
	// to namespaces, guard the native protocol and the HTTP API.
	// One in-flight budget for the client-facing ports (native, HTTP, S3
	// PutObject, RESP). The peer listener
	// stays outside it: a client put holds its bytes while it writes
	// shards to peers, and peers waiting on their own clients' budget
	// could otherwise wait on each other.
	budget, err := membudget.New(cfg.InflightBudget)
	if err != nil {
		return err
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ctxtier_inflight_budget_bytes", Help: "The in-flight budget of request bodies (--inflight-budget)."},
			func() float64 { return float64(budget.Size()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ctxtier_inflight_bytes", Help: "Request-body bytes held in the in-flight budget now."},
			func() float64 { return float64(budget.InUse()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ctxtier_inflight_waits_total", Help: "Requests that waited for their bytes of the in-flight budget."},
			func() float64 { return float64(budget.Waits()) }),
	)
	nopts := []native.Option{native.WithBudget(budget)}
	hopts := []httpapi.Option{httpapi.WithMetrics(met), httpapi.WithBudget(budget), httpapi.WithGatherers(nsReg)}
	if cfg.Auth == "required" {
		nopts = append(nopts, native.WithAuth(keys))
		hopts = append(hopts, httpapi.WithAuth(keys, nil))
	}
	warnOpenListeners(cfg, log)

	// The router answers "which worker holds this prefix" from engines' KV
	// events, next to the store, with no network hop. Clients query it over
	// HTTP (/v1/route/query) and on the native listener (ROUTE); the peer
	// listener does not serve it.
	rt, err := router.New(router.DefaultConfig(), router.Deps{
		Tier: store, Pinner: store, Namespaces: store, Log: log,
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
	nsrv, err := native.New(ncfg, store, met, log, nopts...)
	if err != nil {
		return err
	}
	hcfg := httpapi.DefaultConfig()
	hcfg.Addr = cfg.HTTPListen
	hcfg.MaxBlockSize = cfg.MaxBlockSize
	if err := hcfg.Validate(); err != nil {
		return err
	}
	if cfg.PprofListen != "" {
		pmux := http.NewServeMux()
		pmux.HandleFunc("/debug/pprof/", pprof.Index)
		pmux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		pmux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		pmux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		psrv := &http.Server{Addr: cfg.PprofListen, Handler: pmux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := psrv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("pprof listener", "err", err)
			}
		}()
		defer psrv.Close()
	}
	hsrv := httpapi.New(hcfg, store, reg, log, append(hopts, httpapi.WithReady(parts.ready), httpapi.WithUsage(stack.NamespaceUsage))...)
	// The cluster API checks the cluster secret itself (all of it with
	// --auth required; otherwise all but status and repair).
	clusterExtra := func() any {
		return map[string]any{"repair": parts.backend.RepairStatus(), "restore": parts.backend.RestoreStatus(), "rebalance": parts.backend.RebalanceStatus()}
	}
	clusterH := clusterapi.Handler(parts.node, parts.backend, clusterExtra, log,
		append(clusterOpts(cfg, tlsc, secret), clusterapi.WithProtectStatus(cfg.Auth == "required"), clusterapi.WithKeys(replicatedKeys),
			clusterapi.WithTraffic(store.Traffic().Snapshot))...)
	hsrv.MountOwnAuth("/v1/cluster/", clusterH)

	ingest, err := kvevent.New(kvevent.DefaultConfig(), rt, reg, log)
	if err != nil {
		return err
	}
	hsrv.Mount("/v1/route/", routing.Handler("/v1/route", rt, ingest, log))
	// The operator console (/ui/): read-only for anyone, actions with an
	// access key scoped to "*" (replicated, or from this node's key file).
	ui, err := newConsole(cfg, tlsc, secret, parts.node, func() clusterapi.Status {
		return clusterapi.Snapshot(parts.node, parts.backend, clusterExtra, log)
	}, clusterH, reg, store.Namespaces, store.Traffic(), newConsoleMembers(clusterOpts(cfg, tlsc, secret)), rt, replicatedKeys, fileKeys, log)
	if err != nil {
		return err
	}
	hsrv.MountPage("/ui/", ui.Handler())
	subs, err := parseSubscriptions(cfg.KVSubscribe)
	if err != nil {
		return err
	}

	var s3srv *s3api.Server
	var s3ln net.Listener
	if cfg.S3AdminAddr != "" {
		scfg := s3api.DefaultConfig()
		scfg.Addr = cfg.S3AdminAddr
		scfg.Budget = budget
		scfg.Domains = subcmd.SplitList(cfg.S3Domain)
		if s3srv, err = s3api.New(scfg, store, keys, met, log); err != nil {
			return err
		}
		if s3ln, err = net.Listen("tcp", cfg.S3AdminAddr); err != nil {
			return fmt.Errorf("s3 admin listener: %w", err)
		}
	}

	// The Redis-protocol endpoint: keyed values as records in the
	// clustered store (ctxstore/object), so every node serves every key.
	var respSrv *resp.Server
	var respLn net.Listener
	if cfg.RESPListen != "" {
		dbs, err := parseDatabases(cfg.RESPDatabases)
		if err != nil {
			return err
		}
		ocfg := object.DefaultConfig()
		ocfg.MaxBlockSize = cfg.MaxBlockSize
		objects, err := object.New(ocfg, store)
		if err != nil {
			return err
		}
		rcfg := resp.DefaultConfig()
		rcfg.Addr = cfg.RESPListen
		rcfg.Databases = dbs
		rcfg.MaxBulk = cfg.MaxBlockSize
		rcfg.MaxRequest = max(rcfg.MaxRequest, cfg.MaxBlockSize)
		rcfg.MaxDrop = max(rcfg.MaxDrop, cfg.MaxBlockSize)
		ropts := []resp.Option{resp.WithBudget(budget)}
		if cfg.Auth == "required" {
			// The same access keys as the native and HTTP ports: the
			// replicated ones, then this node's file.
			ropts = append(ropts, resp.WithAuth(keys))
		}
		if respSrv, err = resp.New(rcfg, objects, met, log, ropts...); err != nil {
			return err
		}
		if respLn, err = net.Listen("tcp", cfg.RESPListen); err != nil {
			return fmt.Errorf("resp listener: %w", err)
		}
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go stack.DRAM().Run(runCtx)
	// Namespaces over a lowered quota come down to it in the background;
	// the trimming stops before the tiers close.
	trimDone := make(chan struct{})
	go func() { stack.RunQuotaTrim(runCtx); close(trimDone) }()
	defer func() { cancel(); <-trimDone }()
	go ui.Run(runCtx)
	go releaseIdleMemory(runCtx, budget, log)
	errc := make(chan error, 5)
	if tlsc != nil {
		// The peer listener speaks the native protocol inside TLS;
		// peer.Peers dials it with the matching client configuration.
		pln = tls.NewListener(pln, tlsc.ServerConfig())
	}
	if cfg.TLSClients {
		// The client-facing ports (native, HTTP, S3, RESP): the same certificate, no client
		// certificate asked for (--auth required authenticates there).
		cs := clientTLS(tlsc)
		nln, hln = tls.NewListener(nln, cs), tls.NewListener(hln, cs)
		if s3ln != nil {
			s3ln = tls.NewListener(s3ln, cs)
		}
		if respLn != nil {
			respLn = tls.NewListener(respLn, cs)
		}
	}
	go func() { errc <- psrv.Serve(runCtx, pln) }()
	go func() { errc <- nsrv.Serve(runCtx, nln) }()
	go func() { errc <- hsrv.Serve(runCtx, hln) }()
	s3addr := ""
	if s3srv != nil {
		s3addr = s3ln.Addr().String()
		go func() { errc <- s3srv.Serve(runCtx, s3ln) }()
	}
	respAddr := ""
	if respSrv != nil {
		respAddr = respLn.Addr().String()
		go func() { errc <- respSrv.Serve(runCtx, respLn) }()
	}
	for _, sc := range subs {
		go func() {
			if err := ingest.Subscribe(runCtx, sc); err != nil && runCtx.Err() == nil {
				log.Error("kv event subscription ended", "endpoint", sc.Endpoint, "worker", sc.Worker, "err", err)
			}
		}()
	}
	if err := parts.waitReady(ctx, 10*time.Second); err != nil {
		log.Warn("serving before the cluster is ready", "err", err)
	}
	log.Info("ctxd ready", "native", nln.Addr().String(), "http", hln.Addr().String(), "s3", s3addr, "resp", respAddr,
		"peer", pln.Addr().String(), "raft", self.RaftAddr, "node_id", cfg.NodeID, "node_tls", tlsMode(tlsc), "client_tls", cfg.TLSClients,
		"data_dir", cfg.DataDir, "auth", cfg.Auth, "dram_capacity", cfg.DRAMCapacity, "dram_policy", cfg.DRAMPolicy, "memfile", stack.DRAM().MemFile(),
		"nvme_dir", cfg.NVMeDir, "nvme_capacity", cfg.NVMeCapacity)

	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case serveErr = <-errc:
		if ctx.Err() != nil && errors.Is(serveErr, context.Canceled) {
			// A server saw the signal first: an ordinary shutdown.
			serveErr = nil
			log.Info("shutting down")
		} else {
			log.Error("server failed", "err", serveErr)
		}
	}
	shCtx, shCancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer shCancel()
	err = errors.Join(nsrv.Shutdown(shCtx), hsrv.Shutdown(shCtx), psrv.Shutdown(shCtx))
	if s3srv != nil {
		err = errors.Join(err, s3srv.Shutdown(shCtx))
	}
	if respSrv != nil {
		err = errors.Join(err, respSrv.Shutdown(shCtx))
	}
	cancel()
	if serveErr != nil {
		return serveErr
	}
	return err
}

// clientTLS is the server configuration of the client-facing ports.
func clientTLS(t *raft.TLS) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{t.Certificate}}
}

// clusterOpts are the cluster API options every node-side user shares: the
// cluster secret, and https to the members' HTTP ports under --tls-clients.
func clusterOpts(cfg Config, t *raft.TLS, secret string) []clusterapi.Option {
	opts := []clusterapi.Option{clusterapi.WithToken(secret)}
	if cfg.TLSClients {
		opts = append(opts, clusterapi.WithTLS(t.ClientConfig("")))
	}
	return opts
}

// tlsMode describes node-to-node TLS for the ready log line.
func tlsMode(t *raft.TLS) string {
	switch {
	case t == nil:
		return "off"
	case t.Mutual:
		return "mutual"
	}
	return "server"
}

// warnOpenListeners logs a warning naming every listener bound to a
// non-loopback address that anyone who reaches it may use: the block APIs
// and the RESP endpoint with --auth off, pprof. (Raft, the peer listener
// and the cluster endpoints always require the cluster secret, and the S3
// endpoint always requires an access key.)
func warnOpenListeners(cfg Config, log *slog.Logger) {
	var open []any
	if cfg.Auth != "required" {
		for _, l := range []struct{ name, addr string }{{"native", cfg.Listen}, {"http", cfg.HTTPListen}, {"resp", cfg.RESPListen}} {
			if l.addr != "" && !loopback(l.addr) {
				open = append(open, l.name, l.addr)
			}
		}
	}
	if cfg.PprofListen != "" && !loopback(cfg.PprofListen) {
		open = append(open, "pprof", cfg.PprofListen)
	}
	if len(open) > 0 {
		log.Warn("listeners on non-loopback addresses accept unauthenticated requests (block APIs and RESP: --auth required; pprof: bind it to loopback)", open...)
	}
}

// loopback reports whether a listen address only accepts local connections.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
