package dram

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// flip corrupts byte at of key's bytes in the arena, as a memory fault would.
func flip(tr *Tier, k block.Key, at int64) {
	tr.mu.Lock()
	e := tr.entries.At(tr.index[k])
	tr.arena[int64(e.page)*PageSize+at] ^= 0x40
	tr.mu.Unlock()
}

// A read with block.GetOptions.ReaderVerifies skips the tier's pass but
// hands out the CRC-32C recorded at put time, so the reader's check catches
// a block corrupted at rest; the reader's plain re-read then verifies,
// counts and drops it. Every other read verifies as always.
func TestReaderVerifyGet(t *testing.T) {
	bg := context.Background()
	cases := []struct {
		name    string
		opts    block.GetOptions
		corrupt bool
		skips   bool // the tier leaves the check to the reader
	}{
		{"plain, intact", block.GetOptions{}, false, false},
		{"reader verifies, intact", block.GetOptions{ReaderVerifies: true}, false, true},
		{"plain with a retain window, intact", block.GetOptions{Retain: time.Minute}, false, false},
		{"plain, corrupt", block.GetOptions{}, true, false},
		{"reader verifies, corrupt", block.GetOptions{ReaderVerifies: true}, true, true},
		{"plain with a retain window, corrupt", block.GetOptions{Retain: time.Minute}, true, false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTier(t, 1<<20)
			k := key(i)
			data := payload(uint64(i), 10000)
			sum := block.Checksum(data)
			if err := put(t, tr, k, data, block.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			if tc.corrupt {
				flip(tr, k, 4321)
			}
			ref, err := tr.Get(bg, k, tc.opts)
			s := tr.Stats()
			switch {
			case tc.corrupt && !tc.skips:
				if !errors.Is(err, block.ErrNotFound) || s.Corruptions != 1 || tr.Contains(k) {
					t.Fatalf("corrupt block, tier check: %v, stats %+v", err, s)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			defer ref.Release()
			if ref.Sum != sum {
				t.Fatalf("Sum %08x, want the CRC-32C recorded at put %08x", ref.Sum, sum)
			}
			wantSkips := uint64(0)
			if tc.skips {
				wantSkips = 1
			}
			if s.ReaderVerified != wantSkips || s.Hits != 1 || s.Corruptions != 0 {
				t.Fatalf("stats %+v, want %d reader-verified", s, wantSkips)
			}
			if !tc.corrupt {
				if !bytes.Equal(ref.Data, data) {
					t.Fatal("intact block: wrong bytes")
				}
				return
			}
			// Handed out unchecked: the reader's CRC-32C sees the damage.
			if block.Checksum(ref.Data) == ref.Sum {
				t.Fatal("the reader's check must fail on the corrupt bytes")
			}
			ref.Release()
			// The reader's re-read without the mark: verified, counted, dropped.
			if _, err := tr.Get(bg, k, block.GetOptions{}); !errors.Is(err, block.ErrNotFound) {
				t.Fatalf("re-read of the corrupt block: %v, want ErrNotFound", err)
			}
			if s := tr.Stats(); s.Corruptions != 1 || s.Blocks != 0 || tr.Contains(k) {
				t.Fatalf("corruption must be counted and the block dropped: %+v", s)
			}
		})
	}
}

// Descriptor verifies the bytes: it takes no read options.
func TestDescriptorIgnoresReaderVerify(t *testing.T) {
	tr := newTier(t, 1<<20)
	if err := put(t, tr, key(1), payload(1, 5000), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	flip(tr, key(1), 7)
	if _, _, err := tr.Descriptor(context.Background(), key(1)); !errors.Is(err, block.ErrNotFound) {
		t.Fatalf("Descriptor of a corrupt block: %v, want ErrNotFound", err)
	}
	if s := tr.Stats(); s.Corruptions != 1 || s.ReaderVerified != 0 || tr.Contains(key(1)) {
		t.Fatalf("stats %+v", s)
	}
}
