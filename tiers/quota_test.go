package tiers

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/tiers/dram"
)

// TestManagerQuota: through the manager, a namespace's DRAM quota demotes
// its own blocks to the lower tier (write-back) and keeps promotions within
// the quota; another namespace keeps DRAM; a block above the quota is
// refused; NamespaceUsage reports DRAM per namespace.
func TestManagerQuota(t *testing.T) {
	low := newMemLower()
	dc := dram.DefaultConfig()
	dc.Capacity = 64 * bs
	cfg := DefaultConfig()
	cfg.Quota = func(ns string) block.Quota {
		if ns == "a" {
			return block.Quota{DRAM: 2 * bs}
		}
		return block.Quota{}
	}
	m, err := New(cfg, dc, low, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	putNS := func(ns string, i int) error {
		d := data(i)
		return m.Put(ctx, block.NewKey(ns, uint64(i)), d, block.Checksum(d), block.PutOptions{})
	}
	for i := range 4 {
		if err := putNS("b", i); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		if err := putNS("a", i); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name     string
		read     []int // tenant a blocks read (promoted) first
		wantADRM int64
	}{
		{"after the flood", nil, 2 * bs},
		{"after reading the oldest back", []int{0, 1, 2}, 2 * bs},
	}
	for _, s := range steps {
		for _, i := range s.read {
			ref, err := m.Get(ctx, block.NewKey("a", uint64(i)), block.GetOptions{})
			if err != nil || !bytes.Equal(ref.Data, data(i)) {
				t.Fatalf("%s: a/%d: %v", s.name, i, err)
			}
			ref.Release()
		}
		u := m.NamespaceUsage()[block.TierDRAM]
		if u["a"] != s.wantADRM || u["b"] != 4*bs {
			t.Fatalf("%s: dram usage %v, want a=%d b=%d", s.name, u, s.wantADRM, 4*bs)
		}
		for i := range 4 {
			if info, err := m.Stat(ctx, block.NewKey("b", uint64(i))); err != nil || info.Tier != block.TierDRAM {
				t.Fatalf("%s: b/%d is in %q (%v), want dram", s.name, i, info.Tier, err)
			}
		}
	}
	for i := range 10 {
		ref, err := m.Get(ctx, block.NewKey("a", uint64(i)), block.GetOptions{})
		if err != nil || !bytes.Equal(ref.Data, data(i)) {
			t.Fatalf("a/%d lost: %v", i, err)
		}
		ref.Release()
	}
	if low.Contains(block.NewKey("b", 0)) {
		t.Fatal("b was demoted for a's quota")
	}
	big := bytes.Repeat([]byte{7}, 3*bs)
	if err := m.Put(ctx, block.NewKey("a", 99), big, block.Checksum(big), block.PutOptions{}); !errors.Is(err, block.ErrQuotaExceeded) {
		t.Fatalf("a block above the quota: %v", err)
	}
}
