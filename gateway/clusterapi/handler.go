package clusterapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
)

// Drainer is the data path's side of a drain (ctxstore/cluster.Backend
// implements it). When Handler is given one, it serves POST drain, lists
// drains in status, and refuses to remove a member that the index still
// places shards on unless the removal is forced.
type Drainer interface {
	Drain(ctx context.Context, id string) (cluster.DrainStatus, error)
	CancelDrain(ctx context.Context, id string) error
	Drains() []cluster.DrainStatus
	Holding(id string) (shards, blocks int)
}

var _ Drainer = (*cluster.Backend)(nil)

// Paths of the operator endpoints, under the mount point /v1/cluster/
// (the node-to-node ones, join and /v1/cluster/internal/, are control's).
const (
	PathStatus   = "/v1/cluster/status"
	PathRemove   = "/v1/cluster/remove"
	PathTransfer = "/v1/cluster/transfer-leadership"
	PathRepair   = "/v1/cluster/repair"
	PathDrain    = "/v1/cluster/drain"
)

type handler struct {
	node   cluster.Membership
	ctl    *control.Server
	drain  Drainer
	status func() any
	log    *slog.Logger
	cfg    Config
	// timeout bounds one membership change on the leader (control's
	// Config.Timeout).
	timeout time.Duration
	mux     *http.ServeMux
}

// Handler serves the operator endpoints of the cluster API of ctl's node;
// ctxd mounts it with httpapi.Server.MountOwnAuth("/v1/cluster/", h), and
// ctl itself at control.Patterns beside it. ctl supplies the shared
// transport: the token check, the error replies with the leader hint, the
// relay of a membership request from a follower to the leader, and the
// timeouts. drain, when not nil, serves drains (otherwise drain answers
// 400). status, when set, supplies the "extra" object of the status reply,
// and its "repair" field is what GET /v1/cluster/repair returns.
func Handler(ctl *control.Server, drain Drainer, status func() any, log *slog.Logger, opts ...Option) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	cfg := DefaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	h := &handler{node: ctl.Node(), ctl: ctl, drain: drain, status: status, log: log.With("component", "clusterapi"), cfg: cfg,
		timeout: ctl.Config().Timeout, mux: http.NewServeMux()}
	h.statusRoute("GET "+PathStatus, h.getStatus)
	h.route("POST "+PathRemove, true, h.remove)
	h.route("POST "+PathTransfer, true, h.transfer)
	h.statusRoute("GET "+PathRepair, h.repair)
	h.keyRoute("GET "+PathKeys, h.listKeys)
	h.keyRoute("POST "+PathKeys, h.createKey)
	h.keyRoute("POST "+PathKeysRevoke, h.revokeKey)
	h.route("POST "+PathDrain, true, h.drainMember)
	h.route("/v1/cluster/", false, func(_ http.ResponseWriter, r *http.Request) error {
		return fmt.Errorf("%w: no cluster endpoint %s %s", block.ErrNotFound, r.Method, r.URL.Path)
	})
	return h.mux
}

// route serves fn behind the token when auth (control.Server.Route).
func (h *handler) route(pattern string, auth bool, fn func(http.ResponseWriter, *http.Request) error) {
	h.ctl.Route(h.mux, pattern, auth, fn)
}

// statusRoute serves a read of the cluster's state: open unless
// ProtectStatus, then behind the token or, with StatusReaders set, an
// access key's credentials.
func (h *handler) statusRoute(pattern string, fn func(http.ResponseWriter, *http.Request) error) {
	if !h.cfg.ProtectStatus || h.cfg.StatusReaders == nil {
		h.route(pattern, h.cfg.ProtectStatus, fn)
		return
	}
	h.route(pattern, false, func(w http.ResponseWriter, r *http.Request) error {
		// A request that sends the token is judged by it, and so is one
		// that sends no access-key credentials (header or presigned URL).
		keyCreds := r.Header.Get("Authorization") != "" || r.URL.Query().Get("X-Amz-Signature") != ""
		if r.Header.Get(control.HeaderToken) != "" || !keyCreds {
			if !h.ctl.TokenOK(r) {
				return fmt.Errorf("%w: missing or wrong %s, and no access key's credentials", block.ErrUnauthenticated, control.HeaderToken)
			}
			return fn(w, r)
		}
		if err := h.cfg.StatusReaders(r); err != nil {
			return err
		}
		return fn(w, r)
	})
}

// keyRoute serves an access-key endpoint: always behind the token, and
// refused outright on a handler that has none.
func (h *handler) keyRoute(pattern string, fn func(http.ResponseWriter, *http.Request) error) {
	h.route(pattern, true, func(w http.ResponseWriter, r *http.Request) error {
		switch {
		case h.ctl.Config().Token == "":
			return fmt.Errorf("%w: access keys are managed only on a node with a cluster secret", block.ErrUnauthenticated)
		case h.cfg.Keys == nil:
			return fmt.Errorf("%w: node %s manages no access keys", block.ErrNotFound, h.node.ID())
		}
		return fn(w, r)
	})
}

