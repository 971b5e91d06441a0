package clusterapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
)

// Member is a member record on the wire: the body of a join request and
// one row of Status.Members. Voter and Leader are output only (a join
// always adds a voter) and are ignored in a join request.
type Member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	DataAddr string `json:"data_addr"`
	HTTPAddr string `json:"http_addr"`
	Zone     string `json:"zone,omitempty"`
	Capacity int64  `json:"capacity"`
	// State is alive, suspect, dead, left or draining; "unknown" in status for a
	// server of the Raft configuration with no member record yet. A join
	// request may leave it empty or say alive.
	State  string `json:"state,omitempty"`
	Voter  bool   `json:"voter"`
	Leader bool   `json:"leader,omitempty"`
	// Incarnation identifies the member's current start (a new one each
	// start) and Restoring says it is still rebuilding the shards it lost
	// (docs/operations.md, rolling restarts). Output only.
	Incarnation uint64 `json:"incarnation,omitempty"`
	Restoring   bool   `json:"restoring,omitempty"`
}

// FromMember converts an FSM member record (a zero state becomes "").
func FromMember(m cluster.Member) Member {
	out := Member{ID: m.ID, RaftAddr: m.RaftAddr, DataAddr: m.DataAddr, HTTPAddr: m.HTTPAddr, Zone: m.Zone, Capacity: m.Capacity,
		Incarnation: m.Incarnation, Restoring: m.Restoring}
	if m.State != 0 {
		out.State = m.State.String()
	}
	return out
}

// FSM converts a join request into the record to commit, checking it: the
// id, the Raft, data and HTTP addresses (host:port) are required, the
// capacity must not be negative and the state must be empty or alive.
func (m Member) FSM() (cluster.Member, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: member: %s", block.ErrInvalidArgument, fmt.Sprintf(format, a...))
	}
	if m.ID == "" || len(m.ID) > 128 {
		return cluster.Member{}, bad("id must be 1..128 bytes")
	}
	for _, r := range m.ID {
		if r <= 0x20 || r > 0x7e {
			return cluster.Member{}, bad("id %q must be printable ASCII without spaces", m.ID)
		}
	}
	for _, a := range []struct{ name, v string }{{"raft_addr", m.RaftAddr}, {"data_addr", m.DataAddr}, {"http_addr", m.HTTPAddr}} {
		if err := checkHostPort(a.v); err != nil {
			return cluster.Member{}, bad("%s %q: %v", a.name, a.v, err)
		}
	}
	if m.Capacity < 0 {
		return cluster.Member{}, bad("capacity %d is negative", m.Capacity)
	}
	if len(m.Zone) > 128 {
		return cluster.Member{}, bad("zone longer than 128 bytes")
	}
	if m.State != "" && m.State != cluster.MemberAlive.String() {
		return cluster.Member{}, bad("a joining member's state must be alive, not %q", m.State)
	}
	return cluster.Member{ID: m.ID, RaftAddr: m.RaftAddr, DataAddr: m.DataAddr, HTTPAddr: m.HTTPAddr, Zone: m.Zone, Capacity: m.Capacity, State: cluster.MemberAlive}, nil
}

// checkHostPort accepts host:port with a non-empty, specified host and a
// numeric port: an address other nodes can dial.
func checkHostPort(a string) error {
	if a == "" {
		return errors.New("required")
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return errors.New("host must be an address other nodes can dial")
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return fmt.Errorf("bad port %q", port)
	}
	return nil
}

// Status is the reply of GET /v1/cluster/status, as this node sees the
// cluster (no network hop: a follower may lag the leader slightly).
type Status struct {
	NodeID string `json:"node_id"`
	// State is this node's Raft state: leader, follower, candidate or shutdown.
	State string `json:"state"`
	// Leader is the leader's record (null while no leader is known).
	Leader *Member `json:"leader"`
	// Members are the servers of the Raft configuration and the member
	// records that are not in it (left or not yet added), sorted by id.
	Members []Member   `json:"members"`
	Raft    RaftStatus `json:"raft"`
	// Drains is the progress of every draining member: what this node's
	// index still places on it, and, when this node leads (Active), what
	// the drain moved and could not move.
	Drains []cluster.DrainStatus `json:"drains,omitempty"`
	// Extra is what ctxd's status function returned (data path, repair).
	Extra json.RawMessage `json:"extra,omitempty"`
}

// RaftStatus is this node's Raft progress.
type RaftStatus struct {
	Term              uint64 `json:"term"`
	CommitIndex       uint64 `json:"commit_index"`
	AppliedIndex      uint64 `json:"applied_index"`
	LastLogIndex      uint64 `json:"last_log_index"`
	LastLogTerm       uint64 `json:"last_log_term"`
	LastSnapshotIndex uint64 `json:"last_snapshot_index"`
	FSMPending        uint64 `json:"fsm_pending"`
	// LastContact is the time since the leader was last heard from: "0" on
	// the leader, "never", or a Go duration.
	LastContact string `json:"last_contact"`
	NumPeers    int    `json:"num_peers"`
	// Fault is the FSM's apply fault (a command this node's code does not
	// understand: upgrade it), empty when healthy.
	Fault string `json:"fault,omitempty"`
}

