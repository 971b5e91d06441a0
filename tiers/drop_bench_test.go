package tiers

import (
	"context"
	"log/slog"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/tiers/dram"
	"github.com/ctxtier/ctxtier/tiers/nvme"
)

// BenchmarkEvictionDropCheck measures what the drop rule costs: every DRAM
// eviction asks the lower tier Contains. "put" is a write-through put of a
// 64 KiB block into a full DRAM over the real NVMe tier (each put evicts one
// clean block, so it includes one Contains); "contains" is that Contains
// alone, measured in the same run. Run it with -bench and read the ratio.
func BenchmarkEvictionDropCheck(b *testing.B) {
	const size = 64 << 10
	ncfg := nvme.DefaultConfig()
	ncfg.Dir = b.TempDir()
	ncfg.SegmentSize = 16 << 20
	ncfg.Capacity = 256 << 20
	ncfg.MaxBlockSize = 1 << 20
	low, err := nvme.New(ncfg, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer low.Close()
	dc := dram.DefaultConfig()
	dc.Capacity = 16 * size
	m, err := New(DefaultConfig(), dc, low, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	d := make([]byte, size)
	next := 0
	putOne := func() {
		d[0], d[1], d[2] = byte(next), byte(next>>8), byte(next>>16)
		if err := m.Put(ctx, k(next), d, block.Checksum(d), block.PutOptions{WriteThrough: true}); err != nil {
			b.Fatal(err)
		}
		next++
	}
	for range 64 { // DRAM full: from now on every put evicts
		putOne()
	}
	var putNs, containsNs float64
	b.Run("put", func(b *testing.B) {
		for b.Loop() {
			putOne()
		}
		putNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("contains", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if !low.Contains(k(i % next)) {
				b.Fatal("missing")
			}
			i++
		}
		containsNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	if putNs > 0 {
		b.Logf("drop check: nvme Contains %.0f ns = %.2f%% of a write-through put with one eviction (%.0f ns)",
			containsNs, 100*containsNs/putNs, putNs)
	}
}