func (h *handler) getStatus(w http.ResponseWriter, _ *http.Request) error {
	control.WriteJSON(w, http.StatusOK, h.snapshot())
	return nil
}

// Snapshot is the reply of GET /v1/cluster/status built in process, with
// no HTTP hop: what the handler serves for the same node, drain and status
// (the operator console reads it).
func Snapshot(node cluster.Membership, drain Drainer, status func() any, log *slog.Logger) Status {
	if log == nil {
		log = slog.Default()
	}
	h := &handler{node: node, drain: drain, status: status, log: log}
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
			m = control.FromMember(s.Member)
		}
		m.RaftAddr, m.Voter, m.Leader = s.Addr, s.Voter, s.Leader
		seen[s.ID] = true
		st.Members = append(st.Members, m)
	}
	for _, fm := range h.node.Members() {
		if !seen[fm.ID] {
			st.Members = append(st.Members, control.FromMember(fm))
		}
	}
	slices.SortFunc(st.Members, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	if h.drain != nil {
		st.Drains = h.drain.Drains()
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

// readIDRequest reads a JSON body that names a member (remove, drain)
// into req, whose id field is *id, and returns the body for forwarding.
func (h *handler) readIDRequest(w http.ResponseWriter, r *http.Request, what string, req any, id *string) ([]byte, error) {
	body, err := h.ctl.ReadBody(w, r)
	if err != nil {
		return nil, err
	}
	if err := control.DecodeJSONBytes(body, req, false); err != nil {
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
		return h.ctl.Relay(w, r, body, false)
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
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
	if h.drain != nil && !req.Force {
		if shards, blocks := h.drain.Holding(req.ID); shards > 0 {
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
		if _, err := h.ctl.WaitNewLeader(ctx, req.ID, true); err != nil {
			return err
		}
		return h.ctl.Relay(w, r, body, true)
	}
	if err := h.node.Remove(ctx, req.ID); err != nil {
		return err
	}
	h.log.Info("member removed", "member", req.ID, "forced", req.Force, "via", r.Header.Get(control.HeaderForwardedBy))
	control.WriteJSON(w, http.StatusOK, RemoveResponse{Removed: req.ID})
	return nil
}

func (h *handler) drainMember(w http.ResponseWriter, r *http.Request) error {
	var req DrainRequest
	body, err := h.readIDRequest(w, r, "drain", &req, &req.ID)
	if err != nil {
		return err
	}
	d := h.drain
	if d == nil {
		return fmt.Errorf("%w: node %s has no data path to drain", block.ErrInvalidArgument, h.node.ID())
	}
	if !h.node.IsLeader() {
		return h.ctl.Relay(w, r, body, false)
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
	defer cancel()
	if req.Cancel {
		if err := d.CancelDrain(ctx, req.ID); err != nil {
			return err
		}
		control.WriteJSON(w, http.StatusOK, DrainResponse{ID: req.ID, State: cluster.MemberAlive.String()})
		return nil
	}
	st, err := d.Drain(ctx, req.ID)
	if err != nil {
		return err
	}
	h.log.Info("member draining", "member", req.ID, "shards", st.ShardsLeft, "blocks", st.BlocksLeft, "via", r.Header.Get(control.HeaderForwardedBy))
	control.WriteJSON(w, http.StatusOK, DrainResponse{ID: req.ID, State: cluster.MemberDraining.String(), Drain: &st})
	return nil
}

func (h *handler) transfer(w http.ResponseWriter, r *http.Request) error {
	body, err := h.ctl.ReadBody(w, r)
	if err != nil {
		return err
	}
	var req TransferRequest
	if err := control.DecodeJSONBytes(body, &req, true); err != nil {
		return err
	}
	if !h.node.IsLeader() {
		return h.ctl.Relay(w, r, body, false)
	}
	prev := h.node.ID()
	if req.ID == prev {
		control.WriteJSON(w, http.StatusOK, TransferResponse{Previous: prev, Leader: prev})
		return nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
	defer cancel()
	if err := h.node.TransferLeadership(ctx, req.ID); err != nil {
		return err
	}
	leader, _ := h.ctl.WaitNewLeader(ctx, prev, false)
	h.log.Info("leadership transferred", "from", prev, "to", leader)
	control.WriteJSON(w, http.StatusOK, TransferResponse{Previous: prev, Leader: leader})
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
	control.WriteJSON(w, http.StatusOK, RepairResponse{NodeID: h.node.ID(), Repair: fields["repair"]})
	return nil
}
