package ctxstore

import (
	"context"
	"errors"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TestDeleteIfRemovesOnlyTheVersionNamed: DeleteIf on a tier without a
// conditional delete of its own (the DRAM tier) deletes the block only
// while it holds the bytes whose checksum it names.
func TestDeleteIfRemovesOnlyTheVersionNamed(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	key := block.NewKey("default", 42)
	v1, v2 := []byte("version one"), []byte("version two")
	cases := []struct {
		name    string
		put     []byte // put before the delete (nil: none)
		sum     uint32
		want    error
		present bool
	}{
		{"absent", nil, block.Checksum(v1), block.ErrNotFound, false},
		{"other bytes held", v2, block.Checksum(v1), block.ErrNotFound, true},
		{"the version named", v1, block.Checksum(v1), nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_ = s.Delete(ctx, key)
			if tc.put != nil {
				if err := s.Put(ctx, key, tc.put, block.PutOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			err := s.DeleteIf(ctx, key, tc.sum)
			if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("DeleteIf = %v, want %v", err, tc.want)
			}
			if ok, _ := s.Exists(ctx, key, ReadOptions{}); ok != tc.present {
				t.Fatalf("present after DeleteIf: %v, want %v", ok, tc.present)
			}
		})
	}
	if err := s.DeleteIf(ctx, block.NewKey("nope", 1), 0); !errors.Is(err, block.ErrUnknownNamespace) {
		t.Fatalf("unknown namespace: %v", err)
	}
}
