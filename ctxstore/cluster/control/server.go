package control

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
)

// Server serves a node's control endpoints (PathJoin, PathPropose,
// PathReadIndex, PathSessionEnd, PathTraffic) as an http.Handler, which
// ctxd mounts on its HTTP API at each of Patterns. Its Route and Relay are
// the shared server side of every cluster endpoint: gateway/clusterapi
// serves the operator endpoints through them.
type Server struct {
	node cluster.Membership
	fwd  ForwardTarget
	log  *slog.Logger
	cfg  Config
	mux  *http.ServeMux
}

// Patterns are the HTTP API patterns ctxd mounts a Server at: each control
// path, whole (any other path under /v1/cluster/, an unknown one included,
// stays gateway/clusterapi's).
func Patterns() []string {
	return []string{PathJoin, PathPropose, PathReadIndex, PathSessionEnd, PathTraffic}
}

// NewServer returns the control endpoints of node. fwd executes forwarded
// proposals on the leader (nil: PathPropose answers 503). Options set the
// shared token, timeouts, the HTTP client used to relay to the leader,
// and the node's session releaser (WithSessions) and traffic counters
// (WithTraffic); an invalid option set panics.
func NewServer(node cluster.Membership, fwd ForwardTarget, log *slog.Logger, opts ...Option) *Server {
	if log == nil {
		log = slog.Default()
	}
	// The log lines keep the component of the cluster API they came
	// from before the split: control serves part of that API.
	s := &Server{node: node, fwd: fwd, log: log.With("component", "clusterapi"), cfg: build(opts), mux: http.NewServeMux()}
	s.Route(s.mux, "POST "+PathJoin, true, s.join)
	s.Route(s.mux, "POST "+PathPropose, true, s.propose)
	s.Route(s.mux, "POST "+PathReadIndex, true, s.readIndex)
	s.Route(s.mux, "GET "+PathTraffic, true, s.traffic)
	s.Route(s.mux, "POST "+PathSessionEnd, true, s.sessionEnd)
	s.Route(s.mux, "/", false, func(_ http.ResponseWriter, r *http.Request) error {
		return fmt.Errorf("%w: no cluster endpoint %s %s", block.ErrNotFound, r.Method, r.URL.Path)
	})
	return s
}

// ServeHTTP serves the control endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Node is the membership the server answers for.
func (s *Server) Node() cluster.Membership { return s.node }

// Config is the server's configuration.
func (s *Server) Config() Config { return s.cfg }

// Log is the server's logger.
func (s *Server) Log() *slog.Logger { return s.log }

// Route registers fn on mux under pattern. When auth is set and the
// server has a token, a request without it is refused (401). An error fn
// returns is sent as the standard JSON error reply, with the leader's
// address in HeaderLeader and HeaderLeaderID when it is
// cluster.ErrNotLeader and the leader is known.
func (s *Server) Route(mux *http.ServeMux, pattern string, auth bool, fn func(http.ResponseWriter, *http.Request) error) {
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		var err error
		if auth && !s.TokenOK(r) {
			err = fmt.Errorf("%w: missing or wrong %s", block.ErrUnauthenticated, HeaderToken)
		} else {
			err = fn(w, r)
		}
		if err != nil {
			s.replyError(w, r, err)
		}
	})
}

// TokenOK reports whether r carries the cluster's token (HeaderToken,
// compared in constant time), or the server has none.
func (s *Server) TokenOK(r *http.Request) bool {
	return s.cfg.Token == "" || subtle.ConstantTimeCompare([]byte(r.Header.Get(HeaderToken)), []byte(s.cfg.Token)) == 1
}

func (s *Server) replyError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, cluster.ErrNotLeader) {
		if lm, ok := s.node.LeaderMember(); ok && lm.HTTPAddr != "" {
			w.Header().Set(HeaderLeader, lm.HTTPAddr)
			w.Header().Set(HeaderLeaderID, lm.ID)
		}
	}
	s.log.Debug("cluster request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	writeError(w, err)
}

// ReadBody reads a request body bounded by Config.MaxBodyBytes.
func (s *Server) ReadBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, fmt.Errorf("%w: body over %d bytes", block.ErrTooLarge, s.cfg.MaxBodyBytes)
		}
		return nil, fmt.Errorf("%w: reading body: %v", block.ErrInvalidArgument, err)
	}
	return b, nil
}

