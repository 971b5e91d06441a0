package nvme

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// fakeFS models the tier's filesystem: size bytes, of which the tier's
// segments and other (everything else) are used.
type fakeFS struct {
	size, other atomic.Int64
	tier        atomic.Pointer[Tier]
}

func (f *fakeFS) free(string) (int64, error) {
	used := int64(0)
	if t := f.tier.Load(); t != nil {
		t.mu.Lock()
		used = t.used
		t.mu.Unlock()
	}
	return max(f.size.Load()-used-f.other.Load(), 0), nil
}

func (f *fakeFS) space(dir string) (int64, int64, error) {
	free, err := f.free(dir)
	return free, f.size.Load(), err
}

// openOnFS opens a tier that asks fs for free space.
func openOnFS(t *testing.T, fs *fakeFS, onEvict func(block.Key)) *Tier {
	t.Helper()
	cfg := testConfig(t.TempDir())
	cfg.Capacity = 64 << 20 // far more than the fake filesystem holds
	cfg.MinFree = 2 << 20
	if onEvict != nil {
		cfg.OnEvict = func(k block.Key, _ []byte, _ uint32) { onEvict(k) }
	}
	tr := open(t, cfg)
	tr.spaceFn = fs.space
	fs.tier.Store(tr)
	tr.space.at.Store(0) // ask the fake at once
	t.Cleanup(func() { tr.Close() })
	return tr
}

// TestFilesystemBoundsTheTier: with a capacity far above what the
// filesystem holds, the tier stays above the free-space floor by evicting
// old blocks; when something else fills the filesystem the tier evicts
// more, and when nothing can be freed a put is ErrNoSpace, while the blocks
// it still holds are served.
func TestFilesystemBoundsTheTier(t *testing.T) {
	ctx := context.Background()
	fs := &fakeFS{}
	fs.size.Store(10 << 20)
	var mu sync.Mutex
	evicted := map[block.Key]bool{}
	tr := openOnFS(t, fs, func(k block.Key) { mu.Lock(); evicted[k] = true; mu.Unlock() })
	const size = 200 << 10
	checkFloor := func(when string) {
		t.Helper()
		if free, _ := fs.free(""); free < tr.minFree() {
			t.Fatalf("%s: %d bytes free, below the floor of %d", when, free, tr.minFree())
		}
	}
	for i := range 60 { // 60 × 204 KiB ≈ 12 MiB through a 10 MiB filesystem
		put(t, tr, key(uint64(i)), payload(uint64(i), size), block.PutOptions{})
		checkFloor(fmt.Sprintf("put %d", i))
	}
	mu.Lock()
	nEvicted := len(evicted)
	mu.Unlock()
	if nEvicted == 0 {
		t.Fatal("nothing was evicted to stay within the filesystem")
	}
	// Every block is either still served with its bytes or was evicted.
	for i := range 60 {
		k := key(uint64(i))
		ref, err := tr.Get(ctx, k, block.GetOptions{})
		switch {
		case err == nil:
			ref.Release()
		case errors.Is(err, block.ErrNotFound):
			mu.Lock()
			ok := evicted[k]
			mu.Unlock()
			if !ok {
				t.Fatalf("block %d is gone but was never evicted", i)
			}
		default:
			t.Fatalf("get %d: %v", i, err)
		}
	}

	// Something else fills the disk but for 3 MiB: the tier gives up blocks.
	fs.other.Store(fs.size.Load() - tr.Stats().UsedBytes - 3<<20)
	put(t, tr, key(100), payload(100, size), block.PutOptions{})
	checkFloor("after the disk filled")

	// The disk is full: the blocks held are served (without touching the
	// index), and puts are ErrNoSpace once nothing more can be given up.
	fs.other.Store(fs.size.Load())
	tr.space.at.Store(0) // lowSpace asks at most every statfsEvery
	held := tr.keysForTest(t)
	if len(held) == 0 {
		t.Fatal("nothing held before the disk filled")
	}
	for k := range held {
		ref, err := tr.Get(ctx, k, block.GetOptions{})
		if err != nil {
			t.Fatalf("get %v on a full disk: %v", k, err)
		}
		ref.Release()
	}
	if !tr.lowSpace() {
		t.Fatal("lowSpace is false on a full disk")
	}
	var perr error
	for i := 200; i < 260 && perr == nil; i++ {
		d := payload(uint64(i), size)
		perr = tr.Put(ctx, key(uint64(i)), d, block.Checksum(d), block.PutOptions{})
	}
	if !errors.Is(perr, block.ErrNoSpace) {
		t.Fatalf("put on a full disk: %v, want ErrNoSpace", perr)
	}
	if tr.Stats().NoSpace == 0 {
		t.Fatal("the refusal was not counted")
	}
}

