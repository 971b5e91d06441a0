package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/gateway/console"
	"github.com/ctxtier/ctxtier/gateway/httpapi"
	"github.com/ctxtier/ctxtier/gateway/kvevent"
	"github.com/ctxtier/ctxtier/gateway/metrics"
	"github.com/ctxtier/ctxtier/gateway/native"
	"github.com/ctxtier/ctxtier/gateway/resp"
	"github.com/ctxtier/ctxtier/gateway/s3api"
	"github.com/ctxtier/ctxtier/internal/clustersecret"
	"github.com/ctxtier/ctxtier/internal/membudget"
	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/raft/fsm"
	"github.com/ctxtier/ctxtier/tiers"
)

// errLeaderUpToDate skips the namespace sync on the leader (see openStores).
var errLeaderUpToDate = errors.New("ctxd: the leader's catalog is up to date")

// node is one ctxd node. newNode builds it in dependency order, each part
// from the parts built before it: the metrics registry and TLS, the
// listeners (their bound ports go into the member record), the member
// record and the cluster secret, the tier stack, the cluster (Raft, peer
// clients, the cluster backend over the tiers), the two stores (the node's
// own over its tiers, for peers; the clustered one, for clients), the access
// keys and the in-flight budget, the router, then the servers and their
// handlers. Two references are bound after construction, each for a
// cycle: clusterHooks (tierstack.go), between the tiers and the cluster,
// and, inside openTiers, the manager the lower tiers hand evictions up to.
//
// start runs it; shutdown stops the servers gracefully; close releases what
// newNode opened, in the reverse order.
type node struct {
	cfg    Config
	log    *slog.Logger
	tls    *raft.TLS // node-to-node TLS; nil: plain TCP
	secret string    // the cluster secret, this node's identity
	self   fsm.Member

	reg   *prometheus.Registry // ctxd's metrics, gathered by the console too
	nsReg *prometheus.Registry // per-namespace traffic, served beside reg
	met   *metrics.Metrics

	hooks   clusterHooks
	stack   *tiers.Manager
	cluster *clusterParts
	local   *ctxstore.Store // over the tier stack: what peers read and write
	store   *ctxstore.Store // over the cluster backend: what clients use

	replicatedKeys *credential.Replicated
	fileKeys       *credential.FileStore
	keys           credential.Chain
	budget         *membudget.Budget

	ingest *kvevent.Ingestor
	subs   []kvevent.SubscriberConfig
	ui     *console.Console

	// The servers and their listeners; s3 and resp are nil when off.
	nativeLn, httpLn, peerLn, s3Ln, respLn net.Listener
	nativeSrv, peerSrv                     *native.Server
	httpSrv                                *httpapi.Server
	s3Srv                                  *s3api.Server
	respSrv                                *resp.Server

	stopRun  context.CancelFunc // ends start's background loops
	trimDone chan struct{}      // closed when the quota trimming returned
	closers  []func()           // run in reverse by close
}