// raftStatus parses hashicorp/raft's Stats map.
func raftStatus(s map[string]string) RaftStatus {
	u := func(k string) uint64 { v, _ := strconv.ParseUint(s[k], 10, 64); return v }
	peers, _ := strconv.Atoi(s["num_peers"])
	return RaftStatus{
		Term: u("term"), CommitIndex: u("commit_index"), AppliedIndex: u("applied_index"),
		LastLogIndex: u("last_log_index"), LastLogTerm: u("last_log_term"), LastSnapshotIndex: u("last_snapshot_index"),
		FSMPending: u("fsm_pending"), LastContact: s["last_contact"], NumPeers: peers,
	}
}

// RemoveRequest is the body of POST /v1/cluster/remove. Without Force the
// leader refuses to remove a member its index still places shards on.
type RemoveRequest struct {
	ID    string `json:"id"`
	Force bool   `json:"force,omitempty"`
}

// DrainRequest is the body of POST /v1/cluster/drain: start draining
// member ID, or with Cancel make it alive again.
type DrainRequest struct {
	ID     string `json:"id"`
	Cancel bool   `json:"cancel,omitempty"`
}

// DrainResponse is its reply: the member's state after the request and,
// for a drain, what the member held when it started.
type DrainResponse struct {
	ID    string               `json:"id"`
	State string               `json:"state"`
	Drain *cluster.DrainStatus `json:"drain,omitempty"`
}

// RemoveResponse is its reply.
type RemoveResponse struct {
	Removed string `json:"removed"`
}

// TransferRequest is the body of POST /v1/cluster/transfer-leadership; an
// empty id (or an empty body) picks the most up-to-date follower.
type TransferRequest struct {
	ID string `json:"id,omitempty"`
}

// TransferResponse names the leader after the transfer ("" when the
// transfer succeeded but no new leader was known yet).
type TransferResponse struct {
	Previous string `json:"previous"`
	Leader   string `json:"leader"`
}

// JoinResponse is the reply of POST /v1/cluster/join.
type JoinResponse struct {
	Member Member `json:"member"`
}

// RepairResponse is the reply of GET /v1/cluster/repair: the "repair"
// field of ctxd's status extra, as it is.
type RepairResponse struct {
	NodeID string          `json:"node_id"`
	Repair json.RawMessage `json:"repair"`
}

// decodeJSON reads a bounded JSON body into v, refusing unknown fields and
// trailing data. An empty body is accepted only when emptyOK.
func decodeJSON(w http.ResponseWriter, r *http.Request, max int64, v any, emptyOK bool) error {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fmt.Errorf("%w: body over %d bytes", block.ErrTooLarge, max)
		}
		return fmt.Errorf("%w: reading body: %v", block.ErrInvalidArgument, err)
	}
	return decodeJSONBytes(b, v, emptyOK)
}

func decodeJSONBytes(b []byte, v any, emptyOK bool) error {
	if len(bytes.TrimSpace(b)) == 0 {
		if emptyOK {
			return nil
		}
		return fmt.Errorf("%w: empty JSON body", block.ErrInvalidArgument)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: JSON body: %v", block.ErrInvalidArgument, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: JSON body: trailing data", block.ErrInvalidArgument)
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"code":"Internal","message":"encoding reply"}`)
	}
	w.Header().Set("Content-Type", httpwire.ContentTypeJSON)
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeErrorBody sends the standard error reply: the errcode's HTTP
// status, its name in HeaderErrorCode and a {"code","message"} body.
func writeErrorBody(w http.ResponseWriter, err error) {
	code := errcode.Of(err)
	w.Header().Set(httpwire.HeaderErrorCode, code.String())
	w.Header().Set("X-Content-Type-Options", "nosniff")
	writeJSON(w, code.HTTPStatus(), httpwire.ErrorBody{Code: code.String(), Message: err.Error()})
}

// responseError turns an error reply back into an error that errors.Is
// matches against its sentinel: from the body's code, else the header,
// else the status alone.
func responseError(resp *http.Response, body []byte) error {
	var eb httpwire.ErrorBody
	if json.Unmarshal(body, &eb) == nil && eb.Code != "" {
		return codeErr(errcode.FromName(eb.Code), eb.Message)
	}
	if name := resp.Header.Get(httpwire.HeaderErrorCode); name != "" {
		return codeErr(errcode.FromName(name), fmt.Sprintf("%s (HTTP %d)", name, resp.StatusCode))
	}
	msg := fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	switch resp.StatusCode {
	case http.StatusBadRequest:
		return codeErr(errcode.InvalidArgument, msg)
	case http.StatusNotFound:
		return codeErr(errcode.NotFound, msg)
	case http.StatusUnauthorized:
		return codeErr(errcode.Unauthenticated, msg)
	case http.StatusForbidden:
		return codeErr(errcode.PermissionDenied, msg)
	case http.StatusRequestEntityTooLarge:
		return codeErr(errcode.TooLarge, msg)
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return codeErr(errcode.Unavailable, msg)
	}
	return codeErr(errcode.Internal, msg)
}

func codeErr(c errcode.Code, msg string) error {
	if c == errcode.OK {
		c = errcode.Internal
	}
	return c.Err(msg)
}
