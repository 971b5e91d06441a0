package console

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
)

// Action names, the last element of POST /ui/api/actions/{action}.
const (
	ActionDrain       = "drain"
	ActionCancelDrain = "cancel-drain"
	ActionTransfer    = "transfer-leadership"
	ActionRevokeKey   = "revoke-key"
)

// ActionRequest is the body of an action: the member (drain, cancel-drain,
// transfer-leadership; empty there picks a follower) or the access key
// (revoke-key) it acts on.
type ActionRequest struct {
	ID string `json:"id"`
}

// ActionResponse is an action's reply.
type ActionResponse struct {
	Action string `json:"action"`
	ID     string `json:"id"`
	// Leader is the leader after a transfer.
	Leader string `json:"leader,omitempty"`
}

// Session is the reply of POST /ui/api/session: the admin key is valid.
type Session struct {
	AccessKeyID string `json:"access_key_id"`
	Admin       bool   `json:"admin"`
}

var (
	errNoKey    = fmt.Errorf("%w: console actions need an admin access key: Authorization: Bearer <accessKeyID>:<secret>", block.ErrUnauthenticated)
	errBadKey   = fmt.Errorf("%w: the admin key must be <accessKeyID>:<secret>", block.ErrUnauthenticated)
	errNotAdmin = fmt.Errorf("%w: console actions need an access key scoped to %q", block.ErrPermissionDenied, credential.ScopeAll)
)

// admin checks the request's Bearer admin key.
func (c *Console) admin(r *http.Request) (credential.Credential, error) {
	if c.deps.Keys == nil {
		return credential.Credential{}, fmt.Errorf("%w: this node has no access keys; actions are off", block.ErrPermissionDenied)
	}
	scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return credential.Credential{}, errNoKey
	}
	id, secret, ok := strings.Cut(strings.TrimSpace(tok), ":")
	if !ok || id == "" || secret == "" {
		return credential.Credential{}, errBadKey
	}
	cred, err := c.deps.Keys.Lookup(id)
	if err != nil {
		return credential.Credential{}, fmt.Errorf("%w: access key %q: %v", block.ErrUnauthenticated, id, err)
	}
	got, want := sha256.Sum256([]byte(secret)), sha256.Sum256([]byte(cred.Secret))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		return credential.Credential{}, fmt.Errorf("%w: wrong secret for access key %q", block.ErrUnauthenticated, id)
	}
	if !cred.AllowsAll() {
		return credential.Credential{}, errNotAdmin
	}
	return cred, nil
}

func (c *Console) session(w http.ResponseWriter, r *http.Request) error {
	cred, err := c.admin(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, Session{AccessKeyID: cred.AccessKeyID, Admin: true})
	return nil
}

// keys serves GET /ui/api/keys (admin only): the access keys, no secrets.
func (c *Console) keys(w http.ResponseWriter, r *http.Request) error {
	if _, err := c.admin(r); err != nil {
		return err
	}
	list, err := c.deps.Keys.List(r.Context())
	if err != nil {
		return err
	}
	slices.SortFunc(list, func(a, b credential.Credential) int { return strings.Compare(a.AccessKeyID, b.AccessKeyID) })
	if list == nil {
		list = []credential.Credential{}
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

func (c *Console) action(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("action")
	cred, err := c.admin(r)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, c.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fmt.Errorf("%w: body over %d bytes", block.ErrTooLarge, c.cfg.MaxBodyBytes)
		}
		return fmt.Errorf("%w: reading body: %v", block.ErrInvalidArgument, err)
	}
	var req ActionRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return fmt.Errorf("%w: action body: %v", block.ErrInvalidArgument, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: action body: trailing data", block.ErrInvalidArgument)
	}
	out, err := c.do(r.Context(), name, req, cred)
	if err != nil {
		return err
	}
	c.log.Info("console action", "action", name, "id", req.ID, "by", cred.AccessKeyID, "leader", out.Leader)
	writeJSON(w, http.StatusOK, out)
	return nil
}

// do runs one action for an admin.
func (c *Console) do(ctx context.Context, name string, req ActionRequest, by credential.Credential) (ActionResponse, error) {
	out := ActionResponse{Action: name, ID: req.ID}
	needID := func() error {
		if req.ID == "" {
			return fmt.Errorf("%w: %s: id is required", block.ErrInvalidArgument, name)
		}
		return nil
	}
	switch name {
	case ActionDrain:
		if err := needID(); err != nil {
			return out, err
		}
		return out, c.deps.Cluster.Drain(ctx, req.ID)
	case ActionCancelDrain:
		if err := needID(); err != nil {
			return out, err
		}
		return out, c.deps.Cluster.CancelDrain(ctx, req.ID)
	case ActionTransfer:
		leader, err := c.deps.Cluster.TransferLeadership(ctx, req.ID)
		out.Leader = leader
		return out, err
	case ActionRevokeKey:
		if err := needID(); err != nil {
			return out, err
		}
		if req.ID == by.AccessKeyID {
			return out, fmt.Errorf("%w: %s: the console will not revoke the key it is using", block.ErrInvalidArgument, name)
		}
		return out, c.deps.Keys.Revoke(ctx, req.ID)
	}
	return out, fmt.Errorf("%w: no console action %q", block.ErrNotFound, name)
}
