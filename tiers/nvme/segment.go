package nvme

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ctxtier/ctxtier/ctxstore/block/descriptor"
)

// segment is one segment file. Its fields are guarded by Tier.mu except file,
// path and id, which never change.
type segment struct {
	id   uint64
	path string
	file *os.File

	end       int64 // bytes written or reserved (the append position for the active segment)
	live      int64 // extent bytes of indexed blocks
	liveCount int64
	pending   int // reserved extents whose put has not finished
	refs      int // in-flight reads
	leases    map[uint64]int64
	sealed    bool // no more appends
	cleaning  bool
	removed   bool // unlinked; file closes when refs reach 0
}

const segSuffix = ".seg"

func segName(id uint64) string { return fmt.Sprintf("%016x%s", id, segSuffix) }

func parseSegName(name string) (uint64, bool) {
	s, ok := strings.CutSuffix(name, segSuffix)
	if !ok || len(s) != 16 {
		return 0, false
	}
	id, err := strconv.ParseUint(s, 16, 64)
	return id, err == nil
}

// openFlags returns the flags that open a segment with or without O_DIRECT.
func openFlags(direct bool, flags int) int {
	if direct {
		flags |= unix.O_DIRECT
	}
	return flags | unix.O_CLOEXEC
}

func openSegment(dir string, id uint64, direct, create bool) (*segment, error) {
	p := filepath.Join(dir, segName(id))
	fl := os.O_RDWR
	if create {
		fl |= os.O_CREATE | os.O_EXCL
	}
	f, err := os.OpenFile(p, openFlags(direct, fl), 0o640)
	if err != nil {
		return nil, fmt.Errorf("nvme: open segment: %w", err)
	}
	return &segment{id: id, path: p, file: f}, nil
}

// probeDirect reports whether files in dir accept O_DIRECT reads and writes
// of aligned buffers.
func probeDirect(dir string) (bool, error) {
	p := filepath.Join(dir, ".direct-probe")
	defer os.Remove(p)
	f, err := os.OpenFile(p, openFlags(true, os.O_RDWR|os.O_CREATE|os.O_TRUNC), 0o640)
	if err != nil {
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
			return false, nil
		}
		return false, fmt.Errorf("nvme: probe O_DIRECT in %s: %w", dir, err)
	}
	defer f.Close()
	buf := alignedAlloc(Align)
	if _, err := f.WriteAt(buf, 0); err != nil {
		return false, nil
	}
	if _, err := f.ReadAt(buf, 0); err != nil {
		return false, nil
	}
	return true, nil
}

// alignedAlloc returns n bytes (n a multiple of Align) starting on an Align
// boundary, as required by O_DIRECT.
func alignedAlloc(n int) []byte { return descriptor.AlignedBuffer(n) }

func isAligned(b []byte) bool {
	return len(b) > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(b)))&(Align-1) == 0
}

// bufPool recycles aligned buffers in size classes of 4 KiB pages: powers of
// two and the three quarter steps between them (so a 2 MiB + 4 KiB extent
// takes a 2.5 MiB buffer). sync.Pool drops idle buffers across GC cycles, so
// the pool's memory follows the concurrency of the load, not the data on disk.
type bufPool struct {
	classes [64 * 4]sync.Pool
}

func classOf(n int) (class int, size int) {
	pages := (n + Align - 1) / Align
	if pages <= 4 {
		return pages, pages * Align
	}
	e := bits.Len(uint(pages-1)) - 1 // 2^e < pages <= 2^(e+1)
	step := 1 << (e - 2)             // quarter of 2^e
	q := (pages - (1 << e) + step - 1) / step
	return 4 + e*4 + q, ((1 << e) + q*step) * Align
}

// get returns an aligned buffer of at least n bytes, sliced to n.
func (p *bufPool) get(n int) []byte {
	c, size := classOf(n)
	if v := p.classes[c].Get(); v != nil {
		b := *(v.(*[]byte))
		return b[:n]
	}
	return alignedAlloc(size)[:n]
}

func (p *bufPool) put(b []byte) {
	b = b[:cap(b)]
	c, size := classOf(len(b))
	if size != len(b) {
		return // not one of ours
	}
	p.classes[c].Put(&b)
}
