package control

import (
	"context"
	"fmt"
	"net/http"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// PathTraffic is a member's per-namespace traffic counters, what its
// /metrics serves as ctxtier_namespace_*: the operator console of any
// member sums the members' replies into the cluster's traffic. Internal:
// it always requires the cluster token.
const PathTraffic = "/v1/cluster/internal/traffic"

// TrafficResponse is the reply of PathTraffic.
type TrafficResponse struct {
	// NodeID is the member that answered.
	NodeID string `json:"node_id"`
	// Namespaces are the totals since that member started of every
	// namespace with traffic through it, sorted by name.
	Namespaces []ctxstore.TrafficCount `json:"namespaces"`
}

// WithTraffic sets Config.Traffic.
func WithTraffic(src func() []ctxstore.TrafficCount) Option {
	return func(c *Config) { c.Traffic = src }
}

// traffic serves PathTraffic: behind the token, refused outright on a
// handler that has none (like the access-key endpoints).
func (s *Server) traffic(w http.ResponseWriter, _ *http.Request) error {
	switch {
	case s.cfg.Token == "":
		return fmt.Errorf("%w: traffic counters are served only on a node with a cluster secret", block.ErrUnauthenticated)
	case s.cfg.Traffic == nil:
		return fmt.Errorf("%w: node %s serves no traffic counters", block.ErrNotFound, s.node.ID())
	}
	counts := s.cfg.Traffic()
	if counts == nil {
		counts = []ctxstore.TrafficCount{}
	}
	WriteJSON(w, http.StatusOK, TrafficResponse{NodeID: s.node.ID(), Namespaces: counts})
	return nil
}

// Traffic returns the node's per-namespace traffic counters
// (PathTraffic); the client must carry the cluster token.
func (c *Client) Traffic(ctx context.Context) (TrafficResponse, error) {
	var out TrafficResponse
	err := c.Do(ctx, http.MethodGet, PathTraffic, nil, &out)
	return out, err
}
