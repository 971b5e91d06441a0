package object

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TestKeyValueCallsCannotReachObjectRecords checks that the key-value calls
// (what a RESP database mapped to a bucket uses) refuse the keys an object
// namespace keeps its own records under, leave those records intact, and
// that SCAN and Count do not list them; a block namespace still takes such
// keys.
func TestKeyValueCallsCannotReachObjectRecords(t *testing.T) {
	s := newObjectStore(t)
	ctx := context.Background()
	if _, err := s.PutObject(ctx, "obj", []byte("model.bin"), strings.NewReader("weights"), PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	up, err := s.CreateUpload(ctx, "obj", []byte("big.bin"), nil, block.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.Blocks().Namespace("obj")
	if err != nil {
		t.Fatal(err)
	}
	reserved := uploadKey(up.ID)
	forged := retireKey("0123456789abcdef")
	calls := []struct {
		name string
		call func(key []byte) error
	}{
		{"Get", func(k []byte) error { _, err := s.Get(ctx, "obj", k, ctxstore.ReadLocal); return err }},
		{"GetIn", func(k []byte) error { _, err := s.GetIn(ctx, n, k, ctxstore.ReadLocal); return err }},
		{"Exists", func(k []byte) error { _, err := s.Exists(ctx, "obj", k, ctxstore.ReadLocal); return err }},
		{"Set", func(k []byte) error { _, err := s.Set(ctx, "obj", k, []byte("forged"), SetOptions{}); return err }},
		{"Delete", func(k []byte) error { _, err := s.Delete(ctx, "obj", k); return err }},
		{"SetExpiry", func(k []byte) error { _, err := s.SetExpiry(ctx, "obj", k, time.Now().Add(-time.Hour)); return err }},
	}
	for _, c := range calls {
		for _, key := range [][]byte{reserved, forged} {
			err := c.call(key)
			if !errors.Is(err, block.ErrInvalidKey) || !strings.Contains(err.Error(), "reserved") {
				t.Errorf("%s(%q) = %v, want ErrInvalidKey naming the reserved keys", c.name, key, err)
			}
		}
	}
	// The upload record survived every call: the upload still answers.
	if _, err := s.GetUpload(ctx, "obj", up.ID, ctxstore.ReadLocal); err != nil {
		t.Fatalf("upload record after the refused calls: %v", err)
	}
	if _, err := s.getIn(ctx, n, forged, ctxstore.ReadLocal); !errors.Is(err, block.ErrNotFound) {
		t.Fatalf("a forged retire record exists: %v", err)
	}
	keys, next, err := s.Scan(ctx, "obj", 0, 1000, nil, ctxstore.ReadLocal)
	if err != nil || next != 0 {
		t.Fatalf("Scan: %v, next %d", err, next)
	}
	for _, k := range keys {
		if bytes.HasPrefix(k, []byte(reservedPrefix)) {
			t.Errorf("Scan listed the reserved key %q", k)
		}
	}
	if len(keys) != 1 || string(keys[0]) != "model.bin" {
		t.Errorf("Scan = %q, want only the object's key", keys)
	}
	if c, err := s.Count(ctx, "obj", ctxstore.ReadLocal); err != nil || c != 1 {
		t.Errorf("Count = %d, %v; want 1", c, err)
	}

	// Outside object namespaces NUL is an ordinary first byte.
	b, _ := newStore(t)
	k := []byte("\x00upload\x00x")
	if _, err := b.Set(ctx, "default", k, []byte("v"), SetOptions{}); err != nil {
		t.Fatalf("Set of a NUL-led key in a block namespace: %v", err)
	}
	v, err := b.Get(ctx, "default", k, ctxstore.ReadLocal)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	if string(v.Data) != "v" {
		t.Errorf("Get = %q", v.Data)
	}
}
