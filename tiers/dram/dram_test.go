package dram

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

func newTier(t *testing.T, capacity int64) *Tier {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Capacity = capacity
	tr, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func payload(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, 7))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func put(t *testing.T, tr *Tier, k block.Key, data []byte, opts block.PutOptions) error {
	t.Helper()
	return tr.Put(context.Background(), k, data, block.Checksum(data), opts)
}

// readBack gets k from tr and fails t unless it holds exactly data, with
// the checksum recorded at put, in DRAM.
func readBack(t *testing.T, tr *Tier, k block.Key, data []byte) {
	t.Helper()
	ref, err := tr.Get(context.Background(), k, block.GetOptions{})
	if err != nil {
		t.Fatalf("get %v: %v", k, err)
	}
	defer ref.Release()
	if !bytes.Equal(ref.Data, data) || ref.Sum != block.Checksum(data) || ref.Tier != block.TierDRAM {
		t.Fatalf("get %v: %d bytes (sum %08x, tier %v), want the %d bytes put (sum %08x) from DRAM",
			k, len(ref.Data), ref.Sum, ref.Tier, len(data), block.Checksum(data))
	}
}

func key(i int) block.Key { return block.NewKey("default", uint64(i)) }

func TestPutGetRoundTrip(t *testing.T) {
	tr := newTier(t, 1<<20)
	cases := []struct {
		name string
		size int
	}{{"one byte", 1}, {"page minus one", PageSize - 1}, {"page", PageSize}, {"page plus one", PageSize + 1}, {"64KiB", 64 << 10}}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := payload(uint64(i), tc.size)
			if err := put(t, tr, key(i), data, block.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			readBack(t, tr, key(i), data)
		})
	}
}

