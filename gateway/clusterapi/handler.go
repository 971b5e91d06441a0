package clusterapi

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
)

// ForwardTarget executes a proposal a follower forwarded to this node (the
// leader): the data-path backend decodes req, commits it and encodes the
// reply. Errors are sent back as the standard JSON error.
type ForwardTarget interface {
	HandleForwarded(ctx context.Context, req []byte) ([]byte, error)
}

// Drainer is the data path's side of a drain (ctxstore/cluster.Backend
// implements it). When the ForwardTarget given to Handler is also a
// Drainer, the handler serves POST drain, lists drains in status, and
// refuses to remove a member that the index still places shards on unless
// the removal is forced.
type Drainer interface {
	Drain(ctx context.Context, id string) (cluster.DrainStatus, error)
	CancelDrain(ctx context.Context, id string) error
	Drains() []cluster.DrainStatus
	Holding(id string) (shards, blocks int)
}

var _ Drainer = (*cluster.Backend)(nil)

// Paths, relative to the mount point /v1/cluster/.
const (
	PathStatus   = "/v1/cluster/status"
	PathJoin     = "/v1/cluster/join"
	PathRemove   = "/v1/cluster/remove"
	PathTransfer = "/v1/cluster/transfer-leadership"
	PathPropose  = "/v1/cluster/internal/propose"
	PathRepair   = "/v1/cluster/repair"
	PathDrain    = "/v1/cluster/drain"
)

type handler struct {
	node   cluster.Membership
	fwd    ForwardTarget
	status func() any
	log    *slog.Logger
	cfg    Config
	mux    *http.ServeMux
}

// Handler serves the cluster API of node; ctxd mounts it with
// httpapi.Server.Mount("/v1/cluster/", h). fwd executes forwarded
// proposals on the leader (nil: internal/propose answers 503); when it is
// also a Drainer, drains are served (otherwise drain answers 400). status,
// when set, supplies the "extra" object of the status reply, and its
// "repair" field is what GET /v1/cluster/repair returns. Options set the
// shared token, timeouts and the HTTP client used to forward to the
// leader; an invalid option set panics.
func Handler(node cluster.Membership, fwd ForwardTarget, status func() any, log *slog.Logger, opts ...Option) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	h := &handler{node: node, fwd: fwd, status: status, log: log.With("component", "clusterapi"), cfg: build(opts), mux: http.NewServeMux()}
	h.route("GET "+PathStatus, h.cfg.ProtectStatus, h.getStatus)
	h.route("POST "+PathJoin, true, h.join)
	h.route("POST "+PathRemove, true, h.remove)
	h.route("POST "+PathTransfer, true, h.transfer)
	h.route("POST "+PathPropose, true, h.propose)
	h.route("POST "+PathReadIndex, true, h.readIndex)
	h.route("GET "+PathRepair, h.cfg.ProtectStatus, h.repair)
	h.keyRoute("GET "+PathKeys, h.listKeys)
	h.keyRoute("POST "+PathKeys, h.createKey)
	h.keyRoute("POST "+PathKeysRevoke, h.revokeKey)
	h.route("POST "+PathDrain, true, h.drain)
	h.route("GET "+PathTraffic, true, h.traffic)
	h.route("POST "+PathSessionEnd, true, h.sessionEnd)
	h.route("/v1/cluster/", false, func(_ http.ResponseWriter, r *http.Request) error {
		return fmt.Errorf("%w: no cluster endpoint %s %s", block.ErrNotFound, r.Method, r.URL.Path)
	})
	return h.mux
}

func (h *handler) route(pattern string, auth bool, fn func(http.ResponseWriter, *http.Request) error) {
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		var err error
		if auth && h.cfg.Token != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get(HeaderToken)), []byte(h.cfg.Token)) != 1 {
			err = fmt.Errorf("%w: missing or wrong %s", block.ErrUnauthenticated, HeaderToken)
		} else {
			err = fn(w, r)
		}
		if err != nil {
			h.writeError(w, r, err)
		}
	})
}

// keyRoute serves an access-key endpoint: always behind the token, and
// refused outright on a handler that has none.
func (h *handler) keyRoute(pattern string, fn func(http.ResponseWriter, *http.Request) error) {
	h.route(pattern, true, func(w http.ResponseWriter, r *http.Request) error {
		switch {
		case h.cfg.Token == "":
			return fmt.Errorf("%w: access keys are managed only on a node with a cluster secret", block.ErrUnauthenticated)
		case h.cfg.Keys == nil:
			return fmt.Errorf("%w: node %s manages no access keys", block.ErrNotFound, h.node.ID())
		}
		return fn(w, r)
	})
}

