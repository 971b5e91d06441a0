package nvme

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/zeebo/xxh3"

	"golang.org/x/sys/unix"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/descriptor"
)

// reservation is space for one extent at the end of a segment.
type reservation struct {
	seg *segment
	off int64
	gen uint64
}

// reserve finds room for an extent of n bytes, reclaiming segments when the
// tier is full. A put may fill up to Capacity - SegmentSize; reclamation
// (forClean) may use the last segment's worth to re-append hot blocks.
// The caller holds t.wmu.
func (t *Tier) reserve(ctx context.Context, n int64, forClean bool) (reservation, error) {
	capLimit := t.cfg.Capacity - t.cfg.SegmentSize
	if forClean {
		capLimit = t.cfg.Capacity
	}
	for rounds := 0; ; rounds++ {
		// The filesystem bounds the tier too: never below its free-space
		// floor (see space.go). Relocations may use the floor's first
		// half: the segment they empty is removed right after.
		limit, fsBound := capLimit, false
		if fl, _, ok := t.fsLimit(); ok {
			if forClean {
				fl += t.minFree() / 2
			}
			if fl < limit {
				limit, fsBound = fl, true
			}
		}
		t.mu.Lock()
		if t.used+n <= limit {
			r, err := t.appendLocked(n)
			t.mu.Unlock()
			return r, err
		}
		if forClean {
			t.mu.Unlock()
			return reservation{}, fmt.Errorf("%w: no headroom left to re-append a block", block.ErrNoSpace)
		}
		victim := t.victimLocked()
		nseg := len(t.segs)
		t.mu.Unlock()
		if victim == nil || rounds > nseg+1 {
			if victim != nil {
				t.mu.Lock()
				victim.cleaning = false
				t.mu.Unlock()
			}
			t.st.noSpace.Add(1)
			if fsBound {
				return reservation{}, fmt.Errorf("%w: nvme tier's filesystem (%s) is full: %d bytes free, %d kept free for the index, and every reclaimable segment is leased, pinned or being written",
					block.ErrNoSpace, t.cfg.Dir, t.space.free.Load(), t.minFree())
			}
			return reservation{}, fmt.Errorf("%w: nvme tier full (%d bytes): every reclaimable segment is leased, pinned or being written", block.ErrNoSpace, t.cfg.Capacity)
		}
		if err := checkCtx(ctx); err != nil {
			t.mu.Lock()
			victim.cleaning = false
			t.mu.Unlock()
			return reservation{}, err
		}
		if err := t.reclaim(ctx, victim); err != nil {
			if errors.Is(err, block.ErrNoSpace) {
				t.st.noSpace.Add(1) // the index had no room to drop the victim's entries
			}
			return reservation{}, err
		}
	}
}

// appendLocked reserves n bytes in the active segment, rolling to a new one
// when it does not fit. The caller holds t.mu.
func (t *Tier) appendLocked(n int64) (reservation, error) {
	if t.active == nil || t.active.end+n > t.cfg.SegmentSize {
		if t.active != nil {
			t.active.sealed = true
		}
		id := t.nextSeg
		s, err := openSegment(t.segDir, id, t.direct, true)
		if err != nil {
			return reservation{}, err
		}
		t.nextSeg++
		t.segs[id] = s
		t.active = s
	}
	s := t.active
	r := reservation{seg: s, off: s.end, gen: t.nextGen}
	t.nextGen++
	s.end += n
	s.pending++
	t.used += n
	return r, nil
}

// finish ends a reservation's pending state.
func (t *Tier) finish(r reservation) {
	t.mu.Lock()
	r.seg.pending--
	t.mu.Unlock()
}

// writeExtent writes header h and payload data as one extent at r. When data
// is page-aligned in memory (a DRAM-tier arena page, for example) it is
// written in place with pwritev; otherwise it is copied into a pooled aligned
// buffer. Either way it is one sequential write.
func (t *Tier) writeExtent(r reservation, h *header, data []byte) error {
	h.FP = xxh3.Hash(data)
	n := int64(len(data))
	ext := descriptor.ExtentLen(n)
	if isAligned(data) && n >= Align {
		body := n &^ (Align - 1)
		hdr := t.pool.get(Align)
		defer t.pool.put(hdr)
		clear(hdr)
		h.Encode(hdr)
		iov := [][]byte{hdr, data[:body]}
		if body < n {
			tail := t.pool.get(Align)
			defer t.pool.put(tail)
			clear(tail[copy(tail, data[body:]):])
			iov = append(iov, tail)
		}
		if err := t.pwritev(r.seg, iov, r.off, ext); err != nil {
			return err
		}
	} else {
		buf := t.pool.get(int(ext))
		defer t.pool.put(buf)
		clear(buf[:Align])
		h.Encode(buf)
		clear(buf[Align+copy(buf[Align:], data):])
		if err := t.pwrite(r.seg, buf, r.off); err != nil {
			return err
		}
	}
	if err := t.syncSeg(r.seg); err != nil {
		return err
	}
	t.st.writeBytes.Add(uint64(ext))
	return nil
}

// syncSeg flushes s when SyncWrites is on.
func (t *Tier) syncSeg(s *segment) error {
	if !t.cfg.SyncWrites {
		return nil
	}
	if err := s.file.Sync(); err != nil {
		return fmt.Errorf("nvme: sync %s: %w", s.path, err)
	}
	return nil
}

