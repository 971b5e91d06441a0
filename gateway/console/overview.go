package console

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/router"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
)

// NamespaceView is one namespace row: its definition, this node's index
// usage and its traffic through this node.
type NamespaceView struct {
	Name         string `json:"name"`
	Model        string `json:"model,omitempty"`
	DataShards   int    `json:"k"`
	ParityShards int    `json:"m"`
	TTLSeconds   int64  `json:"ttl_seconds"`
	Priority     uint8  `json:"priority"`
	WriteMode    string `json:"write_mode,omitempty"`
	// Quota is the namespace's byte quota per tier on each node (absent:
	// none; docs/operations.md, Quotas).
	Quota block.Quota `json:"quota,omitzero"`
	Usage
	// Traffic is the namespace's totals since this node started, the
	// values of its ctxtier_namespace_* counters in /metrics; absent when
	// all zero (no traffic on this node: no series in /metrics either).
	Traffic Traffic `json:"traffic,omitzero"`
	// Rates are Traffic's per-second rates over the overview's
	// TrafficWindowMS; absent when all zero (no traffic in the window, or
	// no window yet).
	Rates Traffic `json:"rates,omitzero"`
	// ClusterTraffic and ClusterRates are the sums of Traffic and Rates
	// over the members that answered (the overview's TrafficMembers);
	// absent when all zero.
	ClusterTraffic Traffic `json:"cluster_traffic,omitzero"`
	ClusterRates   Traffic `json:"cluster_rates,omitzero"`
}

// WorkerView is one router worker of a namespace.
type WorkerView struct {
	Namespace string `json:"namespace"`
	router.WorkerInfo
}

// Overview is the reply of GET /ui/api/overview.
type Overview struct {
	NodeID string `json:"node_id"`
	// Time is when the overview was built (Unix milliseconds): the reply
	// is built at most once per Config.OverviewInterval and served to
	// every request meanwhile.
	Time int64 `json:"time"`
	// Cluster is the reply of GET /v1/cluster/status on this node.
	Cluster    clusterapi.Status `json:"cluster"`
	Node       NodeView          `json:"node"`
	Namespaces []NamespaceView   `json:"namespaces"`
	// TrafficWindowMS is the window the namespaces' rates cover (0: none
	// yet).
	TrafficWindowMS int64 `json:"traffic_window_ms"`
	// TrafficMembers says whose counters the namespaces' cluster_traffic
	// and cluster_rates sum (absent without Deps.Members).
	TrafficMembers *ClusterTraffic `json:"traffic_members,omitempty"`
	// UsageError says why the namespace usage is missing, if it is.
	UsageError string                       `json:"usage_error,omitempty"`
	Router     map[string]router.IndexStats `json:"router"`
	Workers    []WorkerView                 `json:"workers"`
}

// built is an encoded overview and when it was built.
type built struct {
	body []byte
	at   time.Time
}

// overview serves the last overview built if it is younger than
// Config.OverviewMaxAge, else builds one (one build at a time; the others
// wait for it). Each request also keeps the background refresh going (see
// refresh), so a page that polls is served bytes built beforehand.
func (c *Console) overview(w http.ResponseWriter, r *http.Request) error {
	now := time.Now()
	c.lastAsked.Store(now.UnixNano())
	select {
	case c.wake <- struct{}{}:
	default:
	}
	b := c.cached.Load()
	if b == nil || now.Sub(b.at) > c.cfg.OverviewMaxAge {
		var err error
		if b, err = c.rebuild(r.Context(), now); err != nil {
			return err
		}
	}
	w.Header().Set("Content-Type", httpwire.ContentTypeJSON)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b.body)
	return nil
}

// rebuild builds the overview unless one built at or after since is
// already cached (another request or the refresh built it meanwhile).
func (c *Console) rebuild(ctx context.Context, since time.Time) (*built, error) {
	select {
	case c.building <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-c.building }()
	if b := c.cached.Load(); b != nil && !b.at.Before(since) {
		return b, nil
	}
	start := time.Now()
	ov, err := c.build(ctx, start)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(ov)
	if err != nil {
		return nil, err
	}
	b := &built{body: append(body, '\n'), at: start}
	c.cached.Store(b)
	return b, nil
}

