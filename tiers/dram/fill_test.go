package dram

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"unsafe"

	"github.com/zeebo/xxh3"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// fillFrom is a Filler that copies data into the slot and reports its own
// checksums, as a lower tier's direct read does; it records the slot.
func fillFrom(data []byte, slot *[]byte) Filler {
	return func(s []byte) (uint32, uint64, error) {
		*slot = s
		copy(s, data)
		return block.Checksum(s[:len(data)]), xxh3.Hash(s[:len(data)]), nil
	}
}

// TestFill stores blocks through Fill: the filler gets the block's whole
// pages (page-aligned, length rounded up to PageSize), the Ref it returns
// is a lease on the stored bytes (the block cannot be evicted while held),
// and later reads verify against the fingerprint the filler returned.
func TestFill(t *testing.T) {
	tr := newTier(t, 8*PageSize)
	ctx := context.Background()
	for i, n := range []int{1, PageSize - 1, PageSize, PageSize + 1, 3 * PageSize} {
		data := payload(uint64(i), n)
		var slot []byte
		ref, err := tr.Fill(ctx, key(i), int64(n), block.PutOptions{}, 0, fillFrom(data, &slot))
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if want := (n + PageSize - 1) / PageSize * PageSize; len(slot) != want || uintptr(unsafe.Pointer(&slot[0]))%PageSize != 0 {
			t.Fatalf("%d bytes: slot of %d bytes at %p, want %d page-aligned", n, len(slot), &slot[0], want)
		}
		if !bytes.Equal(ref.Data, data) || ref.Sum != block.Checksum(data) || ref.Tier != block.TierDRAM {
			t.Fatalf("%d bytes: Fill's ref holds %d bytes, sum %08x, tier %v", n, len(ref.Data), ref.Sum, ref.Tier)
		}
		ref.Release()
		readBack(t, tr, key(i), data)
	}
	// The ref is a lease: a held block survives a put that needs its room.
	tr2 := newTier(t, 2*PageSize)
	var slot []byte
	held, err := tr2.Fill(ctx, key(1), PageSize, block.PutOptions{}, 0, fillFrom(payload(1, PageSize), &slot))
	if err != nil {
		t.Fatal(err)
	}
	if err := put(t, tr2, key(2), payload(2, PageSize), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := put(t, tr2, key(3), payload(3, PageSize), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if !tr2.Contains(key(1)) || tr2.Contains(key(2)) {
		t.Fatal("the leased block was evicted instead of the unleased one")
	}
	if !bytes.Equal(held.Data, payload(1, PageSize)) {
		t.Fatal("leased bytes changed")
	}
	held.Release()
}

// TestFillFailures: a filler's error frees the pages and is returned as
// is; a key already resident is ErrResident without calling the filler; a
// block over the size limit is refused; a wrong fingerprint from the
// filler is caught by the next verifying read, which drops the block.
func TestFillFailures(t *testing.T) {
	tr := newTier(t, 4*PageSize)
	ctx := context.Background()
	boom := errors.New("read failed")
	if _, err := tr.Fill(ctx, key(1), 2*PageSize, block.PutOptions{}, 0, func([]byte) (uint32, uint64, error) { return 0, 0, boom }); !errors.Is(err, boom) {
		t.Fatalf("failing filler: %v", err)
	}
	if s := tr.Stats(); s.Blocks != 0 || s.ResidentBytes != 0 || tr.LargestFree() != 4*PageSize || tr.Contains(key(1)) {
		t.Fatalf("after a failed fill: %+v, largest free %d", s, tr.LargestFree())
	}
	if err := put(t, tr, key(2), payload(2, 100), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	called := false
	if _, err := tr.Fill(ctx, key(2), 100, block.PutOptions{}, 0, func([]byte) (uint32, uint64, error) { called = true; return 0, 0, nil }); !errors.Is(err, ErrResident) || called {
		t.Fatalf("fill of a resident key: %v (filler called: %v)", err, called)
	}
	if _, err := tr.Fill(ctx, key(3), tr.cfg.MaxBlockSize+1, block.PutOptions{}, 0, nil); !errors.Is(err, block.ErrTooLarge) {
		t.Fatalf("oversized fill: %v", err)
	}
	data := payload(4, 500)
	ref, err := tr.Fill(ctx, key(4), 500, block.PutOptions{}, 0, func(s []byte) (uint32, uint64, error) {
		copy(s, data)
		return block.Checksum(data), xxh3.Hash(data) ^ 1, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ref.Release()
	if ref, err := tr.Get(ctx, key(4), block.GetOptions{}); !errors.Is(err, block.ErrNotFound) {
		ref.Release()
		t.Fatalf("block with a wrong fingerprint served: %v", err)
	}
	if tr.Stats().Corruptions != 1 || tr.Contains(key(4)) {
		t.Fatalf("wrong fingerprint not dropped: %+v", tr.Stats())
	}
}
