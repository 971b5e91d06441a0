package nvme

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/descriptor"
	"github.com/ctxtier/ctxtier/internal/testdep"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func testConfig(dir string) Config {
	c := DefaultConfig()
	c.Dir = dir
	c.SegmentSize = 1 << 20
	c.Capacity = 8 << 20
	c.MaxBlockSize = 256 << 10
	c.Index = IndexConfig{MemTableSize: 1 << 20, NumMemtables: 1, BlockCacheSize: 1 << 20, IndexCacheSize: 1 << 20}
	return c
}

func open(t testing.TB, cfg Config) *Tier {
	t.Helper()
	tr, err := New(cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// payload is the deterministic content of a test block.
func payload(hash uint64, size int) []byte {
	b := make([]byte, size)
	r := rand.New(rand.NewPCG(hash, uint64(size)))
	for i := 0; i < size; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < size; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

func key(h uint64) block.Key { return block.NewKey("ns", h) }

func put(t testing.TB, tr *Tier, k block.Key, data []byte, opts block.PutOptions) {
	t.Helper()
	if err := tr.Put(context.Background(), k, data, block.Checksum(data), opts); err != nil {
		t.Fatalf("put %s: %v", k, err)
	}
}

func mustGet(t testing.TB, tr *Tier, k block.Key, want []byte) {
	t.Helper()
	ref, err := tr.Get(context.Background(), k, block.GetOptions{})
	if err != nil {
		t.Fatalf("get %s: %v", k, err)
	}
	defer ref.Release()
	if !bytes.Equal(ref.Data, want) || ref.Sum != block.Checksum(want) || ref.Tier != block.TierNVMe {
		t.Fatalf("get %s: wrong bytes (%d bytes, want %d)", k, len(ref.Data), len(want))
	}
}

// TestDirectIOUsedWhereSupported: where the file system takes O_DIRECT (as
// checked here independently of the tier's probe), the tier's segment files
// are open with O_DIRECT, as /proc/self/fdinfo shows. A TMPDIR without
// O_DIRECT (tmpfs) would leave the direct path untested: that skips, and
// fails under CI=true or CTXTIER_STRICT=1.
func TestDirectIOUsedWhereSupported(t *testing.T) {
	dir := t.TempDir()
	if ok, why := directSupported(dir); !ok {
		testdep.Missing(t, "O_DIRECT in "+dir, why, "set TMPDIR to a directory on ext4 or xfs (tmpfs has no O_DIRECT)")
	}
	tr := open(t, testConfig(dir))
	defer tr.Close()
	if !tr.DirectIO() || !tr.Stats().DirectIO {
		t.Fatal("O_DIRECT works in the directory but the tier chose buffered I/O")
	}
	put(t, tr, key(1), payload(1, 5000), block.PutOptions{})
	mustGet(t, tr, key(1), payload(1, 5000))
	direct, buffered := segmentFDs(t, filepath.Join(dir, "segments"))
	if direct == 0 || buffered != 0 {
		t.Fatalf("segment files open: %d with O_DIRECT, %d without", direct, buffered)
	}
	t.Logf("%d segment file descriptors, all O_DIRECT", direct)
}

// TestBufferedIOWhenDisabled: DisableDirectIO opens segments without
// O_DIRECT, and the tier still stores and reads.
func TestBufferedIOWhenDisabled(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.DisableDirectIO = true
	tb := open(t, cfg)
	defer tb.Close()
	if tb.DirectIO() || tb.Stats().DirectIO {
		t.Fatal("DisableDirectIO did not select buffered I/O")
	}
	put(t, tb, key(1), payload(1, 5000), block.PutOptions{})
	mustGet(t, tb, key(1), payload(1, 5000))
	direct, buffered := segmentFDs(t, filepath.Join(dir, "segments"))
	if direct != 0 || buffered == 0 {
		t.Fatalf("segment files open: %d with O_DIRECT, %d without", direct, buffered)
	}
}

// directSupported opens, writes and reads a file in dir with O_DIRECT
// (raw syscalls, not the tier's probe).
func directSupported(dir string) (bool, string) {
	p := filepath.Join(dir, "direct-check")
	defer os.Remove(p)
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CREAT|unix.O_DIRECT, 0o600)
	if err != nil {
		return false, "open: " + err.Error()
	}
	defer unix.Close(fd)
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return false, "mmap: " + err.Error()
	}
	defer unix.Munmap(buf)
	if _, err := unix.Pwrite(fd, buf, 0); err != nil {
		return false, "pwrite: " + err.Error()
	}
	if _, err := unix.Pread(fd, buf, 0); err != nil {
		return false, "pread: " + err.Error()
	}
	return true, ""
}

// segmentFDs counts this process's open descriptors of files in dir with
// and without O_DIRECT, from /proc/self/fdinfo.
func segmentFDs(t *testing.T, dir string) (direct, buffered int) {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err != nil || filepath.Dir(target) != dir {
			continue
		}
		info, err := os.ReadFile(filepath.Join("/proc/self/fdinfo", fd.Name()))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "flags:"); ok {
				flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
				if err != nil {
					t.Fatalf("fdinfo flags %q: %v", v, err)
				}
				if flags&unix.O_DIRECT != 0 {
					direct++
				} else {
					buffered++
				}
			}
		}
	}
	return direct, buffered
}

