package tiers

import (
	"context"
	"log/slog"
	"syscall"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/tiers/dram"
	"github.com/ctxtier/ctxtier/tiers/nvme"
)

// copyOnly hides a lower tier's ReadInto, so the manager promotes by
// reading into the tier's buffer and copying (the path before direct
// promotion).
type copyOnly struct{ Lower }

// BenchmarkPromotion reads 2 MiB blocks that live on the real NVMe tier
// through a DRAM tier too small to keep them, so every Get is a lower-tier
// hit and a promotion (and evicts an earlier promoted copy): "direct" reads
// each block straight into its DRAM pages, "copy" through the NVMe tier's
// buffer and a copy, on the same files in the same run. It reports the
// process's CPU time per Get (cpu-ns/op) beside the wall time: the direct
// path saves a copy and a hash pass of each block. Run with -count to
// alternate the two.
func BenchmarkPromotion(b *testing.B) {
	const size, blocks = 2 << 20, 48
	ncfg := nvme.DefaultConfig()
	ncfg.Dir = b.TempDir()
	ncfg.SegmentSize = 64 << 20
	ncfg.Capacity = 512 << 20
	ncfg.MaxBlockSize = 4 << 20
	low, err := nvme.New(ncfg, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer low.Close()
	ctx := context.Background()
	d := make([]byte, size)
	for i := range blocks {
		for j := range d {
			d[j] = byte(i*131 + j*7)
		}
		if err := low.Put(ctx, k(i), d, block.Checksum(d), block.PutOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	for _, mode := range []struct {
		name  string
		lower Lower
	}{{"copy", copyOnly{low}}, {"direct", low}} {
		b.Run(mode.name, func(b *testing.B) {
			dc := dram.DefaultConfig()
			dc.Capacity = 8 * size
			dc.MaxBlockSize = size
			m, err := New(DefaultConfig(), dc, mode.lower, slog.New(slog.DiscardHandler))
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			b.SetBytes(size)
			cpu0 := cpuNs()
			i := 0
			for b.Loop() {
				ref, err := m.Get(ctx, k(i%blocks), block.GetOptions{})
				if err != nil {
					b.Fatal(err)
				}
				ref.Release()
				i++
			}
			b.ReportMetric(float64(cpuNs()-cpu0)/float64(b.N), "cpu-ns/op")
			if s := m.Stats(); s.LowerHits == 0 || (mode.name == "direct") != (s.DirectPromotions > 0) {
				b.Fatalf("%s: %+v", mode.name, s)
			}
		})
	}
}

// cpuNs is the process's user and system CPU time so far.
func cpuNs() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