// keysForTest lists the tier's keys.
func (t *Tier) keysForTest(tb testing.TB) map[block.Key]bool {
	tb.Helper()
	out := map[block.Key]bool{}
	infos, err := t.List(context.Background(), "ns", "", "", 0)
	if err != nil {
		tb.Fatal(err)
	}
	for _, in := range infos {
		out[in.Key] = true
	}
	return out
}

func TestNoSpaceMapping(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}, true},
		{fmt.Errorf("nvme: write: %w", syscall.EDQUOT), true},
		{fmt.Errorf("nvme: write: %w", syscall.EIO), false},
		{block.ErrNoSpace, true},
	} {
		if got := errors.Is(noSpace(tc.err), block.ErrNoSpace); got != tc.want {
			t.Errorf("noSpace(%v) is ErrNoSpace: %v, want %v", tc.err, got, tc.want)
		}
	}
	if noSpace(nil) != nil {
		t.Error("noSpace(nil) is not nil")
	}
}

// TestOpenMakesRoom: a tier opened on a filesystem with less than its
// floor free removes its oldest segments until the floor is free (the
// newest blocks stay served), and refuses to open, with ErrNoSpace and
// before its index could fault, when that is not enough.
func TestOpenMakesRoom(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := testConfig(dir)
	tr := open(t, cfg)
	const size = 200 << 10
	for i := range 30 { // ~6 MiB: six 1 MiB segments
		put(t, tr, key(uint64(i)), payload(uint64(i), size), block.PutOptions{})
	}
	segs := tr.Stats().Segments
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	segBytes := func() int64 {
		des, _ := os.ReadDir(dir + "/segments")
		var n int64
		for _, de := range des {
			if fi, err := de.Info(); err == nil {
				n += fi.Size()
			}
		}
		return n
	}
	// The filesystem: what the segments use, and 1 MiB free beyond them,
	// below the floor of 3 MiB: two segments must go.
	var size0 = segBytes() + 1<<20
	cfg.MinFree = 3 << 20
	free := func() int64 { return size0 - segBytes() }
	cfg.spaceFn = func(string) (int64, int64, error) { return free(), size0, nil }
	tr = open(t, cfg)
	defer tr.Close()
	if got := tr.Stats().Segments; got > segs-2 || got == 0 {
		t.Fatalf("%d segments after making room, had %d", got, segs)
	}
	if free() < cfg.MinFree {
		t.Fatalf("%d free after making room, floor %d", free(), cfg.MinFree)
	}
	mustGet(t, tr, key(29), payload(29, size)) // the newest block stays
	if _, err := tr.Get(ctx, key(0), block.GetOptions{}); !errors.Is(err, block.ErrNotFound) {
		t.Fatalf("the oldest block: %v, want NotFound (its segment was removed)", err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	// Full beyond what the tier holds: refuse to open.
	cfg.spaceFn = func(string) (int64, int64, error) { return 0, size0, nil }
	if _, err := New(cfg, quiet); !errors.Is(err, block.ErrNoSpace) {
		t.Fatalf("open on a full filesystem: %v, want ErrNoSpace", err)
	}
}

func TestFloor(t *testing.T) {
	c := testConfig("x")
	c.Index.MemTableSize = 16 << 20
	for _, tc := range []struct {
		minFree, total, want int64
	}{
		{0, 100 << 30, 32 << 20}, // two memtables
		{0, 64 << 20, 16 << 20},  // a quarter of a small filesystem
		{5 << 20, 64 << 20, 5 << 20},
	} {
		c.MinFree = tc.minFree
		if got := c.floorFor(tc.total); got != tc.want {
			t.Errorf("floorFor(%d) with MinFree %d = %d, want %d", tc.total, tc.minFree, got, tc.want)
		}
	}
}

// TestIndexWritesNeedRoom: below half the free-space floor no operation
// writes to the badger index (its memtable is a memory map of a sparse
// file: a store the filesystem cannot back is a SIGBUS). Each one that
// would is refused with ErrNoSpace, the index's version does not move, and
// the blocks stay served; with room again, the same operations go through.
func TestIndexWritesNeedRoom(t *testing.T) {
	ctx := context.Background()
	fs := &fakeFS{}
	fs.size.Store(10 << 20)
	tr := openOnFS(t, fs, nil)
	const size = 200 << 10
	for i := range 30 { // several sealed segments, so a put must reclaim one
		put(t, tr, key(uint64(i)), payload(uint64(i), size), block.PutOptions{})
	}
	held := tr.keysForTest(t)
	if len(held) == 0 {
		t.Fatal("nothing held")
	}
	var some block.Key
	for k := range held {
		some = k
		break
	}
	// Leave one byte less than half the floor.
	setFree := func(free int64) {
		fs.other.Store(fs.size.Load() - tr.Stats().UsedBytes - free)
		tr.space.at.Store(0)
	}
	setFree(tr.minFree()/2 - 1)
	ops := []struct {
		name string
		op   func() error
	}{
		{"put of a new key (evicting)", func() error {
			d := payload(1000, size)
			return tr.Put(ctx, key(1000), d, block.Checksum(d), block.PutOptions{})
		}},
		{"delete", func() error { return tr.Delete(ctx, some) }},
		{"pin", func() error { return tr.Pin(ctx, some, time.Now().Add(time.Hour)) }},
	}
	version := tr.db.MaxVersion()
	for _, tc := range ops {
		if err := tc.op(); !errors.Is(err, block.ErrNoSpace) {
			t.Errorf("%s below half the floor: %v, want ErrNoSpace", tc.name, err)
		}
		if v := tr.db.MaxVersion(); v != version {
			t.Fatalf("%s below half the floor wrote to the index (version %d -> %d)", tc.name, version, v)
		}
	}
	if tr.Stats().IndexRefused == 0 {
		t.Error("the refused index writes were not counted")
	}
	// Reads serve what is still indexed, without writing (touch is skipped).
	for k := range tr.keysForTest(t) {
		ref, err := tr.Get(ctx, k, block.GetOptions{})
		if err != nil {
			t.Fatalf("get %v below half the floor: %v", k, err)
		}
		ref.Release()
	}
	if v := tr.db.MaxVersion(); v != version {
		t.Fatalf("reads below half the floor wrote to the index (version %d -> %d)", version, v)
	}
	if !tr.Contains(some) {
		t.Fatal("the refused delete removed the block")
	}

	// With room again, the same operations write.
	setFree(tr.minFree() + 4<<20)
	for _, tc := range ops {
		if err := tc.op(); err != nil && !(tc.name == "pin" && errors.Is(err, block.ErrNotFound)) {
			t.Errorf("%s with room: %v", tc.name, err)
		}
	}
	if tr.Contains(some) {
		t.Error("the delete with room did not remove the block")
	}
	if v := tr.db.MaxVersion(); v == version {
		t.Error("no index write with room")
	}
}
