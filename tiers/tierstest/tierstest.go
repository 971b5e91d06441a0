// Package tierstest holds helpers for tests of the tier stack and of the
// layers above it: damaging a DRAM-resident block in place, as a memory
// fault would, to check that it is never served.
package tierstest

import (
	"context"
	"os"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/tiers"
)

// CorruptDRAM flips one bit of byte at of k's bytes in m's DRAM arena,
// through the arena's memory file (writing it is the only way in from
// outside the tier): the block keeps its checksums, so only a check of the
// bytes can tell.
func CorruptDRAM(tb testing.TB, m *tiers.Manager, k block.Key, at int64) {
	tb.Helper()
	d, release, err := m.Descriptor(context.Background(), k)
	if err != nil {
		tb.Fatal(err)
	}
	defer release()
	if d.Tier != block.TierDRAM || at < 0 || at >= d.Length {
		tb.Fatalf("CorruptDRAM: %s is in %s, %d bytes; byte %d", k, d.Tier, d.Length, at)
	}
	f, err := os.OpenFile(d.Path, os.O_RDWR, 0)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, d.DataOffset+at); err != nil {
		tb.Fatal(err)
	}
	b[0] ^= 0x04
	if _, err := f.WriteAt(b, d.DataOffset+at); err != nil {
		tb.Fatal(err)
	}
}