func TestPutIdempotentAndConflict(t *testing.T) {
	tr := newTier(t, 1<<20)
	a, b := payload(1, 5000), payload(2, 5000)
	if err := put(t, tr, key(1), a, block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := put(t, tr, key(1), a, block.PutOptions{}); err != nil {
		t.Fatalf("identical re-put must succeed: %v", err)
	}
	if err := put(t, tr, key(1), b, block.PutOptions{}); !errors.Is(err, block.ErrConflict) {
		t.Fatalf("conflicting re-put: got %v, want ErrConflict", err)
	}
	ref, err := tr.Get(context.Background(), key(1), block.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Release()
	if string(ref.Data) != string(a) {
		t.Fatal("conflicting re-put overwrote the block")
	}
	if s := tr.Stats(); s.Blocks != 1 || s.ResidentBytes != 5000 {
		t.Fatalf("stats after conflict: %+v", s)
	}
}

// TestFillPastCapacity fills the tier far past its capacity and checks the
// three promises: resident bytes never exceed capacity, pinned and leased
// blocks survive, and eviction follows LRU order within a priority class
// (lower classes first).
func TestFillPastCapacity(t *testing.T) {
	const bs = 64 << 10
	const capBlocks = 16
	tr := newTier(t, capBlocks*bs)
	ctx := context.Background()
	data := func(i int) []byte { return payload(uint64(i), bs) }

	// Blocks 0..3 in priority class 0 (evicted first), 4..15 in class 1.
	for i := range capBlocks {
		prio := uint8(1)
		if i < 4 {
			prio = 0
		}
		if err := put(t, tr, key(i), data(i), block.PutOptions{Priority: prio}); err != nil {
			t.Fatal(err)
		}
	}
	// Pin block 4 (oldest of class 1), lease block 5, touch block 6 (now most recent).
	if err := tr.Pin(ctx, key(4), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	lease, err := tr.Get(ctx, key(5), block.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	touch, err := tr.Get(ctx, key(6), block.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	touch.Release()

	// Each new block evicts exactly one: first the class-0 blocks 0..3 in
	// insertion order, then class 1 in LRU order skipping 4 (pinned) and 5
	// (leased): 7, 8, ..., 15, then 6 (touched last).
	wantOrder := []int{0, 1, 2, 3, 7, 8, 9, 10, 11, 12, 13, 14, 15, 6}
	for n, want := range wantOrder {
		i := 100 + n
		if err := put(t, tr, key(i), data(i), block.PutOptions{Priority: 1}); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		if tr.Contains(key(want)) {
			t.Fatalf("after put %d block %d should have been evicted", i, want)
		}
		for _, keep := range wantOrder[n+1:] {
			if !tr.Contains(key(keep)) {
				t.Fatalf("after put %d block %d was evicted too early", i, keep)
			}
		}
		s := tr.Stats()
		if s.ResidentBytes > s.Capacity || s.AllocatedB > s.Capacity {
			t.Fatalf("resident %d / allocated %d exceed capacity %d", s.ResidentBytes, s.AllocatedB, s.Capacity)
		}
	}
	for _, k := range []int{4, 5} {
		if !tr.Contains(key(k)) {
			t.Fatalf("pinned/leased block %d was evicted", k)
		}
	}
	// The leased bytes are intact while the lease is held, and after release
	// block 5 becomes evictable.
	if string(lease.Data) != string(data(5)) {
		t.Fatal("leased bytes changed under eviction pressure")
	}
	lease.Release()
	// Block 5 was last moved to the front when the put of block 113 skipped
	// it, so it is now older than 113 and newer than 100..112: further puts
	// evict 100..112 and then 5 (4 stays pinned), and never 113 before 5.
	for i := 1000; tr.Contains(key(5)); i++ {
		if i > 1020 {
			t.Fatal("block 5 was never evicted after its lease ended")
		}
		if err := put(t, tr, key(i), data(i), block.PutOptions{Priority: 1}); err != nil {
			t.Fatal(err)
		}
		if !tr.Contains(key(113)) {
			t.Fatal("block 113 evicted before the older block 5")
		}
	}
	for i := 100; i <= 112; i++ {
		if tr.Contains(key(i)) {
			t.Fatalf("block %d is older than 5 and should have gone first", i)
		}
	}
	if !tr.Contains(key(4)) {
		t.Fatal("pinned block 4 evicted")
	}
}

func TestNoSpaceWhenEverythingPinned(t *testing.T) {
	const bs = 8 << 10
	tr := newTier(t, 4*bs)
	for i := range 4 {
		if err := put(t, tr, key(i), payload(uint64(i), bs), block.PutOptions{PinTTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	err := put(t, tr, key(9), payload(9, bs), block.PutOptions{})
	if !errors.Is(err, block.ErrNoSpace) {
		t.Fatalf("got %v, want ErrNoSpace", err)
	}
	for i := range 4 {
		if !tr.Contains(key(i)) {
			t.Fatalf("pinned block %d lost", i)
		}
	}
	if err := put(t, tr, key(10), payload(10, 5*bs), block.PutOptions{}); !errors.Is(err, block.ErrTooLarge) {
		t.Fatalf("block larger than the arena: got %v, want ErrTooLarge", err)
	}
}

func TestPinExpiresThenEvictable(t *testing.T) {
	const bs = 8 << 10
	tr := newTier(t, 2*bs)
	now := time.Now()
	tr.now = func() time.Time { return now }
	if err := put(t, tr, key(0), payload(0, bs), block.PutOptions{PinTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := put(t, tr, key(1), payload(1, bs), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Minute)
	if err := put(t, tr, key(2), payload(2, bs), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if tr.Contains(key(0)) {
		t.Fatal("block 0's pin expired; as the LRU block it should have been evicted")
	}
}

func TestTTLExpiry(t *testing.T) {
	tr := newTier(t, 1<<20)
	now := time.Now()
	tr.now = func() time.Time { return now }
	if err := put(t, tr, key(0), payload(0, 100), block.PutOptions{Expires: now.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if !tr.Contains(key(0)) {
		t.Fatal("block should be present before its TTL")
	}
	now = now.Add(2 * time.Second)
	if _, err := tr.Get(context.Background(), key(0), block.GetOptions{}); !errors.Is(err, block.ErrNotFound) {
		t.Fatalf("expired block: got %v, want ErrNotFound", err)
	}
	if s := tr.Stats(); s.Blocks != 0 || s.Expirations != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestCorruptionIsAMissNeverServed(t *testing.T) {
	tr := newTier(t, 1<<20)
	data := payload(3, 10000)
	if err := put(t, tr, key(3), data, block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	tr.mu.Lock()
	e := tr.entries.At(tr.index[key(3)])
	tr.arena[int64(e.page)*PageSize+1234] ^= 0x40
	tr.mu.Unlock()
	if ref, err := tr.Get(context.Background(), key(3), block.GetOptions{}); !errors.Is(err, block.ErrNotFound) {
		if ref != nil {
			ref.Release()
		}
		t.Fatalf("corrupted block: got %v, want ErrNotFound", err)
	}
	s := tr.Stats()
	if s.Corruptions != 1 || s.Blocks != 0 || tr.Contains(key(3)) {
		t.Fatalf("corrupted block must be dropped and counted: %+v", s)
	}
	// The freed space is usable again.
	if err := put(t, tr, key(3), data, block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestDeleteWhileLeased(t *testing.T) {
	tr := newTier(t, 1<<20)
	data := payload(4, 9000)
	if err := put(t, tr, key(4), data, block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	ref, err := tr.Get(context.Background(), key(4), block.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Delete(context.Background(), key(4)); err != nil {
		t.Fatal(err)
	}
	if tr.Contains(key(4)) {
		t.Fatal("deleted block still visible")
	}
	if s := tr.Stats(); s.AllocatedB == 0 {
		t.Fatal("leased pages must stay allocated until release")
	}
	if string(ref.Data) != string(data) {
		t.Fatal("leased bytes changed after delete")
	}
	ref.Release()
	ref.Release() // idempotent
	if s := tr.Stats(); s.AllocatedB != 0 {
		t.Fatalf("pages not freed after the last release: %+v", s)
	}
	if err := tr.Delete(context.Background(), key(4)); !errors.Is(err, block.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

// TestMixedSizesFragmentation fills a tier with blocks of mixed sizes (4 KiB
// to 1 MiB) well past capacity and checks that, at steady state, most of the
// arena holds live data and every put succeeds.
func TestMixedSizesFragmentation(t *testing.T) {
	const capacity = 64 << 20
	tr := newTier(t, capacity)
	r := rand.New(rand.NewPCG(1, 2))
	buf := payload(99, 1<<20)
	var minUtil = 1.0
	for i := range 3000 {
		size := 4<<10 + r.IntN(1<<20-4<<10)
		d := buf[:size]
		if err := tr.Put(context.Background(), key(i), d, block.Checksum(d), block.PutOptions{}); err != nil {
			t.Fatalf("put %d (%d bytes): %v", i, size, err)
		}
		if i > 500 {
			s := tr.Stats()
			minUtil = min(minUtil, float64(s.ResidentBytes)/float64(s.Capacity))
			if s.AllocatedB > s.Capacity {
				t.Fatalf("allocated %d > capacity", s.AllocatedB)
			}
		}
	}
	t.Logf("minimum steady-state utilisation with mixed sizes: %.1f%%", 100*minUtil)
	if minUtil < 0.75 {
		t.Fatalf("utilisation fell to %.1f%%: the allocator fragments too much", 100*minUtil)
	}
}

func TestConcurrentMixedLoad(t *testing.T) {
	const bs = 16 << 10
	tr := newTier(t, 64*bs)
	ctx := context.Background()
	blocks := make([][]byte, 200)
	for i := range blocks {
		blocks[i] = payload(uint64(i), bs)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for range 2000 {
				i := r.IntN(200)
				d := blocks[i]
				switch r.IntN(4) {
				case 0, 1:
					if err := tr.Put(ctx, key(i), d, block.Checksum(d), block.PutOptions{}); err != nil && !errors.Is(err, block.ErrNoSpace) {
						errs <- fmt.Errorf("put: %w", err)
						return
					}
				case 2:
					ref, err := tr.Get(ctx, key(i), block.GetOptions{})
					if err == nil {
						if string(ref.Data) != string(d) {
							errs <- fmt.Errorf("block %d: wrong bytes served", i)
						}
						ref.Release()
					} else if !errors.Is(err, block.ErrNotFound) {
						errs <- err
						return
					}
				case 3:
					_ = tr.Delete(ctx, key(i))
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s := tr.Stats()
	if s.ResidentBytes > s.Capacity || s.Corruptions != 0 {
		t.Fatalf("stats %+v", s)
	}
	// Every lease was released: with all blocks deleted, nothing stays allocated.
	for i := range 200 {
		_ = tr.Delete(ctx, key(i))
	}
	if s := tr.Stats(); s.AllocatedB != 0 || s.Blocks != 0 {
		t.Fatalf("leaked pages after deleting everything: %+v", s)
	}
}

func TestDemoteOnEvictionWriteBack(t *testing.T) {
	const bs = 8 << 10
	cfg := DefaultConfig()
	cfg.Capacity = 4 * bs
	var (
		mu       sync.Mutex
		demoted  = map[block.Key][]byte{}
		tr       *Tier
		readable = true
	)
	cfg.Demote = func(ctx context.Context, k block.Key, data []byte, sum uint32, info block.Info) {
		if block.Checksum(data) != sum || info.Size != int64(len(data)) {
			t.Errorf("demote %s: bytes do not match their checksum", k)
		}
		// While being demoted the block is still readable from DRAM.
		done := make(chan bool)
		go func() {
			ref, err := tr.Get(ctx, k, block.GetOptions{})
			if err == nil {
				ref.Release()
			}
			done <- err == nil
		}()
		ok := <-done
		mu.Lock()
		readable = readable && ok
		demoted[k] = append([]byte(nil), data...)
		mu.Unlock()
	}
	var err error
	tr, err = New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ctx := context.Background()
	// Block 0 is clean (a lower tier has it): evicting it must not demote.
	if err := tr.PutClean(ctx, key(0), payload(0, bs), block.Checksum(payload(0, bs)), block.PutOptions{}, true); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 10; i++ {
		if err := put(t, tr, key(i), payload(uint64(i), bs), block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// 10 blocks through a 4-block tier: 6 evicted, block 0 clean, so 1..5 demoted.
	if len(demoted) != 5 {
		t.Fatalf("demoted %d blocks, want 5", len(demoted))
	}
	if _, ok := demoted[key(0)]; ok {
		t.Fatal("a clean block was demoted")
	}
	for i := 1; i <= 5; i++ {
		if string(demoted[key(i)]) != string(payload(uint64(i), bs)) {
			t.Fatalf("block %d demoted with wrong bytes", i)
		}
		if tr.Contains(key(i)) {
			t.Fatalf("block %d still resident after demotion", i)
		}
	}
	if !readable {
		t.Fatal("a block was unreadable while being demoted")
	}
	if s := tr.Stats(); s.AllocatedB > s.Capacity || s.Blocks != 4 {
		t.Fatalf("stats %+v", s)
	}
}

func TestDescriptorReadsThroughMemFile(t *testing.T) {
	tr := newTier(t, 1<<20)
	data := payload(11, 3*PageSize+17)
	if err := put(t, tr, key(11), payload(10, 100), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := put(t, tr, key(12), data, block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	d, release, err := tr.Descriptor(context.Background(), key(12))
	if err != nil {
		t.Fatal(err)
	}
	if d.Offset%PageSize != 0 || d.Length != int64(len(data)) {
		t.Fatalf("descriptor %+v", d)
	}
	// A co-located reader opens the memory file by path and reads the range.
	f, err := os.Open(d.MemFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, d.Length)
	if _, err := f.ReadAt(buf, d.Offset); err != nil {
		t.Fatal(err)
	}
	if string(buf) != string(data) || block.Checksum(buf) != d.Sum {
		t.Fatal("descriptor points at the wrong bytes")
	}
	// The lease blocks eviction and deletion frees only after release.
	if err := tr.Delete(context.Background(), key(12)); err != nil {
		t.Fatal(err)
	}
	if s := tr.Stats(); s.AllocatedB < d.Length {
		t.Fatal("leased extent freed before release")
	}
	release()
}

// TestNamedMemFileReplacedNotTruncated: a tier opened on the path of an
// earlier run's memory file gets a fresh file; a mapping of the old one
// (a co-located client that has not noticed the restart) stays readable.
func TestNamedMemFileReplacedNotTruncated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "arena")
	old := make([]byte, 1<<20)
	for i := range old {
		old[i] = byte(i)
	}
	if err := os.WriteFile(path, old, 0o640); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, len(old), unix.PROT_READ, unix.MAP_SHARED)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	cfg := DefaultConfig()
	cfg.Capacity = 4 << 20
	cfg.MemFile = path
	tr, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if !bytes.Equal(m, old) { // a truncated file would fault here instead
		t.Fatal("the old mapping changed")
	}
	if st, err := os.Stat(path); err != nil || st.Size() < cfg.Capacity {
		t.Fatalf("new memory file: %v %v", st, err)
	}
}

// TestEvictedHookAfterUnindex: the Evicted hook hears of every eviction,
// clean or demoted, only once the block is no longer readable here, and
// never of a delete.
func TestEvictedHookAfterUnindex(t *testing.T) {
	const bs = 8 << 10
	tests := []struct {
		name   string
		demote bool // a Demote hook is installed (write-back)
		clean  bool // blocks are put clean (a lower tier holds them)
	}{
		{"no lower tier", false, false},
		{"write-back, dirty", true, false},
		{"write-back, clean", true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			var tr *Tier
			var evicted []block.Key
			var stillReadable []block.Key
			cfg := DefaultConfig()
			cfg.Capacity = 4 * bs
			cfg.Evicted = func(k block.Key) {
				if tr.Contains(k) {
					stillReadable = append(stillReadable, k)
				}
				evicted = append(evicted, k)
			}
			demoted := 0
			if tc.demote {
				cfg.Demote = func(context.Context, block.Key, []byte, uint32, block.Info) { demoted++ }
			}
			var err error
			if tr, err = New(cfg, slog.New(slog.DiscardHandler)); err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			for i := range 8 {
				d := payload(uint64(i), bs)
				if err := tr.PutClean(ctx, key(i), d, block.Checksum(d), block.PutOptions{}, tc.clean); err != nil {
					t.Fatal(err)
				}
			}
			if err := tr.Delete(ctx, key(7)); err != nil {
				t.Fatal(err)
			}
			// 8 blocks through a 4-block tier: blocks 0..3 evicted, 7 deleted.
			if fmt.Sprint(evicted) != fmt.Sprint([]block.Key{key(0), key(1), key(2), key(3)}) {
				t.Fatalf("evicted %v", evicted)
			}
			if len(stillReadable) != 0 {
				t.Fatalf("hook ran while %v was still readable", stillReadable)
			}
			if want := map[bool]int{true: 4}[tc.demote && !tc.clean]; demoted != want {
				t.Fatalf("demoted %d, want %d", demoted, want)
			}
		})
	}
}

// TestCallsAfterClose: a tier that is closed answers ErrClosed to Delete and
// lets a lease taken before Close end without touching the unmapped arena
// (both panicked with an index out of range before).
func TestCallsAfterClose(t *testing.T) {
	tr := newTier(t, 1<<20)
	ctx := context.Background()
	for i := range 2 {
		if err := put(t, tr, key(i), payload(uint64(i), 3*PageSize), block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_, release, err := tr.Descriptor(ctx, key(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Delete(ctx, key(0)); err != nil { // doomed: freed when the lease ends
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	release()
	if err := tr.Delete(ctx, key(1)); !errors.Is(err, block.ErrClosed) {
		t.Fatalf("Delete after Close: %v, want ErrClosed", err)
	}
}
