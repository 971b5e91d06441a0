package dram

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/descriptor"
)

// mapReadOnly maps tr's whole memory file read-only, as a co-located client does.
func mapReadOnly(t *testing.T, tr *Tier) []byte {
	t.Helper()
	f, err := os.Open(tr.MemFile())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(m) })
	return m
}

func describe(t *testing.T, tr *Tier, k block.Key) (Descriptor, func()) {
	t.Helper()
	d, release, err := tr.DescriptorUnverified(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	return d, release
}

func TestVersionTableLayout(t *testing.T) {
	for _, tc := range []struct {
		arena, table int64
	}{
		{PageSize, PageSize},
		{1 << 20, PageSize},                  // 256 words
		{3 << 20, PageSize * 2},              // 768 words = 6 KiB
		{1 << 30, 2 << 20},                   // 2 MiB per GiB, a 2 MiB multiple
		{1<<30 + PageSize, 2<<20 + PageSize}, // one word past 2 MiB, page-rounded
		{8 << 20, 2 << 20},                   // 16 KiB of words, rounded to 2 MiB
		{int64(1) << 40, int64(1) << 31},     // 1 TiB: 2 GiB
	} {
		if got := tableSize(tc.arena); got != tc.table {
			t.Errorf("tableSize(%d) = %d, want %d", tc.arena, got, tc.table)
		}
	}

	tr := newTier(t, 1<<20)
	m := mapReadOnly(t, tr)
	if want := 1<<20 + tableSize(1<<20); int64(len(m)) != want {
		t.Fatalf("memory file is %d bytes, want arena + table = %d", len(m), want)
	}
	if got := tr.Stats().Capacity; got != 1<<20 {
		t.Fatalf("capacity %d: the table must not count as arena", got)
	}
	// Every word starts at the same per-file value.
	base := binary.LittleEndian.Uint64(m[1<<20:])
	for p := range int64(1 << 20 / PageSize) {
		if w := binary.LittleEndian.Uint64(m[1<<20+8*p:]); w != base {
			t.Fatalf("word %d is %d, want the file's start %d", p, w, base)
		}
	}
	if tr2 := newTier(t, 1<<20); binary.LittleEndian.Uint64(mapReadOnly(t, tr2)[1<<20:]) == base {
		t.Fatal("two memory files start their versions at the same value")
	}
	data := payload(1, 3*PageSize+5)
	if err := put(t, tr, key(0), payload(0, 10), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := put(t, tr, key(1), data, block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, get := range []func() (Descriptor, func(), error){
		func() (Descriptor, func(), error) { return tr.Descriptor(context.Background(), key(1)) },
		func() (Descriptor, func(), error) { return tr.DescriptorUnverified(context.Background(), key(1)) },
	} {
		d, release, err := get()
		if err != nil {
			t.Fatal(err)
		}
		if d.VersionOffset != 1<<20+8*(d.Offset/PageSize) || d.Version != base {
			t.Fatalf("descriptor %+v: want the word of page %d at %d holding %d", d, d.Offset/PageSize, 1<<20+8*(d.Offset/PageSize), base)
		}
		buf := make([]byte, d.Length)
		if !descriptor.CopyVersioned(buf, m, d.Offset, d.Length, d.VersionOffset, d.Version) || !bytes.Equal(buf, data) {
			t.Fatal("a versioned copy of a leased block failed")
		}
		release()
	}
}

func TestCopyVersionedRefusesBadArguments(t *testing.T) {
	tr := newTier(t, 64<<10)
	m := mapReadOnly(t, tr)
	if err := put(t, tr, key(1), payload(1, 100), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	d, release := describe(t, tr, key(1))
	defer release()
	buf := make([]byte, 200)
	for _, tc := range []struct {
		name           string
		dst            []byte
		off, n, verOff int64
	}{
		{"short dst", buf[:99], d.Offset, d.Length, d.VersionOffset},
		{"range past the mapping", buf, int64(len(m)) - 50, 100, d.VersionOffset},
		{"negative offset", buf, -1, 100, d.VersionOffset},
		{"negative length", buf, 0, -1, d.VersionOffset},
		{"word past the mapping", buf, d.Offset, d.Length, int64(len(m)) - 4},
		{"misaligned word", buf, d.Offset, d.Length, d.VersionOffset + 1},
		{"negative word offset", buf, d.Offset, d.Length, -8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if descriptor.CopyVersioned(tc.dst, m, tc.off, tc.n, tc.verOff, d.Version) {
				t.Fatal("accepted")
			}
		})
	}
	if !descriptor.CopyVersioned(buf, m, d.Offset, d.Length, d.VersionOffset, d.Version) {
		t.Fatal("the good descriptor was refused")
	}
	if descriptor.CopyVersioned(buf, m, d.Offset, d.Length, d.VersionOffset, d.Version+1) {
		t.Fatal("a wrong version was accepted")
	}
}

// TestVersionBumpsOnFreeAndReuse frees a block each way the tier frees one
// and checks that its first page's word moved before another block took the
// page, so a stale copy is refused and a fresh one accepted.
func TestVersionBumpsOnFreeAndReuse(t *testing.T) {
	const bs = 3*PageSize + 100
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		leased bool // the stale descriptor's lease is still held while the block is removed
		remove func(t *testing.T, tr *Tier, clock *time.Time)
	}{
		{"delete", false, func(t *testing.T, tr *Tier, _ *time.Time) {
			if err := tr.Delete(ctx, key(1)); err != nil {
				t.Fatal(err)
			}
		}},
		{"delete while leased", true, func(t *testing.T, tr *Tier, _ *time.Time) {
			if err := tr.Delete(ctx, key(1)); err != nil {
				t.Fatal(err)
			}
		}},
		{"expiry", false, func(t *testing.T, tr *Tier, clock *time.Time) {
			*clock = clock.Add(time.Hour)
			if n := tr.Sweep(); n != 1 {
				t.Fatalf("swept %d blocks, want 1", n)
			}
		}},
		{"eviction", false, nil}, // the next put evicts it: the arena holds one block
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTier(t, 4*PageSize)
			clock := time.Unix(1000, 0)
			tr.now = func() time.Time { return clock }
			m := mapReadOnly(t, tr)
			a, b := payload(1, bs), payload(2, bs)
			if err := put(t, tr, key(1), a, block.PutOptions{Expires: clock.Add(time.Minute)}); err != nil {
				t.Fatal(err)
			}
			da, release := describe(t, tr, key(1))
			if !tc.leased {
				release()
			}
			word := func() uint64 { return binary.LittleEndian.Uint64(m[da.VersionOffset:]) }
			if word() != da.Version {
				t.Fatalf("word %d, descriptor %d", word(), da.Version)
			}
			if tc.remove != nil {
				tc.remove(t, tr, &clock)
				if tc.leased {
					if word() != da.Version {
						t.Fatal("the version moved while the block was still leased")
					}
					release()
				}
				if word() != da.Version+1 {
					t.Fatalf("after the free the word is %d, want %d", word(), da.Version+1)
				}
			}
			if err := put(t, tr, key(2), b, block.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			db, releaseB := describe(t, tr, key(2))
			defer releaseB()
			if db.Offset != da.Offset || db.VersionOffset != da.VersionOffset {
				t.Fatalf("block 2 at %d (word %d), block 1 was at %d (word %d): the test needs the pages reused",
					db.Offset, db.VersionOffset, da.Offset, da.VersionOffset)
			}
			if db.Version != da.Version+1 {
				t.Fatalf("reused page has version %d, want %d", db.Version, da.Version+1)
			}
			buf := make([]byte, bs)
			if descriptor.CopyVersioned(buf, m, da.Offset, da.Length, da.VersionOffset, da.Version) {
				t.Fatalf("a copy through the stale descriptor was accepted (bytes are block 1's: %v)", bytes.Equal(buf, a))
			}
			if !bytes.Equal(buf, b) {
				t.Fatal("the stale range should hold block 2 now")
			}
			if !descriptor.CopyVersioned(buf, m, db.Offset, db.Length, db.VersionOffset, db.Version) || !bytes.Equal(buf, b) {
				t.Fatal("a copy through the fresh descriptor failed")
			}
		})
	}
}

func TestVersionUnchangedByOtherBlocksFrees(t *testing.T) {
	// A free bumps only the first page of the run it frees: a neighbour's
	// word stays, and so do its readers.
	tr := newTier(t, 16*PageSize)
	m := mapReadOnly(t, tr)
	for i := range 4 {
		if err := put(t, tr, key(i), payload(uint64(i), 2*PageSize), block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	d2, release := describe(t, tr, key(2))
	defer release()
	for _, i := range []int{0, 1, 3} {
		if err := tr.Delete(context.Background(), key(i)); err != nil {
			t.Fatal(err)
		}
	}
	// Refill the freed pages on both sides of block 2.
	for i, n := range map[int]int{9: 4, 10: 8} {
		if err := put(t, tr, key(i), payload(uint64(i), n*PageSize), block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if s := tr.Stats(); s.AllocatedB != 14*PageSize {
		t.Fatalf("allocated %d bytes, want 14 pages", s.AllocatedB)
	}
	buf := make([]byte, d2.Length)
	if !descriptor.CopyVersioned(buf, m, d2.Offset, d2.Length, d2.VersionOffset, d2.Version) || !bytes.Equal(buf, payload(2, 2*PageSize)) {
		t.Fatal("neighbours' frees invalidated a leased block")
	}
}

// TestVersionedReadsUnderChurn races versioned copies through descriptors
// whose leases were already given back against puts, deletes and evictions
// that reuse the pages: a copy may be refused, but one that is accepted must
// hold exactly the described block's bytes.
func TestVersionedReadsUnderChurn(t *testing.T) {
	const (
		bs   = 2*PageSize + 300
		keys = 32
	)
	tr := newTier(t, 6*3*PageSize) // room for 6 blocks
	m := mapReadOnly(t, tr)
	ctx := context.Background()
	blocks := make([][]byte, keys)
	for i := range blocks {
		blocks[i] = payload(uint64(i), bs)
	}
	deadline := time.Now().Add(time.Second)
	var (
		wg                        sync.WaitGroup
		accepted, refused, writes atomic.Int64
		stop                      atomic.Bool
	)
	errs := make(chan error, 8)
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 2))
			for !stop.Load() {
				i := r.IntN(keys)
				if r.IntN(3) == 0 {
					_ = tr.Delete(ctx, key(i))
				} else if err := tr.Put(ctx, key(i), blocks[i], block.Checksum(blocks[i]), block.PutOptions{}); err != nil && !errors.Is(err, block.ErrNoSpace) {
					errs <- err
					return
				}
				writes.Add(1)
			}
		}()
	}
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 3))
			buf := make([]byte, bs)
			for !stop.Load() {
				i := r.IntN(keys)
				d, release, err := tr.DescriptorUnverified(ctx, key(i))
				if err != nil {
					continue
				}
				release() // from here on the pages may be freed and reused under the copy
				if !descriptor.CopyVersioned(buf, m, d.Offset, d.Length, d.VersionOffset, d.Version) {
					refused.Add(1)
					continue
				}
				accepted.Add(1)
				if !bytes.Equal(buf, blocks[i]) {
					errs <- fmt.Errorf("block %d: an accepted versioned copy holds other bytes", i)
					return
				}
			}
		}()
	}
	for time.Now().Before(deadline) && len(errs) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d writes, %d copies accepted, %d refused", writes.Load(), accepted.Load(), refused.Load())
	if accepted.Load() == 0 {
		t.Fatal("no copy was accepted: the test checked nothing")
	}
}
