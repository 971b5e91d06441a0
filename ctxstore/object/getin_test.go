package object

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TestGetInAnswersAsGet checks that GetIn, given the namespace the caller
// looked up, answers every case as Get does.
func TestGetInAnswersAsGet(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	if _, err := s.Set(ctx, "default", []byte("k"), []byte("value"), SetOptions{}); err != nil {
		t.Fatal(err)
	}
	def, err := s.Blocks().Namespace("default")
	if err != nil {
		t.Fatal(err)
	}
	small, err := s.Blocks().Namespace("small")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		ns      block.Namespace
		key     string
		want    string
		wantErr error
	}{
		{"present", def, "k", "value", nil},
		{"absent", def, "nope", "", block.ErrNotFound},
		{"another namespace", small, "k", "", block.ErrNotFound},
		{"key over the limit", def, strings.Repeat("k", DefaultConfig().MaxKeyLen+1), "", block.ErrInvalidKey},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := s.GetIn(ctx, tc.ns, []byte(tc.key), ctxstore.ReadLocal)
			ref, refErr := s.Get(ctx, tc.ns.Name, []byte(tc.key), ctxstore.ReadLocal)
			if !errors.Is(err, tc.wantErr) || !errors.Is(refErr, tc.wantErr) {
				t.Fatalf("GetIn: %v, Get: %v; want %v", err, refErr, tc.wantErr)
			}
			if err != nil {
				return
			}
			defer v.Release()
			defer ref.Release()
			if string(v.Data) != tc.want || string(v.Key) != tc.key || string(ref.Data) != tc.want {
				t.Fatalf("GetIn = %q (key %q), Get = %q; want %q", v.Data, v.Key, ref.Data, tc.want)
			}
		})
	}
}
