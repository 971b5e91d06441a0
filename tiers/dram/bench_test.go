package dram

import (
	"context"
	"log/slog"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// BenchmarkGet measures a read hit and its release on a resident 4 KiB
// block, verified (the tier hashes the bytes) and reader-verified (it does
// not), single-threaded and in parallel.
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
	for _, tc := range []struct {
		name string
		ctx  context.Context
	}{{"verified", context.Background()}, {"readerverify", block.WithReaderVerify(context.Background())}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ref, err := tr.Get(tc.ctx, key(1))
				if err != nil {
					b.Fatal(err)
				}
				ref.Release()
			}
		})
		b.Run(tc.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					ref, err := tr.Get(tc.ctx, key(1))
					if err != nil {
						b.Error(err)
						return
					}
					ref.Release()
				}
			})
		})
	}
}

// BenchmarkPut measures a put of a new 4 KiB block into a full arena of
// 1024 blocks without a lower tier, so each put also evicts one block.
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
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := tr.Put(ctx, key(i), data, sum, block.PutOptions{}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
