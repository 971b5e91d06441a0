package dram

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/tiers/policy"
)

// BenchmarkFillWorstPut fills an empty 6 GiB tier with 4 KiB blocks (1.57
// million puts, one iteration is the whole fill) under each policy and
// reports the slowest single put and how many took over 20 ms: a put that
// grows a per-block table under the tier's lock stalls every caller
// (internal/chunked). It needs about 7 GiB of memory, so it is a
// benchmark, run by hand:
//
//	go test -run xxx -bench FillWorstPut -benchtime 1x ./tiers/dram/
func BenchmarkFillWorstPut(b *testing.B) {
	for _, name := range []string{"lru", "window", "duel"} {
		b.Run(name, func(b *testing.B) {
			f, err := policy.Lookup(name)
			if err != nil {
				b.Fatal(err)
			}
			data := make([]byte, 4096)
			sum := block.Checksum(data)
			ctx := context.Background()
			var worst time.Duration
			over := 0
			for range b.N {
				cfg := DefaultConfig()
				cfg.Capacity = 6 << 30
				cfg.Policy = f
				tr, err := New(cfg, slog.New(slog.DiscardHandler))
				if err != nil {
					b.Fatal(err)
				}
				n := int(cfg.Capacity/PageSize) - 1000
				for i := range n {
					t0 := time.Now()
					if err := tr.Put(ctx, block.NewKey("default", uint64(i)), data, sum, block.PutOptions{}); err != nil {
						b.Fatal(err)
					}
					d := time.Since(t0)
					worst = max(worst, d)
					if d > 20*time.Millisecond {
						over++
					}
				}
				tr.Close()
			}
			b.ReportMetric(float64(worst.Microseconds())/1000, "worst-put-ms")
			b.ReportMetric(float64(over)/float64(b.N), "puts-over-20ms/fill")
		})
	}
}
