package ctxstore

import (
	"context"
	"errors"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

func TestStoreDescriptorNeedsADescriber(t *testing.T) {
	s := newStore(t) // a bare dram.Tier: it has no tier-neutral descriptors
	ctx := context.Background()
	k := block.NewKey("default", 1)
	if err := s.Put(ctx, k, []byte("bytes"), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		key  block.Key
		want error
	}{
		{"unknown namespace", block.NewKey("nope", 1), block.ErrUnknownNamespace},
		{"tier without descriptors", k, block.ErrUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := s.Descriptor(ctx, tc.key, ReadOptions{}); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}
