package ctxstore

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/tiers/dram"
)

// BenchmarkDeleteTierIf measures what a conditional shard delete costs
// against a delete by key, in the same run: rounds of 2,000 iterations,
// each putting a 64 KiB block into a DRAM tier and deleting it, by key or
// with DeleteTierIf (per-key lock, Stat, compare, delete), alternating, so
// that a loaded machine slows both alike. It logs the median of the
// rounds' ratios (delete_if / delete) and each side's median time.
func BenchmarkDeleteTierIf(b *testing.B) {
	dc := dram.DefaultConfig()
	dc.Capacity = 64 << 20
	t, err := dram.New(dc, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer t.Close()
	ctx := context.Background()
	d := make([]byte, 64<<10)
	sum := block.Checksum(d)
	key := block.NewKey(block.DefaultNamespace, 1)
	round := func(del func() error) time.Duration {
		start := time.Now()
		for range 2000 {
			if err := t.Put(ctx, key, d, sum, block.PutOptions{}); err != nil {
				b.Fatal(err)
			}
			if err := del(); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start) / 2000
	}
	byKey := func() error { return t.Delete(ctx, key) }
	cond := func() error { return DeleteTierIf(ctx, t, key, sum) }
	var ratios []float64
	var plain, ifs []time.Duration
	for b.Loop() {
		p, c := round(byKey), round(cond)
		plain, ifs = append(plain, p), append(ifs, c)
		ratios = append(ratios, float64(c)/float64(p))
	}
	slices.Sort(ratios)
	slices.Sort(plain)
	slices.Sort(ifs)
	b.Logf("%d rounds: put + delete_if / put + delete = %.2f (median; put + delete %v, put + delete_if %v)",
		len(ratios), ratios[len(ratios)/2], plain[len(plain)/2], ifs[len(ifs)/2])
}
