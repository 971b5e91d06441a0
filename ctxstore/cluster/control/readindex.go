package control

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
)

// PathReadIndex is the leader's read-index endpoint: a follower serving a
// linearizable read posts to it (with the cluster token) and waits until
// its own FSM has applied the returned index.
const PathReadIndex = "/v1/cluster/internal/read-index"

// ReadIndexResponse is the reply of PathReadIndex.
type ReadIndexResponse struct {
	// Index is the Raft log index the leader's FSM had applied once a
	// barrier confirmed its leadership (cluster.Membership.ReadIndex).
	Index uint64 `json:"index"`
	// LeaderID is the node that answered.
	LeaderID string `json:"leader_id"`
}

// readIndex answers a follower's read-index request on the leader (else
// 503 with the leader hint). Concurrent requests share Raft barriers.
func (s *Server) readIndex(w http.ResponseWriter, r *http.Request) error {
	if !s.node.IsLeader() {
		return s.NotLeader()
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	idx, err := s.node.ReadIndex(ctx)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, ReadIndexResponse{Index: idx, LeaderID: s.node.ID()})
	return nil
}

// ReadIndex asks leader for its read index (PathReadIndex): one round
// trip. Errors are mapped as Forward's are; ctxstore/cluster uses it for
// linearizable reads on a follower.
func (f *Forwarder) ReadIndex(ctx context.Context, leader cluster.Member) (uint64, error) {
	out, err := f.post(ctx, leader, PathReadIndex, httpwire.ContentTypeJSON, nil)
	if err != nil {
		return 0, err
	}
	var resp ReadIndexResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		return 0, fmt.Errorf("%w: read index from leader %s: bad reply: %v", block.ErrUnavailable, leader.ID, err)
	}
	return resp.Index, nil
}
