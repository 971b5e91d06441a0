package s3

import (
	"context"
	"log/slog"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// BenchmarkS3QuotaDemote measures a demotion into the S3 tier (over the
// in-memory store, so the tier's own work is what is timed) for a
// namespace without a quota (the baseline) and for one at its quota, where
// every demotion first forgets the namespace's least recently used block.
// Both flush every 256 demotions. Run with -v: it logs the ratio.
func BenchmarkS3QuotaDemote(b *testing.B) {
	const size = 4 << 10
	data := blockData(1, size)
	sum := block.Checksum(data)
	run := func(b *testing.B, quota int64) float64 {
		cfg := testConfig(b.TempDir())
		cfg.MaxBuffer = 64 << 20
		cfg.PackBlocks = 256
		cfg.Quota = func(string) int64 { return quota }
		tr, err := newTier(cfg, newMemStore(), slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		defer tr.Close()
		ctx := context.Background()
		b.ResetTimer()
		for i := range b.N {
			tr.Demote(block.NewKey("a", uint64(i)+1), data, sum)
			if i%256 == 255 {
				if err := tr.Flush(ctx); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StopTimer()
		if quota > 0 && b.N > 1024 && tr.Stats().QuotaEvictions == 0 {
			b.Fatal("no quota evictions")
		}
		return float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	}
	var base float64
	b.Run("no-quota", func(b *testing.B) { base = run(b, 0) })
	b.Run("at-quota", func(b *testing.B) {
		ns := run(b, 256*size)
		if base > 0 && b.N > 1 {
			b.ReportMetric(ns/base, "ratio")
			b.Logf("at quota %.0f ns/demotion, no quota %.0f ns/demotion: ratio %.2f", ns, base, ns/base)
		}
	})
}