func TestPutGetSizes(t *testing.T) {
	tr := open(t, testConfig(t.TempDir()))
	defer tr.Close()
	cases := []struct {
		size    int
		aligned bool
	}{
		{1, false}, {100, false}, {4095, false}, {4096, false}, {4096, true}, {4097, true},
		{65536, true}, {65536 + 100, true}, {100000, false}, {256 << 10, true}, {256 << 10, false},
	}
	for i, tc := range cases {
		want := payload(uint64(i), tc.size)
		var data []byte
		if tc.aligned {
			data = alignedAlloc(int(descriptor.AlignUp(int64(tc.size))))[:tc.size]
			copy(data, want)
		} else {
			data = append(make([]byte, 0, tc.size+1), 7)[1:]
			data = append(data, want...)
		}
		put(t, tr, key(uint64(i)), data, block.PutOptions{})
		mustGet(t, tr, key(uint64(i)), want)
	}
	s := tr.Stats()
	if s.Blocks != int64(len(cases)) || s.Puts != uint64(len(cases)) || s.Hits != uint64(len(cases)) {
		t.Fatalf("stats %+v", s)
	}
	if _, err := tr.Get(context.Background(), key(999), block.GetOptions{}); !errors.Is(err, block.ErrNotFound) {
		t.Fatalf("missing key: %v", err)
	}
	if tr.Stats().Misses != 1 {
		t.Fatal("miss not counted")
	}
}

