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
	"os"
	"os/signal"
	"syscall"

	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
	"github.com/ctxtier/ctxtier/raft"
)

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

// run builds the node, serves until ctx ends or a server fails, then shuts
// down gracefully: stop accepting, drain in-flight requests, close the
// cluster and the tiers.
func run(ctx context.Context, cfg Config, log *slog.Logger) error {
	n, err := newNode(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer n.close()
	errc := n.start(ctx)
	n.logReady(ctx)

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
	err = n.shutdown()
	if serveErr != nil {
		return serveErr
	}
	return err
}

// clientTLS is the server configuration of the client-facing ports.
func clientTLS(t *raft.TLS) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{t.Certificate}}
}

// clusterOpts are the options of the cluster's HTTP transport that every
// node-side user shares (control's server and clients, and so the cluster
// API): the cluster secret, and https to the members' HTTP ports under
// --tls-clients.
func clusterOpts(cfg Config, t *raft.TLS, secret string) []control.Option {
	opts := []control.Option{control.WithToken(secret)}
	if cfg.TLSClients {
		opts = append(opts, control.WithTLS(t.ClientConfig("")))
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
