package control

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster"
)

// PathSessionEnd ends an agent session on the member that receives it, and
// on that member only: the node where a client ended the session (native
// END_SESSION, or POST /v1/namespaces/{ns}/sessions/{id}/end) calls it on
// every other live member so that the copies they hold (replicas, shards)
// are released too. A member never fans a call of this path out again.
// Internal: behind the cluster token when the node has one.
const PathSessionEnd = "/v1/cluster/internal/session-end"

// SessionEndRequest is the body of PathSessionEnd.
type SessionEndRequest struct {
	Namespace string `json:"namespace"`
	Session   uint64 `json:"session"`
}

// SessionEndResponse is the reply of PathSessionEnd.
type SessionEndResponse struct {
	// NodeID is the member that answered.
	NodeID string `json:"node_id"`
	// Released is how many blocks (copies, shards) of the session it
	// released: 0 when it held none, or the session had ended there.
	Released int `json:"released"`
}

// SessionReleaser releases an agent session on this node's own tier stack
// only (ctxstore.Store.ReleaseSession over the local stack).
type SessionReleaser func(ctx context.Context, ns string, session uint64) (int, error)

// WithSessions sets Config.Sessions.
func WithSessions(fn SessionReleaser) Option {
	return func(c *Config) { c.Sessions = fn }
}

// sessionEnd serves PathSessionEnd: this node's own release, never a
// fan-out.
func (s *Server) sessionEnd(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Sessions == nil {
		return fmt.Errorf("%w: node %s releases no sessions for the cluster", block.ErrNotFound, s.node.ID())
	}
	var req SessionEndRequest
	if err := decodeJSON(w, r, s.cfg.MaxBodyBytes, &req, false); err != nil {
		return err
	}
	if req.Session == 0 {
		return fmt.Errorf("%w: session 0 is no session", block.ErrInvalidArgument)
	}
	n, err := s.cfg.Sessions(r.Context(), req.Namespace, req.Session)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, SessionEndResponse{NodeID: s.node.ID(), Released: n})
	return nil
}

// EndSession releases an agent session on the node c talks to, and only
// there (PathSessionEnd); the client must carry the cluster token.
func (c *Client) EndSession(ctx context.Context, ns string, session uint64) (SessionEndResponse, error) {
	var out SessionEndResponse
	err := c.Do(ctx, http.MethodPost, PathSessionEnd, SessionEndRequest{Namespace: ns, Session: session}, &out)
	return out, err
}

// SessionFanoutConfig configures a SessionFanout.
type SessionFanoutConfig struct {
	// NodeID is this node: it is not asked.
	NodeID string
	// MemberTimeout bounds the call to one member; the members are asked
	// in parallel, so it bounds the whole fan-out too.
	MemberTimeout time.Duration
}

// DefaultSessionFanoutConfig returns a 2 s member timeout.
func DefaultSessionFanoutConfig() SessionFanoutConfig {
	return SessionFanoutConfig{MemberTimeout: 2 * time.Second}
}

// Validate checks the configuration; errors wrap block.ErrInvalidArgument.
func (c SessionFanoutConfig) Validate() error {
	switch {
	case c.NodeID == "":
		return fmt.Errorf("%w: session fan-out: NodeID is empty", block.ErrInvalidArgument)
	case c.MemberTimeout <= 0:
		return fmt.Errorf("%w: session fan-out: MemberTimeout must be positive", block.ErrInvalidArgument)
	}
	return nil
}

// SessionFanout ends an agent session on every other live member of the
// cluster (PathSessionEnd), best effort: a member that is dead, has left,
// has no HTTP address, fails or times out is counted and logged, never an
// error of the client's END_SESSION. Each call goes in parallel with the
// others, over https when the options carry TLS.
type SessionFanout struct {
	cfg     SessionFanoutConfig
	members func() []cluster.Member
	opts    []Option
	log     *slog.Logger
	calls   *prometheus.CounterVec
	blocks  prometheus.Counter

	mu      sync.Mutex
	clients map[string]*Client
}