func (h *handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, cluster.ErrNotLeader) {
		if lm, ok := h.node.LeaderMember(); ok && lm.HTTPAddr != "" {
			w.Header().Set(HeaderLeader, lm.HTTPAddr)
			w.Header().Set(HeaderLeaderID, lm.ID)
		}
	}
	h.log.Debug("cluster request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	writeErrorBody(w, err)
}

func (h *handler) getStatus(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, h.snapshot())
	return nil
}

// Snapshot is the reply of GET /v1/cluster/status built in process, with
// no HTTP hop: what the handler serves for the same node, fwd and status
// (the operator console reads it).
func Snapshot(node cluster.Membership, fwd ForwardTarget, status func() any, log *slog.Logger) Status {
	if log == nil {
		log = slog.Default()
	}
	h := &handler{node: node, fwd: fwd, status: status, log: log}
	return h.snapshot()
}

// snapshot builds the status reply from this node's own state.
func (h *handler) snapshot() Status {
	stats := h.node.Stats()
	st := Status{NodeID: h.node.ID(), State: strings.ToLower(stats["state"]), Raft: raftStatus(stats), Members: []Member{}}
	if f := h.node.Fault(); f != nil {
		st.Raft.Fault = f.Error()
	}
	seen := map[string]bool{}
	for _, s := range h.node.Servers() {
		m := Member{ID: s.ID, State: "unknown"}
		if s.HasState {
			m = FromMember(s.Member)
		}
		m.RaftAddr, m.Voter, m.Leader = s.Addr, s.Voter, s.Leader
		seen[s.ID] = true
		st.Members = append(st.Members, m)
	}
	for _, fm := range h.node.Members() {
		if !seen[fm.ID] {
			st.Members = append(st.Members, FromMember(fm))
		}
	}
	slices.SortFunc(st.Members, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	if d, ok := h.fwd.(Drainer); ok {
		st.Drains = d.Drains()
	}
	if lid, laddr := h.node.Leader(); lid != "" {
		l := Member{ID: lid, RaftAddr: laddr, State: "unknown", Leader: true}
		for _, m := range st.Members {
			if m.ID == lid {
				l = m
				l.Leader = true
			}
		}
		st.Leader = &l
	}
	if h.status != nil {
		if v := h.status(); v != nil {
			b, err := json.Marshal(v)
			if err != nil {
				h.log.Warn("encoding status extra", "err", err)
			} else {
				st.Extra = b
			}
		}
	}
	return st
}

// readBody reads a bounded request body.
func (h *handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, fmt.Errorf("%w: body over %d bytes", block.ErrTooLarge, h.cfg.MaxBodyBytes)
		}
		return nil, fmt.Errorf("%w: reading body: %v", block.ErrInvalidArgument, err)
	}
	return b, nil
}

