package console

import (
	"context"
	"crypto/tls"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/ctxstore/router"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
)

// Cluster is the cluster as the console sees it: the same status
// `ctxctl cluster status --json` prints, and the membership actions.
// cmd/ctxd implements it over clusterapi.Snapshot and the cluster API.
type Cluster interface {
	Status(ctx context.Context) (clusterapi.Status, error)
	Drain(ctx context.Context, id string) error
	CancelDrain(ctx context.Context, id string) error
	// TransferLeadership hands leadership to id ("" picks a follower)
	// and returns the new leader's id.
	TransferLeadership(ctx context.Context, id string) (string, error)
}

// Keys are the access keys: an admin key (scoped to "*") unlocks the
// actions, and the actions can revoke a key.
type Keys interface {
	Lookup(accessKeyID string) (credential.Credential, error)
	List(ctx context.Context) ([]credential.Credential, error)
	Revoke(ctx context.Context, accessKeyID string) error
}

// Usage is what this node's index holds for one namespace.
type Usage struct {
	Blocks int64 `json:"blocks"`
	Bytes  int64 `json:"bytes"`
	Pinned int64 `json:"pinned"`
}

// Namespaces lists the namespaces and what the index holds for each.
type Namespaces interface {
	Namespaces() []block.Namespace
	// Usage scans the index once and returns every namespace's usage.
	Usage(ctx context.Context) (map[string]Usage, error)
}

// Router is the KV-aware router's view of the workers.
type Router interface {
	Stats() map[string]router.IndexStats
	Workers(ns string) []router.WorkerInfo
}

// Deps are the console's sources. Cluster and Gatherer are required; a nil
// Namespaces, Router, Keys or Traffic leaves that part empty (with no Keys, every
// action is refused).
type Deps struct {
	NodeID     string
	Cluster    Cluster
	Gatherer   prometheus.Gatherer
	Namespaces Namespaces
	Router     Router
	Keys       Keys
	// Traffic is the namespaces' traffic counters (nil: none shown).
	Traffic TrafficSource
	// Members fetches the other members' traffic counters, summed into
	// the cluster's traffic (nil: the overview has this node's only).
	Members MemberTraffic
	// Client fetches other members' consoles (nil: a client with
	// Config.PeerTimeout, over TLS with PeerTLS when that is set).
	Client *http.Client
	// PeerTLS, when set, is how this node reaches the other members' HTTP
	// ports (ctxd --tls-clients serves them with TLS only): their consoles
	// are fetched over https with it.
	PeerTLS *tls.Config
}

//go:embed assets
var assets embed.FS

// Console serves the console's page and JSON.
type Console struct {
	cfg     Config
	deps    Deps
	log     *slog.Logger
	sampler *Sampler
	mux     *http.ServeMux

	overviewState
}

// New builds a console; Run starts its sampler.
func New(cfg Config, deps Deps, log *slog.Logger) (*Console, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Cluster == nil || deps.Gatherer == nil {
		return nil, fmt.Errorf("%w: console: Cluster and Gatherer are required", block.ErrInvalidArgument)
	}
	if log == nil {
		log = slog.Default()
	}
	if deps.Client == nil {
		deps.Client = &http.Client{Timeout: cfg.PeerTimeout}
		if deps.PeerTLS != nil {
			deps.Client.Transport = &http.Transport{TLSClientConfig: deps.PeerTLS, ForceAttemptHTTP2: true}
		}
	}
	c := &Console{cfg: cfg, deps: deps, log: log.With("component", "console"), mux: http.NewServeMux()}
	c.wake, c.building = make(chan struct{}, 1), make(chan struct{}, 1)
	c.rates.window = cfg.TrafficWindow
	c.members = map[string]*rates{}
	c.sampler = NewSampler(cfg, deps.Gatherer, c.log)
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	files := http.StripPrefix("/ui/", http.FileServerFS(static))
	c.mux.Handle("/ui/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		files.ServeHTTP(w, r)
	}))
	c.handle("GET /ui/api/overview", c.overview)
	c.handle("GET /ui/api/node", c.node)
	c.handle("GET /ui/api/series", c.series)
	c.handle("POST /ui/api/session", c.session)
	c.handle("GET /ui/api/keys", c.keys)
	c.handle("POST /ui/api/actions/{action}", c.action)
	c.handle("/ui/api/", func(_ http.ResponseWriter, r *http.Request) error {
		return fmt.Errorf("%w: no console endpoint %s %s", block.ErrNotFound, r.Method, r.URL.Path)
	})
	return c, nil
}

// Handler serves /ui/ (mount it with httpapi.Server.MountPage("/ui/", h)).
func (c *Console) Handler() http.Handler { return c.mux }

// Run samples the node's registry for the charts, and refreshes the
// overview while pages ask for it, until ctx ends.
func (c *Console) Run(ctx context.Context) {
	go c.refresh(ctx)
	c.sampler.Run(ctx)
}

// Sampler is the console's chart ring.
func (c *Console) Sampler() *Sampler { return c.sampler }

func (c *Console) handle(pattern string, fn func(http.ResponseWriter, *http.Request) error) {
	c.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if err := fn(w, r); err != nil {
			code := errcode.Of(err)
			if code == errcode.Internal {
				c.log.Error("console request failed", "path", r.URL.Path, "err", err)
			}
			w.Header().Set(httpwire.HeaderErrorCode, code.String())
			writeJSON(w, code.HTTPStatus(), httpwire.ErrorBody{Code: code.String(), Message: err.Error()})
		}
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"code":"Internal","message":"encoding reply"}`)
	}
	w.Header().Set("Content-Type", httpwire.ContentTypeJSON)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
