package tiers

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/blocktest"
	"github.com/ctxtier/ctxtier/tiers/dram"
	"github.com/ctxtier/ctxtier/tiers/nvme"
)

// TestPutChecksTheRealNVMeTierCheaply holds Manager.Put to the guarantee
// its lower-tier Stat gives, over the real NVMe tier whose presence filter
// answers that Stat for keys it does not hold: a key NVMe holds (and DRAM
// does not) with other bytes is a conflict, with the same bytes an
// idempotent put; and a put of a key NVMe has never seen reads no index
// entry (the filter's skip count rises by one per put).
func TestPutChecksTheRealNVMeTierCheaply(t *testing.T) {
	ctx := context.Background()
	low, err := nvme.New(smallNVMe(t, 4<<20), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { low.Close() })
	dc := dram.DefaultConfig()
	dc.Capacity = 64 * dram.PageSize
	m, err := New(DefaultConfig(), dc, low, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })

	// Blocks that live only in NVMe (put there directly, as a demotion or
	// an earlier run of the node leaves them).
	for i := 100; i < 104; i++ {
		d := data(i)
		if err := low.Put(ctx, k(i), d, block.Checksum(d), block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		key     int
		bytes   []byte
		wantErr error
		skips   uint64 // presence-filter skips the put adds
	}{
		{"other bytes than NVMe holds", 100, data(7), block.ErrConflict, 0},
		{"same bytes as NVMe holds", 101, data(101), nil, 0},
		{"other size than NVMe holds", 102, data(102)[:100], block.ErrConflict, 0},
		{"a key NVMe never held", 1, data(1), nil, 1},
		{"another new key", 2, data(2), nil, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := low.Stats().PresenceSkips
			err := m.Put(ctx, k(tc.key), tc.bytes, block.Checksum(tc.bytes), block.PutOptions{})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("put: %v, want %v", err, tc.wantErr)
			}
			if got := low.Stats().PresenceSkips - before; got != tc.skips {
				t.Fatalf("filter skips %d, want %d", got, tc.skips)
			}
			ref, err := m.Get(ctx, k(tc.key), block.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Release()
			want := tc.bytes
			if tc.wantErr != nil {
				want = data(tc.key) // the conflict changed nothing
			}
			if string(ref.Data) != string(want) {
				t.Fatal("wrong bytes after the put")
			}
		})
	}
}

// loadingLower is a lower tier whose index is still loading: Contains
// misses every block (as an S3 tier's does before its rebuild), Stat finds
// them.
type loadingLower struct{ *blocktest.Tier }

func (loadingLower) Contains(block.Key) bool { return false }
func (loadingLower) IndexLoaded() bool       { return false }

// TestPutAsksStatWhileTheLowerIndexLoads: before the lower tier's index is
// loaded, Put does not trust its Contains: a block only the lower tier
// holds still makes a put of other bytes a conflict.
func TestPutAsksStatWhileTheLowerIndexLoads(t *testing.T) {
	low := loadingLower{newMemLower()}
	putBelow(t, low, 7)
	m := newManager(t, low, 4)
	other := data(8)
	if err := m.Put(context.Background(), k(7), other, block.Checksum(other), block.PutOptions{}); !errors.Is(err, block.ErrConflict) {
		t.Fatalf("put over a block the loading lower tier holds: %v, want a conflict", err)
	}
	if m.DRAM().Contains(k(7)) {
		t.Fatal("the conflicting bytes reached DRAM")
	}
}

// smallNVMe is a test NVMe tier's configuration: 1 MiB segments,
// capacity bytes in all, blocks up to 256 KiB, an index of about 4 MiB.
func smallNVMe(t *testing.T, capacity int64) nvme.Config {
	c := nvme.DefaultConfig()
	c.Dir = t.TempDir()
	c.SegmentSize = 1 << 20
	c.Capacity = capacity
	c.MaxBlockSize = 256 << 10
	c.Index = nvme.IndexConfig{MemTableSize: 1 << 20, NumMemtables: 1, BlockCacheSize: 1 << 20, IndexCacheSize: 1 << 20}
	return c
}
