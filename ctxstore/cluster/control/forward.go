package control

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
)

// PathPropose is the leader-only endpoint that followers forward index
// proposals to (Forwarder.Forward). Internal: behind the cluster token
// when the node has one.
const PathPropose = "/v1/cluster/internal/propose"

// ForwardTarget executes a proposal a follower forwarded to this node (the
// leader): the data-path backend (ctxstore/cluster.Backend) decodes req,
// commits it and encodes the reply. Errors are sent back as the standard
// JSON error.
type ForwardTarget interface {
	HandleForwarded(ctx context.Context, req []byte) ([]byte, error)
}

var _ ForwardTarget = (*cluster.Backend)(nil)

// propose serves PathPropose on the leader (else 503 with the leader hint).
func (s *Server) propose(w http.ResponseWriter, r *http.Request) error {
	if s.fwd == nil {
		return fmt.Errorf("%w: node %s takes no forwarded proposals", block.ErrUnavailable, s.node.ID())
	}
	if !s.node.IsLeader() {
		return s.NotLeader()
	}
	body, err := s.ReadBody(w, r)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	out, err := s.fwd.HandleForwarded(ctx, body)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", httpwire.ContentTypeBinary)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
	return nil
}

// Forwarder sends proposals from a follower to the leader's PathPropose
// endpoint, and read-index requests to its PathReadIndex: ctxd gives it
// to ctxstore/cluster.New as the cluster's Forwarder and ReadIndexer.
type Forwarder struct {
	cfg Config
}

var (
	_ cluster.Forwarder   = (*Forwarder)(nil)
	_ cluster.ReadIndexer = (*Forwarder)(nil)
)

// NewForwarder returns a forwarder over httpClient (nil: a client with
// the configured timeout). Options set the token and body bound.
func NewForwarder(httpClient *http.Client, opts ...Option) *Forwarder {
	if httpClient != nil {
		opts = append(opts, WithHTTPClient(httpClient))
	}
	return &Forwarder{cfg: build(opts)}
}

// Forward posts req to leader's PathPropose endpoint and returns the
// reply's bytes. Every failure to get an answer from a leader (no HTTP
// address, transport error, timeout, a node that is not the leader, a 5xx
// reply) wraps block.ErrUnavailable, and a 503 naming the current leader
// is a *LeaderHintError (errors.Is cluster.ErrNotLeader). A 4xx reply keeps
// its own sentinel (block.ErrInvalidArgument, block.ErrConflict...): the
// leader ran the proposal and refused it.
func (f *Forwarder) Forward(ctx context.Context, leader cluster.Member, req []byte) ([]byte, error) {
	return f.post(ctx, leader, PathPropose, httpwire.ContentTypeBinary, req)
}

// post sends body to one of leader's internal endpoints and returns the
// reply's bytes, with Forward's error mapping.
func (f *Forwarder) post(ctx context.Context, leader cluster.Member, path, contentType string, body []byte) ([]byte, error) {
	if leader.HTTPAddr == "" {
		return nil, fmt.Errorf("%w: leader %q has no HTTP address", block.ErrUnavailable, leader.ID)
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, f.cfg.baseURL(leader.HTTPAddr)+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: leader %s address %q: %v", block.ErrUnavailable, leader.ID, leader.HTTPAddr, err)
	}
	hreq.Header.Set("Content-Type", contentType)
	out, err := send(f.cfg, hreq)
	if err == nil {
		return out, nil
	}
	if errors.Is(err, block.ErrUnavailable) || errors.Is(err, block.ErrNoSpace) || clientError(err) {
		return nil, err
	}
	return nil, fmt.Errorf("%w: %s to leader %s: %w", block.ErrUnavailable, path, leader.ID, err)
}

// clientError reports a 4xx-class error: the leader refused the request.
func clientError(err error) bool {
	for _, s := range []error{block.ErrInvalidArgument, block.ErrInvalidKey, block.ErrConflict, block.ErrNotFound, block.ErrUnknownNamespace,
		block.ErrTooLarge, block.ErrChecksum, block.ErrUnauthenticated, block.ErrPermissionDenied, block.ErrNamespaceExists, block.ErrNamespaceNotEmpty} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
