package nvme

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/zeebo/xxh3"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/descriptor"
)

// TestReadInto reads blocks of sizes around the page and chunk boundaries
// straight into an aligned buffer: the payload, its CRC-32C and its xxh3-64
// come back as put; the padding after it is the extent's zeros; a wrong
// length, a short buffer and a missing key are refused without a read.
func TestReadInto(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.MaxBlockSize = 3 << 20
	cfg.SegmentSize = 8 << 20
	cfg.Capacity = 64 << 20
	tr := open(t, cfg)
	defer tr.Close()
	ctx := context.Background()
	sizes := []int{1, 4095, 4096, 4097, 100000, ChunkedReadMin - 1, ChunkedReadMin, ChunkedReadMin + 4097, 2<<20 + 12345}
	for i, n := range sizes {
		k := key(uint64(i + 1))
		data := payload(uint64(i+1), n)
		put(t, tr, k, data, block.PutOptions{})
		dst := descriptor.AlignedBuffer(int(descriptor.AlignUp(int64(n))))
		for j := range dst {
			dst[j] = 0xEE
		}
		sum, fp, err := tr.ReadInto(ctx, k, int64(n), dst)
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if !bytes.Equal(dst[:n], data) || sum != block.Checksum(data) || fp != xxh3.Hash(data) {
			t.Fatalf("%d bytes: wrong payload, sum %08x or fp %016x", n, sum, fp)
		}
		for j := n; j < len(dst); j++ {
			if dst[j] != 0 {
				t.Fatalf("%d bytes: padding byte %d is %#x, want the extent's zero", n, j, dst[j])
			}
		}
	}
	hits := tr.Stats().Hits
	k := key(3) // 4096 bytes
	for _, tc := range []struct {
		name   string
		key    block.Key
		length int64
		dst    []byte
		want   error
	}{
		{"other length", k, 4095, descriptor.AlignedBuffer(4096), block.ErrConflict},
		{"short buffer", key(5), 100000, descriptor.AlignedBuffer(4096), block.ErrInvalidArgument},
		{"missing", key(99), 4096, descriptor.AlignedBuffer(4096), block.ErrNotFound},
	} {
		if _, _, err := tr.ReadInto(ctx, tc.key, tc.length, tc.dst); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if got := tr.Stats().Hits; got != hits {
		t.Fatalf("refused reads counted as hits: %d -> %d", hits, got)
	}
}

// TestReadIntoCorruption damages a block's payload or header on disk:
// ReadInto reports it missing, drops and counts it (as Get does), and the
// other blocks still read.
func TestReadIntoCorruption(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   func(d Descriptor) int64
	}{
		{"payload", func(d Descriptor) int64 { return d.DataOffset + d.Length/2 }},
		{"header key", func(d Descriptor) int64 { return d.Offset + 9 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, _ := damagedTier(t, tc.at)
			ctx := context.Background()
			dst := descriptor.AlignedBuffer(int(descriptor.AlignUp(20000)))
			if _, _, err := tr.ReadInto(ctx, key(2), 20000, dst); !errors.Is(err, block.ErrNotFound) {
				t.Fatalf("damaged block read: %v", err)
			}
			if s := tr.Stats(); s.Corruptions != 1 || tr.Contains(key(2)) {
				t.Fatalf("after corruption: %+v, contains %v", s, tr.Contains(key(2)))
			}
			if _, _, err := tr.ReadInto(ctx, key(3), 20000, dst); err != nil || !bytes.Equal(dst[:20000], payload(3, 20000)) {
				t.Fatalf("intact block: %v", err)
			}
		})
	}
}
