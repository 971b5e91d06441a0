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
	tr.freeFn = fs.free
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
		if free, _ := fs.free(""); free < tr.cfg.minFree() {
			t.Fatalf("%s: %d bytes free, below the floor of %d", when, free, tr.cfg.minFree())
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
		ref, err := tr.Get(ctx, k)
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
		ref, err := tr.Get(ctx, k)
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