// refresh rebuilds the overview every Config.OverviewInterval while pages
// ask for it, and sleeps once none has asked for Config.OverviewIdle: with
// no browser open it costs nothing.
func (c *Console) refresh(ctx context.Context) {
	t := time.NewTicker(c.cfg.OverviewInterval)
	defer t.Stop()
	t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		}
		t.Reset(c.cfg.OverviewInterval)
		for watched := true; watched; {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				if now.Sub(time.Unix(0, c.lastAsked.Load())) > c.cfg.OverviewIdle {
					watched = false
					continue
				}
				if _, err := c.rebuild(ctx, now); err != nil && ctx.Err() == nil {
					c.log.Warn("console overview refresh", "err", err)
				}
			}
		}
		t.Stop()
		// A wake-up sent while the loop ran is kept: it restarts the loop,
		// which stops again at its first tick if nobody asked since.
	}
}

// build gathers everything the overview shows; the builder (rebuild) runs
// one at a time, so it owns c.rates.
func (c *Console) build(ctx context.Context, now time.Time) (Overview, error) {
	st, err := c.deps.Cluster.Status(ctx)
	if err != nil {
		return Overview{}, err
	}
	f, err := gather(c.deps.Gatherer)
	if err != nil {
		return Overview{}, err
	}
	ov := Overview{NodeID: c.deps.NodeID, Time: now.UnixMilli(), Cluster: st, Node: nodeView(c.deps.NodeID, f),
		Namespaces: []NamespaceView{}, Router: map[string]router.IndexStats{}, Workers: []WorkerView{}}
	if c.deps.Namespaces != nil {
		use, uerr := c.usage(ctx)
		if uerr != nil {
			ov.UsageError = uerr.Error()
		}
		totals := trafficOf(c.deps.Traffic)
		rt, window := c.rates.observe(now, totals)
		ov.TrafficWindowMS = window.Milliseconds()
		list := c.deps.Namespaces.Namespaces()
		var cTotals, cRates map[string]Traffic
		if c.deps.Members != nil {
			known := make(map[string]bool, len(list))
			for _, ns := range list {
				known[ns.Name] = true
			}
			var ct ClusterTraffic
			ct, cTotals, cRates = c.clusterTraffic(ctx, now, st, known, totals, rt, window)
			ov.TrafficMembers = &ct
		}
		ov.Namespaces = make([]NamespaceView, 0, len(list))
		for _, ns := range list {
			ov.Namespaces = append(ov.Namespaces, NamespaceView{Name: ns.Name, Model: ns.Model, DataShards: max(ns.DataShards, 1),
				ParityShards: ns.ParityShards, TTLSeconds: ns.TTLSeconds, Priority: ns.Priority, WriteMode: string(ns.WriteMode),
				Quota: ns.Quota, Usage: use[ns.Name], Traffic: totals[ns.Name], Rates: rt[ns.Name],
				ClusterTraffic: cTotals[ns.Name], ClusterRates: cRates[ns.Name]})
		}
		// Largest first: the page shows the top of the list. Names are
		// unique, so the order is total and an unstable sort is enough (a
		// stable one moved the structs many more times: half of the
		// request in the profile of issue 24).
		slices.SortFunc(ov.Namespaces, func(a, b NamespaceView) int {
			if a.Bytes != b.Bytes {
				if a.Bytes > b.Bytes {
					return -1
				}
				return 1
			}
			return strings.Compare(a.Name, b.Name)
		})
	}
	if c.deps.Router != nil {
		ov.Router = c.deps.Router.Stats()
		for ns := range ov.Router {
			for _, wi := range c.deps.Router.Workers(ns) {
				ov.Workers = append(ov.Workers, WorkerView{Namespace: ns, WorkerInfo: wi})
			}
		}
		slices.SortFunc(ov.Workers, func(a, b WorkerView) int {
			if a.Namespace != b.Namespace {
				return strings.Compare(a.Namespace, b.Namespace)
			}
			return strings.Compare(a.Worker, b.Worker)
		})
	}
	return ov, nil
}

// usage returns the namespace usage, scanning the index at most once per
// NamespaceTTL. Only the overview's builder calls it, one at a time.
func (c *Console) usage(ctx context.Context) (map[string]Usage, error) {
	if c.nsUse != nil && time.Since(c.nsAt) < c.cfg.NamespaceTTL {
		return c.nsUse, c.nsErr
	}
	u, err := c.deps.Namespaces.Usage(ctx)
	if u == nil {
		u = map[string]Usage{}
	}
	c.nsUse, c.nsErr, c.nsAt = u, err, time.Now()
	return u, err
}

// overviewState is the Console's cached overview and what builds it.
type overviewState struct {
	cached    atomic.Pointer[built]
	lastAsked atomic.Int64 // UnixNano of the last overview request
	wake      chan struct{}
	building  chan struct{} // a one-slot semaphore: one build at a time

	// Owned by the builder (held building).
	rates rates
	// members are the other members' traffic readings, by id.
	members map[string]*rates
	nsAt    time.Time
	nsUse   map[string]Usage
	nsErr   error
}
