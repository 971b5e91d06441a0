package credential

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// Log is the replicated state Replicated keeps keys in: the FSM's
// credential records for reads, Raft commands for changes (which must run
// on the leader; elsewhere they fail with raft's not-leader error and the
// caller forwards them).
type Log interface {
	Credential(accessKeyID string) (fsm.Credential, bool)
	CredentialIDs() []string
	PutCredential(ctx context.Context, c fsm.Credential) error
	DeleteCredential(ctx context.Context, accessKeyID string) error
}

// sealed is what a replicated record's sealed blob holds: the secret and
// the fields fsm.Credential has no room for.
type sealed struct {
	Secret      string `json:"s"`
	Description string `json:"d,omitempty"`
	Created     int64  `json:"c"`
}

// Replicated is a Store over the cluster's Raft state. Secrets are sealed
// with AES-256-GCM under a key every member derives from the cluster
// secret (clustersecret.SealingKey), bound to their access key id; Raft
// logs and snapshots hold only the ciphertext. A key created or revoked
// through any member is in force on every member as soon as its FSM
// applies the entry.
type Replicated struct {
	log Log
	key []byte
	now func() time.Time

	mu    sync.Mutex
	cache map[string]cached // opened records by id
}

type cached struct {
	blob []byte
	cred Credential
}

// NewReplicated returns a Store over log sealing with key (32 bytes).
func NewReplicated(log Log, key []byte) (*Replicated, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("%w: credential: sealing key must be 32 bytes, is %d", block.ErrInvalidArgument, len(key))
	}
	return &Replicated{log: log, key: bytes.Clone(key), now: time.Now, cache: map[string]cached{}}, nil
}

var _ Store = (*Replicated)(nil)

// Lookup returns the credential of id, with its secret.
func (r *Replicated) Lookup(id string) (Credential, error) {
	rec, ok := r.log.Credential(id)
	if !ok || rec.Disabled || rec.Kind != fsm.SecretSealed {
		return Credential{}, fmt.Errorf("%w: unknown access key %q", block.ErrUnauthenticated, id)
	}
	r.mu.Lock()
	c, hit := r.cache[id]
	r.mu.Unlock()
	if hit && bytes.Equal(c.blob, rec.Secret) {
		return c.cred, nil
	}
	cred, err := r.open(rec)
	if err != nil {
		return Credential{}, err
	}
	r.mu.Lock()
	if len(r.cache) > 4096 {
		clear(r.cache)
	}
	r.cache[id] = cached{blob: bytes.Clone(rec.Secret), cred: cred}
	r.mu.Unlock()
	return cred, nil
}

func (r *Replicated) open(rec fsm.Credential) (Credential, error) {
	pt, err := fsm.OpenSecret(r.key, rec.AccessKeyID, rec.Secret)
	if err != nil {
		return Credential{}, fmt.Errorf("%w: access key %q does not open with this cluster's secret", block.ErrUnauthenticated, rec.AccessKeyID)
	}
	var s sealed
	if err := json.Unmarshal([]byte(pt), &s); err != nil || s.Secret == "" {
		return Credential{}, fmt.Errorf("%w: access key %q: malformed sealed record", block.ErrUnauthenticated, rec.AccessKeyID)
	}
	c := Credential{AccessKeyID: rec.AccessKeyID, Secret: s.Secret, Description: s.Description, Created: time.Unix(s.Created, 0).UTC()}
	for _, sc := range rec.Scopes {
		c.Namespaces = append(c.Namespaces, sc.Namespace)
	}
	return c, nil
}

// Create issues a key scoped to namespaces (on the leader).
func (r *Replicated) Create(ctx context.Context, namespaces []string, description string) (Credential, error) {
	if err := ValidateScope(namespaces); err != nil {
		return Credential{}, err
	}
	if len(description) > 256 {
		return Credential{}, fmt.Errorf("%w: description longer than 256 bytes", block.ErrInvalidArgument)
	}
	id, secret, err := NewKeyPair()
	if err != nil {
		return Credential{}, err
	}
	if _, dup := r.log.Credential(id); dup {
		return Credential{}, fmt.Errorf("%w: access key id collision, retry", block.ErrConflict)
	}
	created := r.now().UTC().Truncate(time.Second)
	pt, err := json.Marshal(sealed{Secret: secret, Description: description, Created: created.Unix()})
	if err != nil {
		return Credential{}, err
	}
	blob, err := fsm.SealSecret(r.key, id, string(pt))
	if err != nil {
		return Credential{}, err
	}
	rec := fsm.Credential{AccessKeyID: id, Kind: fsm.SecretSealed, Secret: blob}
	for _, ns := range namespaces {
		rec.Scopes = append(rec.Scopes, fsm.Scope{Namespace: ns, Perms: fsm.PermRead | fsm.PermWrite | fsm.PermAdmin})
	}
	if err := r.log.PutCredential(ctx, rec); err != nil {
		return Credential{}, err
	}
	return Credential{AccessKeyID: id, Secret: secret, Namespaces: slices.Clone(namespaces), Description: description, Created: created}, nil
}

// List returns every key without secrets, sorted by id. A record that does
// not open (sealed under another cluster secret) is listed with its id and
// scopes only.
func (r *Replicated) List(_ context.Context) ([]Credential, error) {
	var out []Credential
	for _, id := range r.log.CredentialIDs() {
		rec, ok := r.log.Credential(id)
		if !ok {
			continue
		}
		c, err := r.open(rec)
		if err != nil {
			c = Credential{AccessKeyID: id}
			for _, sc := range rec.Scopes {
				c.Namespaces = append(c.Namespaces, sc.Namespace)
			}
		}
		c.Secret = ""
		out = append(out, c)
	}
	return out, nil
}

// Revoke deletes a key (on the leader); block.ErrNotFound if there is none.
func (r *Replicated) Revoke(ctx context.Context, id string) error {
	if _, ok := r.log.Credential(id); !ok {
		return fmt.Errorf("%w: access key %q", block.ErrNotFound, id)
	}
	return r.log.DeleteCredential(ctx, id)
}

// Chain is a Lookuper that asks each of its Lookupers in turn: the first
// that knows the key answers. A failure other than "unknown key" (an
// unavailable store) is returned at once.
type Chain []Lookuper

// Lookup returns the first credential found.
func (c Chain) Lookup(id string) (Credential, error) {
	err := fmt.Errorf("%w: unknown access key %q", block.ErrUnauthenticated, id)
	for _, l := range c {
		cred, lerr := l.Lookup(id)
		if lerr == nil {
			return cred, nil
		}
		if !errors.Is(lerr, block.ErrUnauthenticated) {
			return Credential{}, lerr
		}
		err = lerr
	}
	return Credential{}, err
}