func (h *handler) join(w http.ResponseWriter, r *http.Request) error {
	body, err := h.readBody(w, r)
	if err != nil {
		return err
	}
	var req Member
	if err := decodeJSONBytes(body, &req, false); err != nil {
		return err
	}
	m, err := req.FSM()
	if err != nil {
		return err
	}
	if !h.node.IsLeader() {
		return h.forward(w, r, body, false)
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	if err := h.node.Join(ctx, m); err != nil {
		return err
	}
	h.log.Info("member joined", "member", m.ID, "raft_addr", m.RaftAddr, "http_addr", m.HTTPAddr, "via", r.Header.Get(HeaderForwardedBy))
	out := FromMember(m)
	out.Voter = true
	writeJSON(w, http.StatusOK, JoinResponse{Member: out})
	return nil
}

// readIDRequest reads a JSON body that names a member (remove, drain)
// into req, whose id field is *id, and returns the body for forwarding.
func (h *handler) readIDRequest(w http.ResponseWriter, r *http.Request, what string, req any, id *string) ([]byte, error) {
	body, err := h.readBody(w, r)
	if err != nil {
		return nil, err
	}
	if err := decodeJSONBytes(body, req, false); err != nil {
		return nil, err
	}
	if *id == "" {
		return nil, fmt.Errorf("%w: %s: id is required", block.ErrInvalidArgument, what)
	}
	return body, nil
}

func (h *handler) remove(w http.ResponseWriter, r *http.Request) error {
	var req RemoveRequest
	body, err := h.readIDRequest(w, r, "remove", &req, &req.ID)
	if err != nil {
		return err
	}
	if !h.node.IsLeader() {
		return h.forward(w, r, body, false)
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	known, voters := false, 0
	for _, s := range h.node.Servers() {
		known = known || s.ID == req.ID
		if s.Voter {
			voters++
		}
	}
	if _, ok := h.node.Member(req.ID); !known && !ok {
		return fmt.Errorf("%w: no member %q", block.ErrNotFound, req.ID)
	}
	if d, ok := h.fwd.(Drainer); ok && !req.Force {
		if shards, blocks := d.Holding(req.ID); shards > 0 {
			return fmt.Errorf("%w: %s still holds %d shards of %d blocks: drain it first (ctxctl cluster drain %s), or force the removal to give them up (ctxctl cluster remove --force %s)",
				block.ErrInvalidArgument, req.ID, shards, blocks, req.ID, req.ID)
		}
	}
	if req.ID == h.node.ID() {
		// The leader cannot commit its own removal and then mark itself
		// left: hand leadership over first and let the new leader do it.
		if voters <= 1 {
			return fmt.Errorf("%w: %q is the only voter; it cannot be removed", block.ErrInvalidArgument, req.ID)
		}
		if err := h.node.TransferLeadership(ctx, ""); err != nil {
			return fmt.Errorf("removing the leader: transferring leadership first: %w", err)
		}
		if _, err := h.waitNewLeader(ctx, req.ID, true); err != nil {
			return err
		}
		return h.forward(w, r, body, true)
	}
	if err := h.node.Remove(ctx, req.ID); err != nil {
		return err
	}
	h.log.Info("member removed", "member", req.ID, "forced", req.Force, "via", r.Header.Get(HeaderForwardedBy))
	writeJSON(w, http.StatusOK, RemoveResponse{Removed: req.ID})
	return nil
}

func (h *handler) drain(w http.ResponseWriter, r *http.Request) error {
	var req DrainRequest
	body, err := h.readIDRequest(w, r, "drain", &req, &req.ID)
	if err != nil {
		return err
	}
	d, ok := h.fwd.(Drainer)
	if !ok {
		return fmt.Errorf("%w: node %s has no data path to drain", block.ErrInvalidArgument, h.node.ID())
	}
	if !h.node.IsLeader() {
		return h.forward(w, r, body, false)
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	if req.Cancel {
		if err := d.CancelDrain(ctx, req.ID); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, DrainResponse{ID: req.ID, State: cluster.MemberAlive.String()})
		return nil
	}
	st, err := d.Drain(ctx, req.ID)
	if err != nil {
		return err
	}
	h.log.Info("member draining", "member", req.ID, "shards", st.ShardsLeft, "blocks", st.BlocksLeft, "via", r.Header.Get(HeaderForwardedBy))
	writeJSON(w, http.StatusOK, DrainResponse{ID: req.ID, State: cluster.MemberDraining.String(), Drain: &st})
	return nil
}

func (h *handler) transfer(w http.ResponseWriter, r *http.Request) error {
	body, err := h.readBody(w, r)
	if err != nil {
		return err
	}
	var req TransferRequest
	if err := decodeJSONBytes(body, &req, true); err != nil {
		return err
	}
	if !h.node.IsLeader() {
		return h.forward(w, r, body, false)
	}
	prev := h.node.ID()
	if req.ID == prev {
		writeJSON(w, http.StatusOK, TransferResponse{Previous: prev, Leader: prev})
		return nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	if err := h.node.TransferLeadership(ctx, req.ID); err != nil {
		return err
	}
	leader, _ := h.waitNewLeader(ctx, prev, false)
	h.log.Info("leadership transferred", "from", prev, "to", leader)
	writeJSON(w, http.StatusOK, TransferResponse{Previous: prev, Leader: leader})
	return nil
}

// waitNewLeader waits until a leader other than prev is known (with an
// HTTP address when needHTTP) and returns its id.
func (h *handler) waitNewLeader(ctx context.Context, prev string, needHTTP bool) (string, error) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if id, _ := h.node.Leader(); id != "" && id != prev {
			if !needHTTP {
				return id, nil
			}
			if lm, ok := h.node.LeaderMember(); ok && lm.ID == id && lm.HTTPAddr != "" {
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

func (h *handler) propose(w http.ResponseWriter, r *http.Request) error {
	if h.fwd == nil {
		return fmt.Errorf("%w: node %s takes no forwarded proposals", block.ErrUnavailable, h.node.ID())
	}
	if !h.node.IsLeader() {
		return h.notLeader()
	}
	body, err := h.readBody(w, r)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	out, err := h.fwd.HandleForwarded(ctx, body)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", httpwire.ContentTypeBinary)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
	return nil
}

func (h *handler) repair(w http.ResponseWriter, _ *http.Request) error {
	noRepair := fmt.Errorf("%w: node %s reports no repair progress", block.ErrNotFound, h.node.ID())
	if h.status == nil {
		return noRepair
	}
	v := h.status()
	if v == nil {
		return noRepair
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding status: %w", err)
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(b, &fields) != nil || fields["repair"] == nil {
		return noRepair
	}
	writeJSON(w, http.StatusOK, RepairResponse{NodeID: h.node.ID(), Repair: fields["repair"]})
	return nil
}

// notLeader is the error of a leader-only request on another node; the
// error reply carries the leader's HTTP address when it is known.
func (h *handler) notLeader() error {
	id, addr := h.node.Leader()
	return &cluster.NotLeaderError{LeaderID: id, LeaderAddr: addr}
}

// leaderToForward returns the leader to relay a request to. While no leader
// is known (an election, or the moments after a leadership transfer before
// the new leader's first heartbeat reaches this node), a node that belongs
// to a configuration waits up to Config.LeaderWait (waitNewLeader, with this node
// as the leader to look past) instead of failing a request that a retry a
// few milliseconds later would complete. A node in no configuration (not
// joined yet) answers at once: it cannot learn a leader by waiting, and Join
// relies on that answer to move on to the next seed. ok is false when no
// other node is known to lead with an HTTP address.
func (h *handler) leaderToForward(ctx context.Context) (cluster.Member, bool) {
	if h.inConfiguration() {
		wctx, cancel := context.WithTimeout(ctx, h.cfg.LeaderWait)
		_, _ = h.waitNewLeader(wctx, h.node.ID(), true)
		cancel()
	}
	lm, ok := h.node.LeaderMember()
	return lm, ok && lm.HTTPAddr != "" && lm.ID != h.node.ID()
}

// inConfiguration reports whether this node is in its Raft configuration.
func (h *handler) inConfiguration() bool {
	for _, s := range h.node.Servers() {
		if s.ID == h.node.ID() {
			return true
		}
	}
	return false
}

// forward relays a membership request to the leader and its reply back.
// A request that was already forwarded once is refused with 503 (and the
// leader hint) unless again is set: the remove-the-leader path, which has
// just handed leadership over.
func (h *handler) forward(w http.ResponseWriter, r *http.Request, body []byte, again bool) error {
	if r.Header.Get(HeaderForwardedBy) != "" && !again {
		return h.notLeader()
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	lm, ok := h.leaderToForward(ctx)
	if !ok {
		return h.notLeader()
	}
	resp, out, err := h.forwardTo(ctx, r.URL.Path, body, lm.ID, lm.HTTPAddr) //nolint:bodyclose // forwardTo reads and closes the body
	if err != nil {
		return err
	}
	// This node's view of the leader can lag a leadership change: the
	// node it forwarded to answers 503 and names the new leader. It ran
	// nothing, so follow the hint once rather than fail the request.
	if hint := resp.Header.Get(HeaderLeader); resp.StatusCode == http.StatusServiceUnavailable && hint != "" && hint != lm.HTTPAddr {
		resp, out, err = h.forwardTo(ctx, r.URL.Path, body, resp.Header.Get(HeaderLeaderID), hint) //nolint:bodyclose // forwardTo reads and closes the body
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

// forwardTo posts body to path on the leader at addr and returns its
// reply (with the body read, up to MaxBodyBytes).
func (h *handler) forwardTo(ctx context.Context, path string, body []byte, id, addr string) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.cfg.baseURL(addr)+path, bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: forwarding to leader %s: %v", block.ErrUnavailable, id, err)
	}
	req.Header.Set("Content-Type", httpwire.ContentTypeJSON)
	req.Header.Set(HeaderForwardedBy, h.node.ID())
	if h.cfg.Token != "" {
		req.Header.Set(HeaderToken, h.cfg.Token)
	}
	resp, err := h.cfg.Client.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: forwarding to leader %s at %s: %v", block.ErrUnavailable, id, addr, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, h.cfg.MaxBodyBytes))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: reading the leader's reply: %v", block.ErrUnavailable, err)
	}
	return resp, out, nil
}
