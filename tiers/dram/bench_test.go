package dram

import (
	"context"
	"log/slog"
	"testing"

	"github.com/zeebo/xxh3"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// BenchmarkGet measures a read hit and its release on a resident 4 KiB
// block, verified (the tier hashes the bytes) and reader-verified (it does
// not), single-threaded and in parallel, against a baseline measured in the
// same run: xxh3 of the same 4 KiB alone. It logs both single-threaded
// reads' ratios to the baseline.
func BenchmarkGet(b *testing.B) {
	tr, err := New(DefaultConfig(), slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	data := payload(1, 4096)
	if err := tr.Put(context.Background(), key(1), data, block.Checksum(data), block.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	var hashNs float64
	b.Run("baseline-xxh3", func(b *testing.B) {
		var sink uint64
		for b.Loop() {
			sink += xxh3.Hash(data)
		}
		hashNs = nsPerOp(b)
		if sink == 1 {
			b.Log(sink)
		}
	})
	var getNs [2]float64
	for i, tc := range []struct {
		name string
		opts block.GetOptions
	}{{"verified", block.GetOptions{}}, {"readerverify", block.GetOptions{ReaderVerifies: true}}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ref, err := tr.Get(context.Background(), key(1), tc.opts)
				if err != nil {
					b.Fatal(err)
				}
				ref.Release()
			}
			getNs[i] = nsPerOp(b)
		})
		b.Run(tc.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					ref, err := tr.Get(context.Background(), key(1), tc.opts)
					if err != nil {
						b.Error(err)
						return
					}
					ref.Release()
				}
			})
		})
	}
	if hashNs > 0 {
		b.Logf("4 KiB get: verified %.0f ns (%.2fx xxh3 alone), reader-verified %.0f ns (%.2fx); xxh3 alone %.0f ns",
			getNs[0], getNs[0]/hashNs, getNs[1], getNs[1]/hashNs, hashNs)
	}
}

func nsPerOp(b *testing.B) float64 { return float64(b.Elapsed().Nanoseconds()) / float64(b.N) }

// BenchmarkPut measures a put of a new 4 KiB block into a full arena of
// 1024 blocks without a lower tier, so each put also evicts one block,
// against a baseline measured in the same run: the copy and xxh3 of the
// same 4 KiB alone, the work a put does on the bytes. It logs the ratio.
func BenchmarkPut(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Capacity = 1024 * 4096
	tr, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	data := payload(1, 4096)
	sum := block.Checksum(data)
	ctx := context.Background()
	var baseNs, putNs float64
	b.Run("baseline-copy-xxh3", func(b *testing.B) {
		dst := make([]byte, len(data))
		var sink uint64
		for b.Loop() {
			copy(dst, data)
			sink += xxh3.Hash(data)
		}
		baseNs = nsPerOp(b)
		if sink == 1 {
			b.Log(sink)
		}
	})
	b.Run("evicting", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if err := tr.Put(ctx, key(i), data, sum, block.PutOptions{}); err != nil {
				b.Fatal(err)
			}
			i++
		}
		putNs = nsPerOp(b)
	})
	if tr.Stats().Evictions == 0 {
		b.Fatal("no put evicted")
	}
	if baseNs > 0 {
		b.Logf("4 KiB put with one eviction: %.0f ns, %.2fx the copy and xxh3 alone (%.0f ns)", putNs, putNs/baseNs, baseNs)
	}
}
