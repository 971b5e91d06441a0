package credential

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// fakeLog keeps records in a map, validating them as the FSM does.
type fakeLog struct {
	mu   sync.Mutex
	recs map[string]fsm.Credential
}

func (l *fakeLog) Credential(id string) (fsm.Credential, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.recs[id]
	return c, ok
}

func (l *fakeLog) CredentialIDs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Sorted(maps.Keys(l.recs))
}

func (l *fakeLog) PutCredential(_ context.Context, c fsm.Credential) error {
	if err := c.Validate(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs[c.AccessKeyID] = c
	return nil
}

func (l *fakeLog) DeleteCredential(_ context.Context, id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.recs, id)
	return nil
}

func TestReplicatedLifecycle(t *testing.T) {
	ctx := context.Background()
	log := &fakeLog{recs: map[string]fsm.Credential{}}
	key := bytes.Repeat([]byte{7}, 32)
	a, err := NewReplicated(log, key)
	if err != nil {
		t.Fatal(err)
	}
	// A second member with the same key sees what the first one wrote.
	b, err := NewReplicated(log, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := a.Create(ctx, []string{"team-a-*", "b"}, "tenant a")
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Lookup(c.AccessKeyID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Secret != c.Secret || !got.Allows("team-a-x") || !got.Allows("b") || got.Allows("c") || got.Description != "tenant a" || !got.Created.Equal(c.Created) {
		t.Fatalf("looked up %+v, created %+v", got, c)
	}
	// Raft holds no plaintext secret.
	rec, _ := log.Credential(c.AccessKeyID)
	if bytes.Contains(rec.Secret, []byte(c.Secret)) || rec.Kind != fsm.SecretSealed {
		t.Fatal("the replicated record holds the plaintext secret")
	}
	list, err := b.List(ctx)
	if err != nil || len(list) != 1 || list[0].Secret != "" || list[0].AccessKeyID != c.AccessKeyID {
		t.Fatalf("list %+v %v", list, err)
	}
	// Another cluster's key cannot open it.
	other, _ := NewReplicated(log, bytes.Repeat([]byte{8}, 32))
	if _, err := other.Lookup(c.AccessKeyID); !errors.Is(err, block.ErrUnauthenticated) {
		t.Fatalf("lookup under another key: %v", err)
	}
	if err := b.Revoke(ctx, c.AccessKeyID); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Lookup(c.AccessKeyID); !errors.Is(err, block.ErrUnauthenticated) {
		t.Fatalf("revoked key (cached before) still accepted: %v", err)
	}
	if err := a.Revoke(ctx, c.AccessKeyID); !errors.Is(err, block.ErrNotFound) {
		t.Fatalf("revoke twice: %v", err)
	}
}

func TestReplicatedCreateRejects(t *testing.T) {
	r, err := NewReplicated(&fakeLog{recs: map[string]fsm.Credential{}}, bytes.Repeat([]byte{1}, 32))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		scope []string
		desc  string
	}{
		{"no scope", nil, ""},
		{"bad name", []string{"Bad Name"}, ""},
		{"bare star prefix", []string{"*x"}, ""},
		{"long description", []string{"a"}, string(bytes.Repeat([]byte("d"), 257))},
	} {
		if _, err := r.Create(context.Background(), tc.scope, tc.desc); !errors.Is(err, block.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", tc.name, err)
		}
	}
	if _, err := NewReplicated(&fakeLog{}, []byte("short")); !errors.Is(err, block.ErrInvalidArgument) {
		t.Fatalf("short key: %v", err)
	}
}

func TestChain(t *testing.T) {
	first := Static{"A": {AccessKeyID: "A", Secret: "from-first"}}
	second := Static{"A": {AccessKeyID: "A", Secret: "from-second"}, "B": {AccessKeyID: "B", Secret: "b"}}
	ch := Chain{first, second}
	for _, tc := range []struct {
		id, secret string
		err        error
	}{
		{"A", "from-first", nil},
		{"B", "b", nil},
		{"C", "", block.ErrUnauthenticated},
	} {
		c, err := ch.Lookup(tc.id)
		if !errors.Is(err, tc.err) || c.Secret != tc.secret {
			t.Errorf("Lookup(%s) = %q %v", tc.id, c.Secret, err)
		}
	}
	failing := lookupFunc(func(string) (Credential, error) { return Credential{}, block.ErrUnavailable })
	if _, err := (Chain{failing, second}).Lookup("B"); !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("failing store: %v", err)
	}
}

type lookupFunc func(string) (Credential, error)

func (f lookupFunc) Lookup(id string) (Credential, error) { return f(id) }