// NewSessionFanout returns a fan-out over members (the cluster's member
// list, e.g. the FSM's), calling them with opts (token, TLS). It registers
// ctxtier_session_end_members_total{result} and
// ctxtier_session_end_peer_released_blocks_total on reg when not nil.
func NewSessionFanout(cfg SessionFanoutConfig, members func() []cluster.Member, reg prometheus.Registerer, log *slog.Logger, opts ...Option) (*SessionFanout, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	f := &SessionFanout{cfg: cfg, members: members, opts: opts, log: log.With("component", "session-fanout"),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ctxtier_session_end_members_total",
			Help: "Other members asked to release an ended agent session, by result: acked, failed, skipped (dead or no HTTP address)."}, []string{"result"}),
		blocks: prometheus.NewCounter(prometheus.CounterOpts{Name: "ctxtier_session_end_peer_released_blocks_total",
			Help: "Blocks the other members reported released when a session ended through this node."}),
		clients: map[string]*Client{},
	}
	for _, r := range []string{"acked", "failed", "skipped"} {
		f.calls.WithLabelValues(r)
	}
	if reg != nil {
		if err := reg.Register(f.calls); err != nil {
			return nil, err
		}
		if err := reg.Register(f.blocks); err != nil {
			return nil, err
		}
	}
	return f, nil
}

var _ cluster.SessionPeers = (*SessionFanout)(nil)

// FanoutResult says how an END_SESSION fan-out went.
type FanoutResult struct {
	// Asked, Acked: the other members asked, and those that answered.
	Asked, Acked int
	// Skipped: members not asked (dead, or no HTTP address).
	Skipped int
	// Released: the blocks the members that answered released.
	Released int
}

// EndSession asks every other live member to release session of ns and
// waits for their answers, each bounded by MemberTimeout.
func (f *SessionFanout) EndSession(ctx context.Context, ns string, session uint64) FanoutResult {
	var res FanoutResult
	var targets []cluster.Member
	for _, m := range f.members() {
		switch {
		case m.ID == f.cfg.NodeID || m.State == cluster.MemberLeft:
		case m.State == cluster.MemberDead || m.HTTPAddr == "":
			res.Skipped++
		default:
			targets = append(targets, m)
		}
	}
	res.Asked = len(targets)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range targets {
		wg.Go(func() {
			mctx, cancel := context.WithTimeout(ctx, f.cfg.MemberTimeout)
			defer cancel()
			r, err := f.client(m.HTTPAddr).EndSession(mctx, ns, session)
			if err == nil && r.NodeID != m.ID {
				err = fmt.Errorf("%w: %s answered as %q, not %s", block.ErrUnavailable, m.HTTPAddr, r.NodeID, m.ID)
			}
			if err != nil {
				f.calls.WithLabelValues("failed").Inc()
				f.log.Warn("session end not acknowledged", "member", m.ID, "namespace", ns, "session", session, "err", err)
				return
			}
			f.calls.WithLabelValues("acked").Inc()
			f.blocks.Add(float64(r.Released))
			mu.Lock()
			res.Acked++
			res.Released += r.Released
			mu.Unlock()
		})
	}
	wg.Wait()
	f.calls.WithLabelValues("skipped").Add(float64(res.Skipped))
	level := slog.LevelInfo
	if res.Asked+res.Skipped == 0 {
		level = slog.LevelDebug // a single node: nobody else to tell
	}
	f.log.Log(ctx, level, "session ended on the cluster", "namespace", ns, "session", session,
		"asked", res.Asked, "acked", res.Acked, "skipped", res.Skipped, "released", res.Released)
	return res
}

// EndSessionOnPeers implements ctxstore/cluster.SessionPeers.
func (f *SessionFanout) EndSessionOnPeers(ctx context.Context, ns string, session uint64) {
	f.EndSession(ctx, ns, session)
}

// client returns the client of a member address, one per address so
// connections are reused; bounded by the cluster's size.
func (f *SessionFanout) client(addr string) *Client {
	f.mu.Lock()
	defer f.mu.Unlock()
	cl := f.clients[addr]
	if cl == nil {
		if len(f.clients) > 1024 {
			clear(f.clients)
		}
		cl = NewClient(addr, f.opts...)
		f.clients[addr] = cl
	}
	return cl
}