func (t *Tier) pwrite(s *segment, buf []byte, off int64) error {
	if _, err := s.file.WriteAt(buf, off); err != nil {
		return noSpace(fmt.Errorf("nvme: write %s at %d: %w", s.path, off, err))
	}
	return nil
}

func (t *Tier) pwritev(s *segment, iov [][]byte, off, total int64) error {
	conn, err := s.file.SyscallConn()
	if err != nil {
		return fmt.Errorf("nvme: %w", err)
	}
	var n int
	var werr error
	if err := conn.Write(func(fd uintptr) bool {
		n, werr = unix.Pwritev(int(fd), iov, off)
		return !errors.Is(werr, unix.EAGAIN)
	}); err != nil {
		return fmt.Errorf("nvme: write %s at %d: %w", s.path, off, err)
	}
	if werr != nil {
		return noSpace(fmt.Errorf("nvme: write %s at %d: %w", s.path, off, werr))
	}
	if int64(n) != total {
		return fmt.Errorf("nvme: write %s at %d: %w (%d of %d bytes)", s.path, off, io.ErrShortWrite, n, total)
	}
	return nil
}

// acquire takes a read reference on segment id; nil when it is gone.
func (t *Tier) acquire(id uint64) *segment {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.segs[id]
	if s == nil || s.removed {
		return nil
	}
	s.refs++
	return s
}

func (t *Tier) releaseSeg(s *segment) {
	t.mu.Lock()
	s.refs--
	closeNow := s.removed && s.refs == 0
	t.mu.Unlock()
	if closeNow {
		s.file.Close()
	}
}

// errGone means the segment an entry names no longer exists.
var errGone = errors.New("nvme: segment gone")

// readExtent reads e's whole extent into a pooled buffer (one aligned read,
// or for extents of 1 MiB and more aligned chunk reads in parallel, each
// chunk hashed as it lands, see readHashed) and verifies header and payload
// against e and k. On success the
// payload is buf[HeaderSize:HeaderSize+e.length]; the caller returns buf to
// the pool. A verification failure wraps block.ErrChecksum.
func (t *Tier) readExtent(k block.Key, e entry) ([]byte, error) {
	s := t.acquire(e.seg)
	if s == nil {
		return nil, errGone
	}
	ext := e.extent()
	buf := t.pool.get(int(ext))
	var fp uint64
	var err error
	if ext >= ChunkedReadMin {
		fp, err = readHashed(s.file, buf, e.off, HeaderSize, HeaderSize+int(e.length))
	} else {
		_, err = s.file.ReadAt(buf, e.off)
		fp = xxh3.Hash(buf[HeaderSize : HeaderSize+e.length])
	}
	t.releaseSeg(s)
	if err != nil {
		t.pool.put(buf)
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: %s: extent at %s:%d is beyond the end of the file", block.ErrChecksum, k, s.path, e.off)
		}
		return nil, fmt.Errorf("nvme: read %s at %d: %w", s.path, e.off, err)
	}
	t.st.readBytes.Add(uint64(ext))
	if err := verifyExtentFP(buf, k, e, fp); err != nil {
		t.pool.put(buf)
		return nil, fmt.Errorf("%w (%s:%d)", err, s.path, e.off)
	}
	return buf, nil
}

// ReadChunk is the unit of a large extent read: an extent of at least two
// chunks (ChunkedReadMin) is read as one aligned pread per chunk, all in
// flight at once. The payload's xxh3 check runs on one core at memory
// speed; on a 2-vCPU VM it added ~30% to a 2 MiB read at queue depth 1
// (docs/nvme.md). Reading the chunks in parallel and hashing each one as
// soon as it and its predecessors are in overlaps most of that pass with
// the I/O still in flight. ctxbench nvme-baseline reads its raw baseline
// the same way, so the two are compared at the same queue depth.
const ReadChunk = 512 << 10

// ChunkedReadMin is the smallest extent read in ReadChunk pieces.
const ChunkedReadMin = 2 * ReadChunk

const readChunk = ReadChunk

// readHashed fills buf from f at off with one aligned read per readChunk,
// all in flight at once, and returns the xxh3-64 of buf[from:to], fed to
// the hasher chunk by chunk in order as the reads complete.
func readHashed(f *os.File, buf []byte, off int64, from, to int) (uint64, error) {
	n := (len(buf) + readChunk - 1) / readChunk
	done := make([]chan error, n)
	for i := range done {
		done[i] = make(chan error, 1)
		go func() {
			pos := i * readChunk
			end := min(pos+readChunk, len(buf))
			_, err := f.ReadAt(buf[pos:end], off+int64(pos))
			done[i] <- err
		}()
	}
	h := xxh3.New()
	at := from
	var first error
	for i := range done {
		if err := <-done[i]; err != nil && first == nil {
			first = err
		}
		if first != nil {
			continue
		}
		if hi := min(min((i+1)*readChunk, len(buf)), to); hi > at {
			_, _ = h.Write(buf[at:hi])
			at = hi
		}
	}
	return h.Sum64(), first
}

// verifyExtentFP checks an extent's header against the index entry and its
// payload, whose xxh3-64 is fp, against the checksum.
func verifyExtentFP(buf []byte, k block.Key, e entry, fp uint64) error {
	return descriptor.VerifyExtent(buf, header{Key: k, Gen: e.gen, Length: e.length, Sum: e.sum}, fp)
}
