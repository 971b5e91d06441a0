package control

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Header names of the cluster API.
const (
	// HeaderToken carries the shared cluster secret (Config.Token) on the
	// membership and internal endpoints.
	HeaderToken = "X-Ctxtier-Cluster-Token"
	// HeaderLeader is the leader's HTTP address, set on every "not the
	// leader" reply (503) when a leader is known, so the caller can retry
	// there.
	HeaderLeader = "X-Ctxtier-Leader"
	// HeaderLeaderID is the leader's node id, beside HeaderLeader.
	HeaderLeaderID = "X-Ctxtier-Leader-Id"
	// HeaderForwardedBy marks a request a follower forwarded to the leader
	// (its value is the follower's id). A node that is not the leader
	// answers such a request with 503 instead of forwarding it again, so a
	// stale leader view can never loop.
	HeaderForwardedBy = "X-Ctxtier-Forwarded-By"
)

// Config configures the HTTP transport of the cluster's endpoints: the
// Server, Join, the Forwarder, the SessionFanout and the Client (and so
// gateway/clusterapi's handler and client, which are built over them). All
// of them take Options; the zero Option set is DefaultConfig.
type Config struct {
	// Token, when set, is a shared secret every node and ctxctl must send in
	// HeaderToken on the membership endpoints (join, remove,
	// transfer-leadership) and on internal/propose and internal/read-index.
	// Status and repair stay open (they are read-only). Clients send it
	// when set.
	Token string
	// Timeout bounds one forwarded request (follower to leader), one
	// membership change on the leader, and one client request.
	Timeout time.Duration
	// MaxBodyBytes bounds a request or response body: a JSON membership
	// request, a forwarded proposal and its reply.
	MaxBodyBytes int64
	// Client sends forwarded and client requests; nil builds one with
	// Timeout as its overall limit (and TLS).
	Client *http.Client
	// TLS, when set, makes every request go to https:// addresses with
	// this client configuration (ctxd --tls-clients serves its HTTP API,
	// and so this API, over TLS).
	TLS *tls.Config
	// Traffic, when set, is this node's per-namespace traffic counters,
	// served on PathTraffic (always behind the token) for the other
	// members' consoles.
	Traffic func() []ctxstore.TrafficCount
	// Sessions, when set, releases an agent session on this node's own
	// tier stack: served on PathSessionEnd (behind the token when there
	// is one) for the member where the session ended.
	Sessions SessionReleaser
	// LeaderWait bounds how long a member of a configuration that knows no
	// leader holds a request it must forward before answering 503.
	LeaderWait time.Duration
}

// baseURL is addr as a URL root: kept when it has a scheme, else with
// https:// under TLS and http:// otherwise.
func (c Config) baseURL(addr string) string {
	addr = strings.TrimRight(addr, "/")
	if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
		return addr
	}
	if c.TLS != nil {
		return "https://" + addr
	}
	return "http://" + addr
}

// DefaultConfig returns the defaults: no token, 10 s timeout, 16 MiB
// bodies, 3 s leader wait.
func DefaultConfig() Config {
	return Config{Timeout: 10 * time.Second, MaxBodyBytes: 16 << 20, LeaderWait: 3 * time.Second}
}

// Validate checks the configuration; errors wrap block.ErrInvalidArgument.
func (c Config) Validate() error {
	switch {
	case c.Timeout <= 0:
		return fmt.Errorf("%w: clusterapi: Timeout must be positive", block.ErrInvalidArgument)
	case c.LeaderWait <= 0:
		return fmt.Errorf("%w: clusterapi: LeaderWait must be positive", block.ErrInvalidArgument)
	case c.MaxBodyBytes < 1024:
		return fmt.Errorf("%w: clusterapi: MaxBodyBytes %d must be at least 1024", block.ErrInvalidArgument, c.MaxBodyBytes)
	case len(c.Token) > 1024:
		return fmt.Errorf("%w: clusterapi: Token longer than 1024 bytes", block.ErrInvalidArgument)
	}
	for _, r := range c.Token {
		if r < 0x21 || r > 0x7e {
			return fmt.Errorf("%w: clusterapi: Token must be printable ASCII without spaces", block.ErrInvalidArgument)
		}
	}
	return nil
}

// Option adjusts the Config of a Server, Join, Forwarder, SessionFanout or
// Client.
type Option func(*Config)

// WithConfig replaces the whole configuration.
func WithConfig(c Config) Option { return func(dst *Config) { *dst = c } }

// WithToken sets the shared cluster secret (see Config.Token).
func WithToken(token string) Option { return func(c *Config) { c.Token = token } }

// WithTLS sets Config.TLS.
func WithTLS(tc *tls.Config) Option { return func(c *Config) { c.TLS = tc } }

// WithHTTPClient sets the HTTP client for outgoing requests.
func WithHTTPClient(hc *http.Client) Option { return func(c *Config) { c.Client = hc } }

// WithLeaderWait sets Config.LeaderWait.
func WithLeaderWait(d time.Duration) Option { return func(c *Config) { c.LeaderWait = d } }

// WithTimeout sets Config.Timeout.
func WithTimeout(d time.Duration) Option { return func(c *Config) { c.Timeout = d } }

// Build returns the configuration opts give: applied over the defaults,
// with the HTTP client built. gateway/clusterapi builds its handler and
// client over it.
func Build(opts ...Option) Config { return build(opts) }

// build applies opts over the defaults. An invalid result panics: options
// are programming input (validate user input with Config.Validate first).
func build(opts []Option) Config {
	c := DefaultConfig()
	for _, o := range opts {
		o(&c)
	}
	if err := c.Validate(); err != nil {
		panic(err.Error())
	}
	if c.Client == nil {
		c.Client = &http.Client{Timeout: c.Timeout, Transport: newTransport(c.TLS)}
	}
	return c
}

// idleConnsPerHost is how many kept-alive connections the client holds to
// each address. A follower forwards every put it coordinates to the leader,
// many at once: with net/http's default of 2, all but two of the forwards
// in flight closed their connection after the answer and the next ones
// dialed again (about 140 connects a second on a follower under batched
// puts, seen with strace).
const idleConnsPerHost = 64

// newTransport is the transport of a client build makes: net/http's
// default one (proxies from the environment) in plain HTTP, a bare one
// over tlsCfg under TLS, as before, each keeping idleConnsPerHost
// connections to an address.
func newTransport(tlsCfg *tls.Config) *http.Transport {
	var tr *http.Transport
	if tlsCfg == nil {
		tr = http.DefaultTransport.(*http.Transport).Clone()
	} else {
		tr = &http.Transport{TLSClientConfig: tlsCfg, ForceAttemptHTTP2: true}
	}
	tr.MaxIdleConnsPerHost = idleConnsPerHost
	return tr
}
