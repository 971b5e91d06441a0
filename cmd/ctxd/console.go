package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/ctxstore/router"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
	"github.com/ctxtier/ctxtier/gateway/console"
	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// selfHost is the host name under which the console's cluster client
// reaches this node's own cluster handler in process.
const selfHost = "ctxd.self"

// inProcess sends requests for selfHost to h without a network hop (and
// without the block API's authentication, which guards /v1/cluster/ from
// outside); any other host (a leader named in a reply) goes over HTTP.
type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host != selfHost {
		return http.DefaultTransport.RoundTrip(r)
	}
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// consoleCluster is the console's view of the cluster: the status
// snapshot GET /v1/cluster/status serves and the cluster API's actions.
type consoleCluster struct {
	status func() clusterapi.Status
	api    *clusterapi.Client
}

func (c consoleCluster) Status(context.Context) (clusterapi.Status, error) { return c.status(), nil }
func (c consoleCluster) Drain(ctx context.Context, id string) error {
	_, err := c.api.Drain(ctx, id)
	return err
}
func (c consoleCluster) CancelDrain(ctx context.Context, id string) error {
	return c.api.CancelDrain(ctx, id)
}
func (c consoleCluster) TransferLeadership(ctx context.Context, id string) (string, error) {
	r, err := c.api.TransferLeadership(ctx, id)
	return r.Leader, err
}

// consoleNamespaces lists the namespaces and scans this node's replicated
// index for their usage.
type consoleNamespaces struct {
	list  func() []block.Namespace
	index *fsm.FSM
}

func (n consoleNamespaces) Namespaces() []block.Namespace { return n.list() }

func (n consoleNamespaces) Usage(ctx context.Context) (map[string]console.Usage, error) {
	now := time.Now()
	out := map[string]console.Usage{}
	for _, ns := range n.list() {
		var u console.Usage
		err := n.index.Scan(ns.Name, "", func(_ block.Key, e fsm.Entry) bool {
			u.Blocks++
			u.Bytes += e.Size
			if e.PinUntil.After(now) {
				u.Pinned++
			}
			return ctx.Err() == nil
		})
		if err != nil {
			return out, err
		}
		out[ns.Name] = u
	}
	return out, ctx.Err()
}

// newConsole builds the operator console at /ui/ over this node's cluster
// handler, registry, index, namespace traffic, router and access keys.
func newConsole(cfg Config, tlsc *raft.TLS, secret string, node interface{ FSM() *fsm.FSM }, status func() clusterapi.Status, clusterH http.Handler,
	reg prometheus.Gatherer, namespaces func() []block.Namespace, traffic console.TrafficSource, members console.MemberTraffic, rt *router.Router,
	replicated *credential.Replicated, file *credential.FileStore, log *slog.Logger) (*console.Console, error) {
	api := clusterapi.NewClient("http://"+selfHost, control.WithToken(secret),
		control.WithHTTPClient(&http.Client{Transport: inProcess{clusterH}, Timeout: 30 * time.Second}))
	keys := consoleKeys{replicated: replicated, file: file, api: api}
	var peerTLS *tls.Config
	if cfg.TLSClients {
		peerTLS = tlsc.ClientConfig("") // the members' HTTP ports serve TLS only
	}
	return console.New(console.DefaultConfig(), console.Deps{
		NodeID:     cfg.NodeID,
		Cluster:    consoleCluster{status: status, api: api},
		Gatherer:   reg,
		Namespaces: consoleNamespaces{list: namespaces, index: node.FSM()},
		Router:     rt,
		Keys:       keys,
		Traffic:    traffic,
		Members:    members,
		PeerTLS:    peerTLS,
	}, log)
}

// consoleMembers asks the other members for their traffic counters
// (GET /v1/cluster/internal/traffic with the cluster secret, over TLS
// when the HTTP API is), one client per member address so connections
// are reused from one overview to the next.
type consoleMembers struct {
	opts    []control.Option
	mu      sync.Mutex
	clients map[string]*control.Client
}

func newConsoleMembers(opts []control.Option) *consoleMembers {
	return &consoleMembers{opts: opts, clients: map[string]*control.Client{}}
}

func (m *consoleMembers) Traffic(ctx context.Context, mb clusterapi.Member) ([]ctxstore.TrafficCount, error) {
	m.mu.Lock()
	cl := m.clients[mb.HTTPAddr]
	if cl == nil {
		// Bounded by the members: a removed member's address is dropped
		// once the map outgrows the cluster many times over.
		if len(m.clients) > 1024 {
			clear(m.clients)
		}
		cl = control.NewClient(mb.HTTPAddr, m.opts...)
		m.clients[mb.HTTPAddr] = cl
	}
	m.mu.Unlock()
	r, err := cl.Traffic(ctx)
	if err != nil {
		return nil, err
	}
	if r.NodeID != mb.ID {
		return nil, fmt.Errorf("%w: %s answered as %q, not %s", block.ErrUnavailable, mb.HTTPAddr, r.NodeID, mb.ID)
	}
	return r.Namespaces, nil
}

// consoleKeys is the console's view of the access keys: the keys replicated
// through Raft first, then this node's own key file. A replicated key is
// revoked through the cluster API (which forwards to the leader), a file key
// in the file.
type consoleKeys struct {
	replicated *credential.Replicated
	file       *credential.FileStore
	api        *clusterapi.Client
}

func (k consoleKeys) Lookup(id string) (credential.Credential, error) {
	return credential.Chain{k.replicated, k.file}.Lookup(id)
}

func (k consoleKeys) List(ctx context.Context) ([]credential.Credential, error) {
	out, err := k.replicated.List(ctx)
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(out))
	for _, c := range out {
		seen[c.AccessKeyID] = true
	}
	local, err := k.file.List(ctx)
	if err != nil {
		return nil, err
	}
	for _, c := range local {
		if !seen[c.AccessKeyID] {
			out = append(out, c)
		}
	}
	return out, nil
}

func (k consoleKeys) Revoke(ctx context.Context, id string) error {
	if _, err := k.replicated.Lookup(id); err == nil {
		return k.api.RevokeKey(ctx, id)
	}
	return k.file.Revoke(ctx, id)
}
