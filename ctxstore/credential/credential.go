// Package credential holds the access keys that authenticate S3 and
// block-API requests: an access key id, a secret, and the namespaces the key
// may touch. SigV4 verification needs the secret itself (it is an HMAC key),
// so secrets cannot be stored hashed; they are sealed with AES-256-GCM and
// opened only in memory. Replicated keeps them in the cluster's Raft state
// (sealed under a key derived from the cluster secret), so a key made
// through one node works on every node; FileStore keeps them in one node's
// file (under a per-node key file); Chain consults several.
package credential

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// AccessKeyPrefix starts every access key id ctxtier issues.
const AccessKeyPrefix = "CTX"

// ScopeAll is the scope entry that grants every namespace, including the
// right to list all buckets and create new ones.
const ScopeAll = "*"

// Credential is one access key. Secret is empty in listings.
type Credential struct {
	AccessKeyID string    `json:"access_key_id"`
	Secret      string    `json:"-"`
	Namespaces  []string  `json:"namespaces"`
	Description string    `json:"description,omitempty"`
	Created     time.Time `json:"created"`
}

// Allows reports whether the key may touch namespace ns. A scope entry is a
// namespace name, "*" for all, or a prefix ending in "*" ("team-a-*").
func (c Credential) Allows(ns string) bool {
	for _, s := range c.Namespaces {
		switch {
		case s == ScopeAll:
			return true
		case strings.HasSuffix(s, "*"):
			if strings.HasPrefix(ns, strings.TrimSuffix(s, "*")) {
				return true
			}
		case s == ns:
			return true
		}
	}
	return false
}

// AllowsAll reports whether the key is scoped to every namespace.
func (c Credential) AllowsAll() bool {
	for _, s := range c.Namespaces {
		if s == ScopeAll {
			return true
		}
	}
	return false
}

// ValidateScope checks scope entries: "*", a valid namespace name, or a
// non-empty prefix of one followed by "*".
func ValidateScope(scope []string) error {
	if len(scope) == 0 {
		return fmt.Errorf("%w: a key needs at least one namespace (or %q)", block.ErrInvalidArgument, ScopeAll)
	}
	for _, s := range scope {
		if s == ScopeAll {
			continue
		}
		name := s
		if p, ok := strings.CutSuffix(s, "*"); ok {
			// a prefix: check it as the start of a name ("team-a-" + "x")
			name = p + "x"
			if p == "" {
				return fmt.Errorf("%w: scope %q", block.ErrInvalidArgument, s)
			}
		}
		if err := block.ValidNamespaceName(name); err != nil {
			return fmt.Errorf("scope %q: %w", s, err)
		}
	}
	return nil
}

// Lookuper is what a verifier needs: the credential (with its secret) of an
// access key id, or an error wrapping block.ErrUnauthenticated when there is
// no such key.
type Lookuper interface {
	Lookup(accessKeyID string) (Credential, error)
}

// Store manages keys. Implementations must be safe for concurrent use.
type Store interface {
	Lookuper
	// Create issues a new key scoped to namespaces and returns it with its
	// secret (the only time the secret is shown).
	Create(ctx context.Context, namespaces []string, description string) (Credential, error)
	// List returns every key without secrets, sorted by id.
	List(ctx context.Context) ([]Credential, error)
	// Revoke deletes a key; block.ErrNotFound if there is none.
	Revoke(ctx context.Context, accessKeyID string) error
}

// Static is an in-memory Lookuper for tests and embedding.
type Static map[string]Credential

// Lookup returns the credential or an error wrapping block.ErrUnauthenticated.
func (s Static) Lookup(id string) (Credential, error) {
	c, ok := s[id]
	if !ok {
		return Credential{}, fmt.Errorf("%w: unknown access key %q", block.ErrUnauthenticated, id)
	}
	return c, nil
}

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewKeyPair draws a 20-character access key id (AWS's length) and a
// 40-character secret (240 random bits, URL-safe base64: no '/' or '+', so it
// can be pasted into shells and config files unquoted).
func NewKeyPair() (id, secret string, err error) {
	var b [11 + 30]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", fmt.Errorf("credential: random: %w", err)
	}
	id = AccessKeyPrefix + idEncoding.EncodeToString(b[:11])[:20-len(AccessKeyPrefix)]
	secret = base64.RawURLEncoding.EncodeToString(b[11:])
	return id, secret, nil
}
