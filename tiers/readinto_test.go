package tiers

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/blocktest"
	"github.com/ctxtier/ctxtier/tiers/dram"
	"github.com/ctxtier/ctxtier/tiers/nvme"
)

// directManager is a manager with room for dramBlocks blocks of bs over a
// real NVMe tier, alone or as the first tier of a chain over a colder
// in-memory tier that reports itself as S3 (returned as cold, nil without).
func directManager(t *testing.T, dramBlocks int, chain bool) (*Manager, *nvme.Tier, Lower) {
	t.Helper()
	low, err := nvme.New(smallNVMe(t, 8<<20), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { low.Close() })
	var lower Lower = low
	var cold Lower
	if chain {
		cold = blocktest.New(blocktest.WithMedium(block.TierS3))
		if lower, err = NewChain(false, low, cold); err != nil {
			t.Fatal(err)
		}
	}
	dc := dram.DefaultConfig()
	dc.Capacity = int64(dramBlocks) * bs
	m, err := New(DefaultConfig(), dc, lower, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, low, cold
}

// TestDirectPromotion: a read of a block that write-back moved to NVMe is
// promoted by reading it straight into its new DRAM pages and served from
// that copy (Tier DRAM, exact bytes, one lower hit, one direct promotion);
// the next read is a DRAM hit. Through a chain the same holds for the NVMe
// tier, while a block only the colder tier holds is promoted by copy.
func TestDirectPromotion(t *testing.T) {
	for _, chain := range []bool{false, true} {
		name := map[bool]string{false: "nvme", true: "chain"}[chain]
		t.Run(name, func(t *testing.T) {
			m, low, cold := directManager(t, 4, chain)
			ctx := context.Background()
			for i := range 10 {
				if err := put(t, m, i, block.PutOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if m.DRAM().Contains(k(0)) || !low.Contains(k(0)) {
				t.Fatal("setup: k(0) not demoted to NVMe")
			}
			for range 2 {
				ref, err := m.Get(ctx, k(0), block.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(ref.Data, data(0)) || ref.Sum != block.Checksum(data(0)) || ref.Tier != block.TierDRAM {
					t.Fatalf("read %d bytes from %v, want k(0)'s bytes from DRAM", len(ref.Data), ref.Tier)
				}
				ref.Release()
			}
			s := m.Stats()
			if s.LowerHits != 1 || s.Promotions != 1 || s.DirectPromotions != 1 || !m.DRAM().Contains(k(0)) {
				t.Fatalf("stats %+v, want one lower hit promoted directly", s)
			}
			if cold == nil {
				return
			}
			odd := make([]byte, bs+100)
			for i := range odd {
				odd[i] = byte(i * 7)
			}
			if err := cold.Put(ctx, k(50), odd, block.Checksum(odd), block.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			misses := low.Stats().Misses
			ref, err := m.Get(ctx, k(50), block.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(ref.Data, odd) {
				t.Fatal("wrong bytes from the cold tier")
			}
			ref.Release()
			// One NVMe miss (the chain's Get): no direct read was tried for
			// a block whose hottest copy is in the colder tier.
			if got := low.Stats().Misses - misses; got != 1 {
				t.Fatalf("%d NVMe misses reading a cold-only block, want 1", got)
			}
			if s := m.Stats(); s.Promotions != 2 || s.DirectPromotions != 1 || !m.DRAM().Contains(k(50)) {
				t.Fatalf("stats %+v, want the cold block promoted by copy", s)
			}
		})
	}
}

// TestDirectPromotionOfADamagedBlock flips a byte of a demoted block on
// NVMe: the read reports it missing, DRAM holds nothing of it (its pages
// are free again), NVMe has dropped it, and every other block still reads.
func TestDirectPromotionOfADamagedBlock(t *testing.T) {
	m, low, _ := directManager(t, 4, false)
	ctx := context.Background()
	for i := range 10 {
		if err := put(t, m, i, block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	d, release, err := low.Descriptor(ctx, k(1))
	if err != nil {
		t.Fatal(err)
	}
	release()
	f, err := os.OpenFile(d.Path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := []byte{0}
	if _, err := f.ReadAt(b, d.DataOffset+100); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 1
	if _, err := f.WriteAt(b, d.DataOffset+100); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if ref, err := m.Get(ctx, k(1), block.GetOptions{}); !errors.Is(err, block.ErrNotFound) {
		ref.Release()
		t.Fatalf("damaged block served: %v", err)
	}
	// The slot reserved for it may have evicted (demoted) another block;
	// its own pages are free again.
	ds := m.DRAM().Stats()
	if m.DRAM().Contains(k(1)) || low.Contains(k(1)) || ds.ResidentBytes != ds.Blocks*bs || ds.AllocatedB != ds.ResidentBytes || low.Stats().Corruptions != 1 {
		t.Fatalf("after the damaged read: dram %+v, nvme holds it %v", ds, low.Contains(k(1)))
	}
	if s := m.Stats(); s.DirectPromotions != 0 || s.LowerHits != 0 {
		t.Fatalf("stats %+v", s)
	}
	for i := range 10 {
		if i == 1 {
			continue
		}
		ref, err := m.Get(ctx, k(i), block.GetOptions{})
		if err != nil || !bytes.Equal(ref.Data, data(i)) {
			t.Fatalf("k(%d) after the damaged read: %v", i, err)
		}
		ref.Release()
	}
}

// TestDirectPromotionConcurrent reads demoted blocks from many goroutines
// at once (run with -race): every read gets its block's exact bytes, each
// from DRAM or NVMe, while promotions evict one another.
func TestDirectPromotionConcurrent(t *testing.T) {
	m, _, _ := directManager(t, 6, false)
	ctx := context.Background()
	const n = 24
	for i := range n {
		if err := put(t, m, i, block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range 60 {
				i := (g*7 + r*5) % n
				ref, err := m.Get(ctx, k(i), block.GetOptions{})
				if err != nil {
					errc <- err
					return
				}
				ok := bytes.Equal(ref.Data, data(i))
				ref.Release()
				if !ok {
					errc <- errors.New("wrong bytes for " + k(i).String())
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if s := m.Stats(); s.DirectPromotions == 0 {
		t.Fatalf("no direct promotion: %+v", s)
	}
}

// TestDirectPromotionWithoutRoom: with every DRAM block pinned, a read of
// an NVMe block is served from NVMe with its exact bytes and not promoted,
// after one attempt to make room (the DRAM tier's no-space count rises by
// one), not a second by the copying path.
func TestDirectPromotionWithoutRoom(t *testing.T) {
	m, low, _ := directManager(t, 4, false)
	ctx := context.Background()
	for i := range 4 {
		if err := put(t, m, i, block.PutOptions{PinTTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	d := data(9)
	if err := low.Put(ctx, k(9), d, block.Checksum(d), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	noSpace := m.DRAM().Stats().NoSpace
	ref, err := m.Get(ctx, k(9), block.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ref.Data, d) || ref.Tier != block.TierNVMe {
		t.Fatalf("read %d bytes from %v, want k(9)'s bytes from NVMe", len(ref.Data), ref.Tier)
	}
	ref.Release()
	if got := m.DRAM().Stats().NoSpace - noSpace; got != 1 || m.Stats().Promotions != 0 || m.DRAM().Contains(k(9)) {
		t.Fatalf("%d attempts to make room, stats %+v; want one attempt and no promotion", got, m.Stats())
	}
}
