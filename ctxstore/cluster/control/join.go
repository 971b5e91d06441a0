package control

import (
	"context"
	"net/http"
)

// PathJoin adds a member: a starting node posts its own record (Member)
// to any member, which relays it to the leader (Join). Behind the cluster
// token when the node has one. ctxctl cluster join calls it too.
const PathJoin = "/v1/cluster/join"

// join serves PathJoin: on the leader it commits the member, elsewhere it
// relays the request to the leader.
func (s *Server) join(w http.ResponseWriter, r *http.Request) error {
	body, err := s.ReadBody(w, r)
	if err != nil {
		return err
	}
	var req Member
	if err := DecodeJSONBytes(body, &req, false); err != nil {
		return err
	}
	m, err := req.FSM()
	if err != nil {
		return err
	}
	if !s.node.IsLeader() {
		return s.Relay(w, r, body, false)
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	if err := s.node.Join(ctx, m); err != nil {
		return err
	}
	s.log.Info("member joined", "member", m.ID, "raft_addr", m.RaftAddr, "http_addr", m.HTTPAddr, "via", r.Header.Get(HeaderForwardedBy))
	out := FromMember(m)
	out.Voter = true
	WriteJSON(w, http.StatusOK, JoinResponse{Member: out})
	return nil
}