// NotLeader is the error of a leader-only request on another node; the
// error reply carries the leader's HTTP address when it is known.
func (s *Server) NotLeader() error {
	id, addr := s.node.Leader()
	return &cluster.NotLeaderError{LeaderID: id, LeaderAddr: addr}
}

// WaitNewLeader waits until a leader other than prev is known (with an
// HTTP address when needHTTP) and returns its id.
func (s *Server) WaitNewLeader(ctx context.Context, prev string, needHTTP bool) (string, error) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if id, _ := s.node.Leader(); id != "" && id != prev {
			if !needHTTP {
				return id, nil
			}
			if lm, ok := s.node.LeaderMember(); ok && lm.ID == id && lm.HTTPAddr != "" {
				return id, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%w: no new leader after the transfer: %v", block.ErrUnavailable, ctx.Err())
		case <-t.C:
		}
	}
}

// leaderToForward returns the leader to relay a request to. While no leader
// is known (an election, or the moments after a leadership transfer before
// the new leader's first heartbeat reaches this node), a node that belongs
// to a configuration waits up to Config.LeaderWait (WaitNewLeader, with
// this node as the leader to look past) instead of failing a request that
// a retry a few milliseconds later would complete. A node in no
// configuration (not joined yet) answers at once: it cannot learn a leader
// by waiting, and Join relies on that answer to move on to the next seed.
// ok is false when no other node is known to lead with an HTTP address.
func (s *Server) leaderToForward(ctx context.Context) (cluster.Member, bool) {
	if s.inConfiguration() {
		wctx, cancel := context.WithTimeout(ctx, s.cfg.LeaderWait)
		_, _ = s.WaitNewLeader(wctx, s.node.ID(), true)
		cancel()
	}
	lm, ok := s.node.LeaderMember()
	return lm, ok && lm.HTTPAddr != "" && lm.ID != s.node.ID()
}

// inConfiguration reports whether this node is in its Raft configuration.
func (s *Server) inConfiguration() bool {
	for _, sv := range s.node.Servers() {
		if sv.ID == s.node.ID() {
			return true
		}
	}
	return false
}

// Relay sends a leader-only request (its already-read body) from this
// node to the leader and the leader's reply back to w: the follower side
// of join, and of gateway/clusterapi's membership requests. A request that
// was already relayed once (HeaderForwardedBy) is refused with 503 (and the
// leader hint) unless again is set: the remove-the-leader path, which has
// just handed leadership over.
func (s *Server) Relay(w http.ResponseWriter, r *http.Request, body []byte, again bool) error {
	if r.Header.Get(HeaderForwardedBy) != "" && !again {
		return s.NotLeader()
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	lm, ok := s.leaderToForward(ctx)
	if !ok {
		return s.NotLeader()
	}
	resp, out, err := s.relayTo(ctx, r.URL.Path, body, lm.ID, lm.HTTPAddr) //nolint:bodyclose // relayTo reads and closes the body
	if err != nil {
		return err
	}
	// This node's view of the leader can lag a leadership change: the
	// node it relayed to answers 503 and names the new leader. It ran
	// nothing, so follow the hint once rather than fail the request.
	if hint := resp.Header.Get(HeaderLeader); resp.StatusCode == http.StatusServiceUnavailable && hint != "" && hint != lm.HTTPAddr {
		resp, out, err = s.relayTo(ctx, r.URL.Path, body, resp.Header.Get(HeaderLeaderID), hint) //nolint:bodyclose // relayTo reads and closes the body
		if err != nil {
			return err
		}
	}
	for _, k := range []string{"Content-Type", httpwire.HeaderErrorCode, HeaderLeader, HeaderLeaderID} {
		if v := resp.Header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(out)
	return nil
}

// relayTo posts body to path on the leader at addr and returns its
// reply (with the body read, up to MaxBodyBytes).
func (s *Server) relayTo(ctx context.Context, path string, body []byte, id, addr string) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.baseURL(addr)+path, bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: forwarding to leader %s: %v", block.ErrUnavailable, id, err)
	}
	req.Header.Set("Content-Type", httpwire.ContentTypeJSON)
	req.Header.Set(HeaderForwardedBy, s.node.ID())
	if s.cfg.Token != "" {
		req.Header.Set(HeaderToken, s.cfg.Token)
	}
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: forwarding to leader %s at %s: %v", block.ErrUnavailable, id, addr, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: reading the leader's reply: %v", block.ErrUnavailable, err)
	}
	return resp, out, nil
}
