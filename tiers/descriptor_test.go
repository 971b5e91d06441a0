package tiers

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/tiers/dram"
)

func TestManagerDescriptor(t *testing.T) {
	ctx := context.Background()
	low := newMemLower()
	m := newManager(t, low, 2)
	for i := range 4 { // 0 and 1 are demoted to the (descriptor-less) lower tier
		if err := put(t, m, i, block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	d, release, err := m.Descriptor(ctx, k(3))
	if err != nil {
		t.Fatal(err)
	}
	if d.Tier != block.TierDRAM || d.Offset%dram.PageSize != 0 || d.Length != bs || d.DataOffset != d.Offset || d.ReadLength != d.Length {
		t.Fatalf("descriptor %+v", d)
	}
	f, err := os.Open(d.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, d.Length)
	if _, err := f.ReadAt(buf, d.Offset); err != nil || !bytes.Equal(buf, data(3)) || block.Checksum(buf) != d.Sum {
		t.Fatalf("bytes at the descriptor: %v", err)
	}
	// The lease keeps a deleted block's pages until release (idempotent).
	if err := m.Delete(ctx, k(3)); err != nil {
		t.Fatal(err)
	}
	if m.DRAM().Stats().AllocatedB < bs {
		t.Fatal("leased pages freed before release")
	}
	release()
	release()
	if _, _, err := m.Descriptor(ctx, k(3)); !errors.Is(err, block.ErrNotFound) {
		t.Fatalf("deleted block: %v", err)
	}
	if _, _, err := m.Descriptor(ctx, k(0)); !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("block in a lower tier without descriptors: %v", err)
	}
	if _, _, err := m.Descriptor(ctx, k(99)); !errors.Is(err, block.ErrNotFound) {
		t.Fatalf("missing block: %v", err)
	}
}