// newNode builds a node from cfg without serving anything yet. On an error
// it releases whatever it had opened.
func newNode(ctx context.Context, cfg Config, log *slog.Logger) (_ *node, err error) {
	n := &node{log: log}
	defer func() {
		if err != nil {
			n.close()
		}
	}()
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if n.cfg, err = resolveNVMe(cfg, nil, log); err != nil {
		return nil, err
	}
	n.reg = prometheus.NewRegistry()
	n.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	n.met = metrics.New(n.reg)
	if n.tls, err = n.cfg.loadTLS(); err != nil {
		return nil, err
	}
	for _, step := range []func(context.Context) error{
		n.listen, n.identify, n.openStorage, n.openStores, n.openAccess, n.openServers,
	} {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// onClose registers f to run when the node closes (in reverse order).
func (n *node) onClose(f func()) { n.closers = append(n.closers, f) }

// listenTCP binds addr and closes the listener with the node.
func (n *node) listenTCP(what, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s listener: %w", what, err)
	}
	n.onClose(func() { ln.Close() })
	return ln, nil
}

// listen binds the native, HTTP and peer listeners first: their bound ports
// go into this node's member record.
func (n *node) listen(context.Context) (err error) {
	if n.nativeLn, err = n.listenTCP("native", n.cfg.Listen); err != nil {
		return err
	}
	if n.httpLn, err = n.listenTCP("http", n.cfg.HTTPListen); err != nil {
		return err
	}
	n.peerLn, err = n.listenTCP("peer", n.cfg.PeerListen)
	return err
}

// identify settles this node's member record and its cluster secret.
func (n *node) identify(context.Context) (err error) {
	cfg := n.cfg
	n.self = fsm.Member{ID: cfg.NodeID, Zone: cfg.Zone, Capacity: cfg.DRAMCapacity, State: fsm.MemberAlive}
	if cfg.nvmeEnabled() {
		n.self.Capacity += cfg.NVMeCapacity
	}
	if n.self.DataAddr, err = advertised(cfg, cfg.PeerListen, n.peerLn.Addr()); err != nil {
		return err
	}
	if n.self.HTTPAddr, err = advertised(cfg, cfg.HTTPListen, n.httpLn.Addr()); err != nil {
		return err
	}
	if n.self.RaftAddr, err = raftAdvertise(cfg); err != nil {
		return err
	}
	n.secret, err = nodeSecret(cfg, n.self, n.log)
	return err
}

// openStorage opens the tier stack, then the cluster over it (Raft, the
// peer clients, the cluster backend), and binds the tiers' hooks to it.
func (n *node) openStorage(ctx context.Context) error {
	stack, closeTiers, err := openTiers(n.cfg, n.hooks.namespace, n.reg, n.log, n.hooks.dropped)
	if err != nil {
		return err
	}
	n.stack = stack
	n.onClose(closeTiers)
	parts, err := openCluster(ctx, n.cfg, n.self, n.secret, n.tls, stack, n.reg, n.log)
	if err != nil {
		return err
	}
	n.cluster = parts
	n.onClose(func() { parts.close(n.log) })
	catalog := parts.node.Catalog()
	n.hooks.bind(catalog, parts.backend)
	n.reg.MustRegister(tiers.NewNamespaceCollector(stack, catalog.Namespaces))
	return nil
}

// openStores builds the node's two stores over one namespace catalog: its
// own over the tier stack serves peers, the clustered one serves clients.
func (n *node) openStores(context.Context) (err error) {
	parts := n.cluster
	scfg := ctxstore.DefaultConfig()
	scfg.PinMaxTTL = n.cfg.PinMaxTTL
	// A namespace created through another node may not have reached this
	// one's FSM yet: a miss is looked up again after a read-index sync. The
	// leader's FSM already holds every namespace it acknowledged (and it
	// waits for a barrier before it reports ready), so it skips the sync.
	// Changes made on a follower are forwarded to the leader.
	nsCatalog := ctxstore.SyncedCatalog(parts.backend.LeaderCatalog(parts.node.Catalog()), func(ctx context.Context) error {
		if parts.node.IsLeader() {
			return errLeaderUpToDate
		}
		return parts.backend.SyncRead(ctx)
	}, 2*time.Second)
	if n.local, err = ctxstore.New(scfg, nsCatalog, n.stack, n.log); err != nil {
		return err
	}
	if n.store, err = ctxstore.New(scfg, nsCatalog, parts.backend, n.log); err != nil {
		return err
	}
	// Per-namespace traffic of the client-facing store (the peer store's
	// shard traffic is not a namespace's): six series per namespace with
	// traffic on this node (docs/operations.md), in their own registry that
	// /metrics serves beside reg, so that the console's sampler, which
	// gathers reg every 5 s, does not pay for them.
	n.nsReg = prometheus.NewRegistry()
	n.nsReg.MustRegister(ctxstore.NewTrafficCollector(n.store))
	return nil
}

// openAccess builds the access keys and the in-flight budget.
func (n *node) openAccess(context.Context) error {
	// Access keys: replicated through Raft (sealed under a key derived from
	// the cluster secret; made with `ctxctl keys --addr`), then this node's
	// own credentials.json (`ctxctl keys --data-dir`).
	sealKey, err := clustersecret.SealingKey(n.secret)
	if err != nil {
		return err
	}
	if n.replicatedKeys, err = credential.NewReplicated(n.cluster.node, sealKey); err != nil {
		return err
	}
	if n.fileKeys, err = credential.OpenFile(credential.DefaultConfig(n.cfg.DataDir)); err != nil {
		return err
	}
	n.keys = credential.Chain{n.replicatedKeys, n.fileKeys}

	// One in-flight budget for the client-facing ports (native, HTTP, S3
	// PutObject, RESP). The peer listener stays outside it: a client put
	// holds its bytes while it writes shards to peers, and peers waiting on
	// their own clients' budget could otherwise wait on each other.
	if n.budget, err = membudget.New(n.cfg.InflightBudget); err != nil {
		return err
	}
	budget := n.budget
	n.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ctxtier_inflight_budget_bytes", Help: "The in-flight budget of request bodies (--inflight-budget)."},
			func() float64 { return float64(budget.Size()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ctxtier_inflight_bytes", Help: "Request-body bytes held in the in-flight budget now."},
			func() float64 { return float64(budget.InUse()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ctxtier_inflight_waits_total", Help: "Requests that waited for their bytes of the in-flight budget."},
			func() float64 { return float64(budget.Waits()) }),
	)
	return nil
}

// peerServer builds the peer listener's server over the node's own store.
// It serves only other members: it requires the node identity (the cluster
// secret), whatever --auth says.
func (n *node) peerServer() (*native.Server, error) {
	pcfg := native.DefaultConfig()
	pcfg.Addr = n.cfg.PeerListen
	pcfg.MaxBlockSize = n.cfg.MaxBlockSize
	return native.New(pcfg, n.local, nil, n.log, native.WithAuth(credential.Static{
		clustersecret.NodeAccessKeyID: {AccessKeyID: clustersecret.NodeAccessKeyID, Secret: n.secret, Namespaces: []string{credential.ScopeAll}},
	}))
}

// start runs the node: the tiers' and the console's background loops and
// every server. A server that stops sends its error on the returned channel.
func (n *node) start(ctx context.Context) <-chan error {
	runCtx, cancel := context.WithCancel(ctx)
	n.stopRun = cancel
	go n.stack.DRAM().Run(runCtx)
	// Namespaces over a lowered quota come down to it in the background;
	// the trimming stops before the tiers close.
	n.trimDone = make(chan struct{})
	go func() { n.stack.RunQuotaTrim(runCtx); close(n.trimDone) }()
	go n.ui.Run(runCtx)
	go releaseIdleMemory(runCtx, n.budget, n.log)
	if n.cfg.PprofListen != "" {
		psrv := pprofServer(n.cfg.PprofListen, n.log)
		n.onClose(func() { psrv.Close() })
	}
	errc := make(chan error, 5)
	go func() { errc <- n.peerSrv.Serve(runCtx, n.peerLn) }()
	go func() { errc <- n.nativeSrv.Serve(runCtx, n.nativeLn) }()
	go func() { errc <- n.httpSrv.Serve(runCtx, n.httpLn) }()
	if n.s3Srv != nil {
		go func() { errc <- n.s3Srv.Serve(runCtx, n.s3Ln) }()
	}
	if n.respSrv != nil {
		go func() { errc <- n.respSrv.Serve(runCtx, n.respLn) }()
	}
	for _, sc := range n.subs {
		go func() {
			if err := n.ingest.Subscribe(runCtx, sc); err != nil && runCtx.Err() == nil {
				n.log.Error("kv event subscription ended", "endpoint", sc.Endpoint, "worker", sc.Worker, "err", err)
			}
		}()
	}
	return errc
}

// logReady waits up to 10 s for the cluster to be ready (so the first
// requests find a leader) and logs the node's addresses.
func (n *node) logReady(ctx context.Context) {
	if err := n.cluster.waitReady(ctx, 10*time.Second); err != nil {
		n.log.Warn("serving before the cluster is ready", "err", err)
	}
	cfg := n.cfg
	addr := func(ln net.Listener) string {
		if ln == nil {
			return ""
		}
		return ln.Addr().String()
	}
	n.log.Info("ctxd ready", "native", addr(n.nativeLn), "http", addr(n.httpLn), "s3", addr(n.s3Ln), "resp", addr(n.respLn),
		"peer", addr(n.peerLn), "raft", n.self.RaftAddr, "node_id", cfg.NodeID, "node_tls", tlsMode(n.tls), "client_tls", cfg.TLSClients,
		"data_dir", cfg.DataDir, "auth", cfg.Auth, "dram_capacity", cfg.DRAMCapacity, "dram_policy", cfg.DRAMPolicy, "memfile", n.stack.DRAM().MemFile(),
		"nvme_dir", cfg.NVMeDir, "nvme_capacity", cfg.NVMeCapacity)
}

// shutdown stops the servers gracefully within 15 s (stop accepting, drain
// in-flight requests) and then the background loops.
func (n *node) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := errors.Join(n.nativeSrv.Shutdown(ctx), n.httpSrv.Shutdown(ctx), n.peerSrv.Shutdown(ctx))
	if n.s3Srv != nil {
		err = errors.Join(err, n.s3Srv.Shutdown(ctx))
	}
	if n.respSrv != nil {
		err = errors.Join(err, n.respSrv.Shutdown(ctx))
	}
	n.stopLoops()
	return err
}

// stopLoops ends start's background loops and waits for the quota trimming,
// which must stop before the tiers close.
func (n *node) stopLoops() {
	if n.stopRun == nil {
		return
	}
	n.stopRun()
	<-n.trimDone
	n.stopRun = nil
}

// close stops the background loops and releases what newNode opened, in
// the reverse order: pprof, the cluster (backend, peers, Raft), the tiers,
// then the listeners.
func (n *node) close() {
	n.stopLoops()
	for i := len(n.closers) - 1; i >= 0; i-- {
		n.closers[i]()
	}
	n.closers = nil
}

// wrapTLS puts the listeners in TLS: the peer listener under node-to-node
// TLS (peer.Peers dials it with the matching client configuration), and
// with --tls-clients the client-facing ports (native, HTTP, S3, RESP) with
// the same certificate and no client certificate asked for (--auth
// required authenticates there).
func (n *node) wrapTLS() {
	if n.tls != nil {
		n.peerLn = tls.NewListener(n.peerLn, n.tls.ServerConfig())
	}
	if n.cfg.TLSClients {
		cs := clientTLS(n.tls)
		n.nativeLn, n.httpLn = tls.NewListener(n.nativeLn, cs), tls.NewListener(n.httpLn, cs)
		if n.s3Ln != nil {
			n.s3Ln = tls.NewListener(n.s3Ln, cs)
		}
		if n.respLn != nil {
			n.respLn = tls.NewListener(n.respLn, cs)
		}
	}
}
