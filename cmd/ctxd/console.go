package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/router"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
	"github.com/ctxtier/ctxtier/gateway/console"
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
// handler, registry, index, router and access keys.
func newConsole(cfg Config, node interface{ FSM() *fsm.FSM }, status func() clusterapi.Status, clusterH http.Handler,
	reg prometheus.Gatherer, namespaces func() []block.Namespace, rt *router.Router, keys console.Keys, log *slog.Logger) (*console.Console, error) {
	api := clusterapi.NewClient("http://"+selfHost, clusterapi.WithToken(cfg.ClusterToken),
		clusterapi.WithHTTPClient(&http.Client{Transport: inProcess{clusterH}, Timeout: 30 * time.Second}))
	return console.New(console.DefaultConfig(), console.Deps{
		NodeID:     cfg.NodeID,
		Cluster:    consoleCluster{status: status, api: api},
		Gatherer:   reg,
		Namespaces: consoleNamespaces{list: namespaces, index: node.FSM()},
		Router:     rt,
		Keys:       keys,
	}, log)
}