func TestPutValidation(t *testing.T) {
	tr := open(t, testConfig(t.TempDir()))
	defer tr.Close()
	ctx := context.Background()
	cases := []struct {
		name string
		key  block.Key
		data []byte
		want error
	}{
		{"empty", key(1), nil, block.ErrInvalidArgument},
		{"too large", key(1), make([]byte, 256<<10+1), block.ErrTooLarge},
		{"no namespace", block.NewKey("", 1), []byte("x"), block.ErrInvalidKey},
	}
	for _, tc := range cases {
		if err := tr.Put(ctx, tc.key, tc.data, block.Checksum(tc.data), block.PutOptions{}); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	bad := []func(*Config){
		func(c *Config) { c.Dir = "" },
		func(c *Config) { c.SegmentSize = 5000 },
		func(c *Config) { c.MaxBlockSize = c.SegmentSize },
		func(c *Config) { c.Capacity = 2 * c.SegmentSize },
		func(c *Config) { c.LeaseTTL = 0 },
		func(c *Config) { c.Index.MemTableSize = 1 },
	}
	for i, m := range bad {
		c := testConfig(t.TempDir())
		m(&c)
		if err := c.Validate(); !errors.Is(err, block.ErrInvalidArgument) {
			t.Errorf("config mutation %d: %v", i, err)
		}
	}
}

func TestIdempotentAndConflict(t *testing.T) {
	tr := open(t, testConfig(t.TempDir()))
	defer tr.Close()
	ctx := context.Background()
	a := payload(1, 10000)
	put(t, tr, key(1), a, block.PutOptions{})
	put(t, tr, key(1), a, block.PutOptions{PinTTL: time.Hour}) // same bytes: ok, extends pin
	info, err := tr.Stat(ctx, key(1))
	if err != nil || info.PinnedUntil.IsZero() || info.Size != 10000 || info.Tier != block.TierNVMe {
		t.Fatalf("stat after idempotent put: %+v %v", info, err)
	}
	b := append([]byte(nil), a...)
	b[5000] ^= 1
	// Different bytes, same length: a conflict whether or not the CRC differs.
	for _, sum := range []uint32{block.Checksum(b), block.Checksum(a)} {
		if err := tr.Put(ctx, key(1), b, sum, block.PutOptions{}); !errors.Is(err, block.ErrConflict) {
			t.Fatalf("conflicting put (sum %08x): %v", sum, err)
		}
	}
	mustGet(t, tr, key(1), a)
	if s := tr.Stats(); s.Blocks != 1 || s.Puts != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestDeletePinStatContains(t *testing.T) {
	tr := open(t, testConfig(t.TempDir()))
	defer tr.Close()
	ctx := context.Background()
	put(t, tr, key(1), payload(1, 3000), block.PutOptions{Priority: 3})
	if !tr.Contains(key(1)) || tr.Contains(key(2)) {
		t.Fatal("contains")
	}
	until := time.Now().Add(time.Minute)
	if err := tr.Pin(ctx, key(1), until); err != nil {
		t.Fatal(err)
	}
	if err := tr.Pin(ctx, key(1), time.Now()); err != nil { // never shortens
		t.Fatal(err)
	}
	info, _ := tr.Stat(ctx, key(1))
	if !info.PinnedUntil.Equal(time.Unix(0, until.UnixNano())) || info.Priority != 3 {
		t.Fatalf("stat %+v", info)
	}
	if err := tr.Pin(ctx, key(2), until); !errors.Is(err, block.ErrNotFound) {
		t.Fatal(err)
	}
	if err := tr.Delete(ctx, key(1)); err != nil {
		t.Fatal(err)
	}
	if err := tr.Delete(ctx, key(1)); !errors.Is(err, block.ErrNotFound) {
		t.Fatal(err)
	}
	if tr.Contains(key(1)) || tr.Stats().Blocks != 0 || tr.Stats().ResidentBytes != 0 {
		t.Fatal("delete left state behind")
	}
	// Expiry.
	put(t, tr, key(3), payload(3, 100), block.PutOptions{Expires: time.Now().Add(-time.Second)})
	if tr.Contains(key(3)) {
		t.Fatal("expired block visible")
	}
	if _, err := tr.Get(ctx, key(3), block.GetOptions{}); !errors.Is(err, block.ErrNotFound) {
		t.Fatal(err)
	}
}

func TestList(t *testing.T) {
	tr := open(t, testConfig(t.TempDir()))
	defer tr.Close()
	ctx := context.Background()
	keys := []block.Key{
		key(0xab), key(0xab).WithPart(2), key(0xab).WithPart(10), key(0xac), key(0x1ab),
		block.NewKey("other", 0xab),
	}
	for i, k := range keys {
		put(t, tr, k, payload(uint64(i), 100), block.PutOptions{})
	}
	names := func(in []block.Info) []string {
		var s []string
		for _, i := range in {
			s = append(s, i.Key.ObjectName())
		}
		return s
	}
	cases := []struct {
		prefix, after string
		limit         int
		want          []string
	}{
		{"", "", 0, []string{"00000000000000ab", "00000000000000ab.10", "00000000000000ab.2", "00000000000000ac", "00000000000001ab"}},
		{"", "", 2, []string{"00000000000000ab", "00000000000000ab.10"}},
		{"", "00000000000000ab.10", 2, []string{"00000000000000ab.2", "00000000000000ac"}},
		{"00000000000000a", "", 0, []string{"00000000000000ab", "00000000000000ab.10", "00000000000000ab.2", "00000000000000ac"}},
		{"00000000000000ab.", "", 0, []string{"00000000000000ab.10", "00000000000000ab.2"}},
		{"zz", "", 0, nil},
	}
	for _, tc := range cases {
		got, err := tr.List(ctx, "ns", tc.prefix, tc.after, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if g := names(got); !slicesEqual(g, tc.want) {
			t.Errorf("List(%q, %q, %d) = %v, want %v", tc.prefix, tc.after, tc.limit, g, tc.want)
		}
	}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// flip xors one byte of a segment file at off.
func flip(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// damagedTier opens a tier (closed at the test's end) holding keys 1-3
// (20,000 bytes each) and flips the byte of key 2's extent at at(its
// descriptor), which it returns.
func damagedTier(t *testing.T, at func(d Descriptor) int64) (*Tier, Descriptor) {
	t.Helper()
	tr := open(t, testConfig(t.TempDir()))
	t.Cleanup(func() { tr.Close() })
	for i := uint64(1); i <= 3; i++ {
		put(t, tr, key(i), payload(i, 20000), block.PutOptions{})
	}
	d, release, err := tr.Descriptor(context.Background(), key(2))
	if err != nil {
		t.Fatal(err)
	}
	release()
	flip(t, d.Path, at(d))
	return tr, d
}

func TestCorruptionIsACountedMiss(t *testing.T) {
	cases := []struct {
		name string
		at   func(d Descriptor) int64
	}{
		{"payload", func(d Descriptor) int64 { return d.DataOffset + d.Length/2 }},
		{"payload last byte", func(d Descriptor) int64 { return d.DataOffset + d.Length - 1 }},
		{"header key", func(d Descriptor) int64 { return d.Offset + 9 }},
		{"header crc", func(d Descriptor) int64 { return d.Offset + 132 }}, // the header's own CRC-32C
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr, d := damagedTier(t, tc.at)
			ctx := context.Background()
			if _, err := descriptor.ReadExtent(key(2), d.Block()); !errors.Is(err, block.ErrChecksum) {
				t.Fatalf("descriptor.ReadExtent of a damaged extent: %v", err)
			}
			for range 2 {
				if ref, err := tr.Get(ctx, key(2), block.GetOptions{}); !errors.Is(err, block.ErrNotFound) {
					ref.Release()
					t.Fatalf("damaged block served: %v", err)
				}
			}
			s := tr.Stats()
			if s.Corruptions != 1 || s.Misses != 2 || s.Blocks != 2 || tr.Contains(key(2)) {
				t.Fatalf("after corruption: %+v", s)
			}
			mustGet(t, tr, key(1), payload(1, 20000))
			mustGet(t, tr, key(3), payload(3, 20000))
			// A fresh put of the same key stores a good copy again.
			put(t, tr, key(2), payload(2, 20000), block.PutOptions{})
			mustGet(t, tr, key(2), payload(2, 20000))
		})
	}
}

func TestDescriptorRead(t *testing.T) {
	tr := open(t, testConfig(t.TempDir()))
	defer tr.Close()
	ctx := context.Background()
	want := payload(7, 70000)
	put(t, tr, key(7), want, block.PutOptions{})
	d, release, err := tr.Descriptor(ctx, key(7))
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if d.Offset%Align != 0 || d.DataOffset%Align != 0 || d.Length != 70000 || d.ExtentLength != descriptor.ExtentLen(70000) {
		t.Fatalf("descriptor %+v", d)
	}
	got, err := descriptor.ReadExtent(key(7), d.Block())
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("descriptor.ReadExtent: %v", err)
	}
	if _, err := descriptor.ReadExtent(key(8), d.Block()); !errors.Is(err, block.ErrChecksum) {
		t.Fatalf("descriptor read under the wrong key: %v", err)
	}
	if _, _, err := tr.Descriptor(ctx, key(8)); !errors.Is(err, block.ErrNotFound) {
		t.Fatal(err)
	}
	release()
	release() // idempotent
}

func TestConcurrentSameKeyPuts(t *testing.T) {
	tr := open(t, testConfig(t.TempDir()))
	defer tr.Close()
	data := payload(5, 50000)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- tr.Put(context.Background(), key(5), data, block.Checksum(data), block.PutOptions{})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if s := tr.Stats(); s.Puts != 1 || s.Blocks != 1 || s.WriteBytes != uint64(descriptor.ExtentLen(50000)) {
		t.Fatalf("concurrent identical puts wrote more than once: %+v", s)
	}
}

func TestClosed(t *testing.T) {
	tr := open(t, testConfig(t.TempDir()))
	put(t, tr, key(1), []byte("x"), block.PutOptions{})
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Get(context.Background(), key(1), block.GetOptions{}); !errors.Is(err, block.ErrClosed) {
		t.Fatal(err)
	}
	if err := tr.Put(context.Background(), key(2), []byte("y"), block.Checksum([]byte("y")), block.PutOptions{}); !errors.Is(err, block.ErrClosed) {
		t.Fatal(err)
	}
}
