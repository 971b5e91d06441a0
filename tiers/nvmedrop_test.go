package tiers

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/tiers/dram"
	"github.com/ctxtier/ctxtier/tiers/nvme"
)

// TestOnDropWithRealNVMeEviction wires the real DRAM and NVMe tiers as ctxd
// does (nvme.Config.OnEvict -> LowerEvicted): NVMe reclaims the segment
// holding a block while DRAM keeps a clean, hot copy of it (no drop), then
// DRAM evicts that copy (the drop, exactly once). Every other key is
// checked too: reported once iff no tier holds it.
func TestOnDropWithRealNVMeEviction(t *testing.T) {
	const size = 60000 // about 16 per 1 MiB NVMe segment, 15 DRAM pages
	payload := func(i int) []byte {
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(i*131 + j*7 + j>>8)
		}
		return b
	}
	tests := []struct {
		name string
		// clean leaves k(0) as a clean DRAM copy of a block NVMe holds.
		clean func(t *testing.T, m *Manager, fill func(n int))
	}{
		{"write-through", func(t *testing.T, m *Manager, _ func(int)) {
			d := payload(0)
			if err := m.Put(context.Background(), k(0), d, block.Checksum(d), block.PutOptions{WriteThrough: true}); err != nil {
				t.Fatal(err)
			}
		}},
		{"write-back, demoted then promoted", func(t *testing.T, m *Manager, fill func(int)) {
			d := payload(0)
			if err := m.Put(context.Background(), k(0), d, block.Checksum(d), block.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			fill(10) // pushes k(0) out of DRAM, down to NVMe
			if m.DRAM().Contains(k(0)) {
				t.Fatal("k(0) still in DRAM after the fill")
			}
			ref, err := m.Get(context.Background(), k(0), block.GetOptions{}) // promoted: clean
			if err != nil {
				t.Fatal(err)
			}
			ref.Release()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			var mu sync.Mutex
			drops := map[block.Key]int{}
			var m *Manager
			ncfg := smallNVMe(t, 3<<20)
			ncfg.OnEvict = func(key block.Key, data []byte, sum uint32) { m.LowerEvicted(key, data, sum) }
			low, err := nvme.New(ncfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { low.Close() })
			cfg := DefaultConfig()
			cfg.OnDrop = func(key block.Key) { mu.Lock(); drops[key]++; mu.Unlock() }
			dc := dram.DefaultConfig()
			dc.Capacity = 8 * 15 * dram.PageSize // 8 blocks
			dc.MaxBlockSize = 256 << 10
			if m, err = New(cfg, dc, low, slog.New(slog.DiscardHandler)); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			next := 1
			fill := func(n int) {
				for range n {
					d := payload(next)
					if err := m.Put(ctx, k(next), d, block.Checksum(d), block.PutOptions{WriteThrough: true}); err != nil {
						t.Fatal(err)
					}
					next++
				}
			}
			tc.clean(t, m, fill)
			if !low.Contains(k(0)) || !m.DRAM().Contains(k(0)) {
				t.Fatalf("setup: k(0) in nvme %v, dram %v; want both", low.Contains(k(0)), m.DRAM().Contains(k(0)))
			}
			// Keep k(0) hot in DRAM (hits there never touch NVMe's copy)
			// until NVMe reclaims the segment it is in.
			for low.Contains(k(0)) {
				if next > 400 {
					t.Fatal("NVMe never evicted k(0)")
				}
				fill(1)
				ref, err := m.Get(ctx, k(0), block.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if ref.Tier != block.TierDRAM {
					t.Fatalf("k(0) read from %v", ref.Tier)
				}
				ref.Release()
			}
			mu.Lock()
			if drops[k(0)] != 0 {
				t.Fatal("k(0) reported dropped while DRAM still holds it")
			}
			mu.Unlock()
			fill(10) // now DRAM evicts its clean copy: the node's last one
			mu.Lock()
			defer mu.Unlock()
			if m.Contains(k(0)) || drops[k(0)] != 1 {
				t.Fatalf("k(0): held %v, reported %d times; want gone and reported once", m.Contains(k(0)), drops[k(0)])
			}
			for i := range next {
				held, n := m.Contains(k(i)), drops[k(i)]
				if held && n != 0 || !held && n != 1 {
					t.Fatalf("%v: held %v, reported %d times", k(i), held, n)
				}
			}
			if s := low.Stats(); s.Evictions == 0 {
				t.Fatalf("nvme evicted nothing: %+v", s)
			}
		})
	}
}
