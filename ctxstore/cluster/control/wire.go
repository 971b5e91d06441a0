package control

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
// one row of gateway/clusterapi's Status.Members. Voter and Leader are
// output only (a join always adds a voter) and are ignored in a join
// request.
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

// JoinResponse is the reply of POST /v1/cluster/join.
type JoinResponse struct {
	Member Member `json:"member"`
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
	return DecodeJSONBytes(b, v, emptyOK)
}

// DecodeJSONBytes decodes a JSON body already read into v, as decodeJSON.
func DecodeJSONBytes(b []byte, v any, emptyOK bool) error {
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

// WriteJSON sends v as a JSON reply with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"code":"Internal","message":"encoding reply"}`)
	}
	w.Header().Set("Content-Type", httpwire.ContentTypeJSON)
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeError sends the standard error reply: the errcode's HTTP
// status, its name in HeaderErrorCode and a {"code","message"} body.
func writeError(w http.ResponseWriter, err error) {
	code := errcode.Of(err)
	w.Header().Set(httpwire.HeaderErrorCode, code.String())
	w.Header().Set("X-Content-Type-Options", "nosniff")
	WriteJSON(w, code.HTTPStatus(), httpwire.ErrorBody{Code: code.String(), Message: err.Error()})
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
