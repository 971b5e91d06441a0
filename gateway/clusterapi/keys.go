package clusterapi

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
)

// Paths of the access-key endpoints (Config.Keys).
const (
	PathKeys       = "/v1/cluster/keys"
	PathKeysRevoke = "/v1/cluster/keys/revoke"
)

// CreateKeyRequest is the body of POST PathKeys.
type CreateKeyRequest struct {
	Namespaces  []string `json:"namespaces"`
	Description string   `json:"description,omitempty"`
}

// Key is an access key in replies; SecretAccessKey is set only in the
// reply of a create.
type Key struct {
	AccessKeyID     string    `json:"access_key_id"`
	SecretAccessKey string    `json:"secret_access_key,omitempty"`
	Namespaces      []string  `json:"namespaces"`
	Description     string    `json:"description,omitempty"`
	Created         time.Time `json:"created"`
}

// RevokeKeyRequest is the body of POST PathKeysRevoke.
type RevokeKeyRequest struct {
	ID string `json:"id"`
}

func keyOf(c credential.Credential) Key {
	ns := c.Namespaces
	if ns == nil {
		ns = []string{}
	}
	return Key{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.Secret, Namespaces: ns, Description: c.Description, Created: c.Created}
}

func (h *handler) listKeys(w http.ResponseWriter, r *http.Request) error {
	list, err := h.cfg.Keys.List(r.Context())
	if err != nil {
		return err
	}
	out := make([]Key, 0, len(list))
	for _, c := range list {
		c.Secret = ""
		out = append(out, keyOf(c))
	}
	control.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (h *handler) createKey(w http.ResponseWriter, r *http.Request) error {
	body, err := h.ctl.ReadBody(w, r)
	if err != nil {
		return err
	}
	var req CreateKeyRequest
	if err := control.DecodeJSONBytes(body, &req, false); err != nil {
		return err
	}
	if err := credential.ValidateScope(req.Namespaces); err != nil {
		return err
	}
	if !h.node.IsLeader() {
		return h.ctl.Relay(w, r, body, false)
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
	defer cancel()
	c, err := h.cfg.Keys.Create(ctx, req.Namespaces, req.Description)
	if err != nil {
		return err
	}
	h.log.Info("access key created", "access_key", c.AccessKeyID, "namespaces", c.Namespaces, "via", r.Header.Get(control.HeaderForwardedBy))
	control.WriteJSON(w, http.StatusOK, keyOf(c))
	return nil
}

func (h *handler) revokeKey(w http.ResponseWriter, r *http.Request) error {
	var req RevokeKeyRequest
	body, err := h.readIDRequest(w, r, "revoke", &req, &req.ID)
	if err != nil {
		return err
	}
	if !h.node.IsLeader() {
		return h.ctl.Relay(w, r, body, false)
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
	defer cancel()
	if err := h.cfg.Keys.Revoke(ctx, req.ID); err != nil {
		return err
	}
	h.log.Info("access key revoked", "access_key", req.ID, "via", r.Header.Get(control.HeaderForwardedBy))
	control.WriteJSON(w, http.StatusOK, RevokeKeyRequest{ID: req.ID})
	return nil
}

// CreateKey issues an access key scoped to namespaces (through the leader)
// and returns it with its secret, the only time the secret is shown.
func (c *Client) CreateKey(ctx context.Context, namespaces []string, description string) (Key, error) {
	var out Key
	err := c.Do(ctx, http.MethodPost, PathKeys, CreateKeyRequest{Namespaces: namespaces, Description: description}, &out)
	return out, err
}

// ListKeys lists the cluster's access keys, without secrets.
func (c *Client) ListKeys(ctx context.Context) ([]Key, error) {
	var out []Key
	err := c.Do(ctx, http.MethodGet, PathKeys, nil, &out)
	return out, err
}

// RevokeKey deletes access key id (block.ErrNotFound if there is none).
func (c *Client) RevokeKey(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("%w: revoke: id is required", block.ErrInvalidArgument)
	}
	return c.Do(ctx, http.MethodPost, PathKeysRevoke, RevokeKeyRequest{ID: id}, &RevokeKeyRequest{})
}
