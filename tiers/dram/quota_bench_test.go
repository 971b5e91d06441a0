package dram

import (
	"context"
	"log/slog"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// BenchmarkQuotaEviction compares, in one run, a put that must evict one
// block because its namespace is at its DRAM quota ("quota": the victim
// comes from the namespace's own list) with a put that must evict one
// block because the whole arena is full ("global": the victim comes from
// the replacement policy), both 4 KiB blocks without a lower tier, and a
// read hit ("get", which also moves the block to the head of its
// namespace's list). Read the printed ratio.
func BenchmarkQuotaEviction(b *testing.B) {
	const bs = 4096
	const resident = 1024
	mk := func(capacity, quota int64) *Tier {
		cfg := DefaultConfig()
		cfg.Capacity = capacity
		cfg.Quota = func(ns string) int64 {
			if ns == "q" {
				return quota
			}
			return 0
		}
		tr, err := New(cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		return tr
	}
	global := mk(resident*bs, 0)            // full at 1024 blocks
	quota := mk(4*resident*bs, resident*bs) // "q" full at 1024 blocks, arena at a quarter
	defer global.Close()
	defer quota.Close()
	ctx := context.Background()
	d := make([]byte, bs)
	put := func(tr *Tier, ns string, i int) {
		d[0], d[1], d[2] = byte(i), byte(i>>8), byte(i>>16)
		if err := tr.Put(ctx, block.NewKey(ns, uint64(i)), d, block.Checksum(d), block.PutOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	for i := range resident {
		put(global, "g", i)
		put(quota, "q", i)
	}
	var ns [2]float64
	for j, c := range []struct {
		name string
		tr   *Tier
		ns   string
	}{{"global", global, "g"}, {"quota", quota, "q"}} {
		next := resident
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				put(c.tr, c.ns, next)
				next++
			}
			ns[j] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		})
		if c.tr.Stats().Evictions == 0 {
			b.Fatalf("%s: no eviction happened", c.name)
		}
	}
	var getNs float64
	b.Run("get", func(b *testing.B) {
		i := 0
		for b.Loop() {
			ref, err := quota.Get(ctx, block.NewKey("q", uint64(i%resident)), block.GetOptions{ReaderVerifies: true})
			if err == nil {
				ref.Release()
			}
			i++
		}
		getNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	if ns[0] > 0 {
		b.Logf("put with one eviction: quota %.0f ns, global %.0f ns, ratio %.2f; get hit %.0f ns", ns[1], ns[0], ns[1]/ns[0], getNs)
	}
}
