package tiers

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/tiers/dram"
)

// TestTrimQuotasLoweredDRAMQuota: lowering a namespace's DRAM quota brings
// it down without a put, over several passes of at most TrimBudget bytes,
// demoting its own least recently used unpinned blocks (all still readable
// from the lower tier); other namespaces, and a quota that was raised, lose
// nothing.
func TestTrimQuotasLoweredDRAMQuota(t *testing.T) {
	tests := []struct {
		name     string
		newQuota int64
		pinned   int     // a's first blocks put with a pin
		want     []int64 // a's DRAM bytes after each pass
	}{
		{"lowered", 3 * bs, 0, []int64{8 * bs, 6 * bs, 4 * bs, 3 * bs, 3 * bs}},
		{"raised", 20 * bs, 0, []int64{10 * bs, 10 * bs}},
		{"lowered to zero is unlimited", 0, 0, []int64{10 * bs}},
		{"pinned blocks stay", bs, 4, []int64{8 * bs, 6 * bs, 4 * bs, 4 * bs}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			quotaA := int64(10 * bs)
			low := newMemLower()
			dc := dram.DefaultConfig()
			dc.Capacity = 64 * bs
			cfg := DefaultConfig()
			cfg.TrimBudget = 2 * bs
			cfg.Quota = func(ns string) block.Quota {
				mu.Lock()
				defer mu.Unlock()
				if ns == "a" {
					return block.Quota{DRAM: quotaA}
				}
				return block.Quota{DRAM: bs}
			}
			m, err := New(cfg, dc, low, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			ctx := context.Background()
			for i := range 10 {
				d := data(i)
				opts := block.PutOptions{}
				if i < tt.pinned {
					opts.PinTTL = time.Hour
				}
				if err := m.Put(ctx, block.NewKey("a", uint64(i)), d, block.Checksum(d), opts); err != nil {
					t.Fatal(err)
				}
			}
			d := data(100)
			if err := m.Put(ctx, block.NewKey("c", 100), d, block.Checksum(d), block.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			quotaA = tt.newQuota
			mu.Unlock()
			for pass, want := range tt.want {
				m.TrimQuotas(ctx)
				if got := m.NamespaceUsage()[block.TierDRAM]["a"]; got != want {
					t.Fatalf("pass %d: a holds %d bytes of dram, want %d", pass, got, want)
				}
			}
			if got := m.NamespaceUsage()[block.TierDRAM]["c"]; got != bs {
				t.Fatalf("c holds %d bytes of dram, want %d (at its quota: untouched)", got, bs)
			}
			for i := range 10 {
				ref, err := m.Get(ctx, block.NewKey("a", uint64(i)), block.GetOptions{})
				if err != nil || !bytes.Equal(ref.Data, data(i)) {
					t.Fatalf("a/%d: %v", i, err)
				}
				ref.Release()
			}
			trimmed := 10*bs - tt.want[len(tt.want)-1]
			if s := m.Stats(); s.QuotaTrimmedBytes != uint64(trimmed) || s.Drops != 0 {
				t.Fatalf("stats %+v, want %d trimmed bytes and no drops", s, trimmed)
			}
		})
	}
}
