package nvme

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/descriptor"
)

// ReadInto reads key's payload, which must be length bytes, straight into
// dst and verifies it as Get does, without a staging buffer: the DRAM tier
// promotes a block this way, reading it into its own pages (tiers.Manager).
// dst must hold at least AlignUp(length) bytes and start on an Align
// boundary, as an O_DIRECT read needs (the DRAM arena's pages do). The
// extent's header page is read into a pooled page beside the payload's
// chunk reads and checked against the index entry; the payload's xxh3-64 is
// computed from dst as its chunks land and checked against the header's
// fingerprint. It returns the block's CRC-32C and that fingerprint.
//
// A block of another length is block.ErrConflict (the caller reads it with
// Get instead); a block that fails verification is dropped, counted and
// reported as block.ErrNotFound, as by Get. On any error dst's contents are
// undefined.
func (t *Tier) ReadInto(_ context.Context, key block.Key, length int64, dst []byte) (sum uint32, fp uint64, err error) {
	if err := t.enter(); err != nil {
		return 0, 0, err
	}
	defer t.leave()
	start := t.now()
	for attempt := 0; ; attempt++ {
		e, ok, err := t.live(key, start.UnixNano())
		if err != nil {
			return 0, 0, err
		}
		if !ok {
			t.st.misses.Add(1)
			return 0, 0, fmt.Errorf("%w: %s", block.ErrNotFound, key)
		}
		if e.length != length {
			return 0, 0, fmt.Errorf("%w: %s holds %d bytes, not %d", block.ErrConflict, key, e.length, length)
		}
		if int64(len(dst)) < descriptor.AlignUp(length) {
			return 0, 0, fmt.Errorf("%w: %s: a %d-byte buffer for %d bytes", block.ErrInvalidArgument, key, len(dst), descriptor.AlignUp(length))
		}
		fp, err := t.readExtentInto(key, e, dst[:descriptor.AlignUp(length)])
		if errors.Is(err, errGone) && attempt == 0 {
			continue // reclaimed between lookup and read: the entry may have moved
		}
		if err != nil {
			if !errors.Is(err, block.ErrChecksum) && !errors.Is(err, errGone) {
				return 0, 0, err
			}
			t.corrupt(key, e, err)
			t.st.misses.Add(1)
			return 0, 0, fmt.Errorf("%w: %s failed verification at rest and was dropped", block.ErrNotFound, key)
		}
		t.touch(key, e, start.UnixNano())
		t.st.hits.Add(1)
		t.readLat.Observe(t.now().Sub(start).Seconds())
		return e.sum, fp, nil
	}
}

// readExtentInto is readExtent with the payload read into payload (the
// extent's payload pages) and the header into a pooled page; it returns the
// payload's verified xxh3-64.
func (t *Tier) readExtentInto(k block.Key, e entry, payload []byte) (uint64, error) {
	s := t.acquire(e.seg)
	if s == nil {
		return 0, errGone
	}
	hdr := t.pool.get(HeaderSize)
	defer t.pool.put(hdr)
	fp, err := readSplit(s.file, hdr, payload, e.off, int(e.length))
	t.releaseSeg(s)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("%w: %s: extent at %s:%d is beyond the end of the file", block.ErrChecksum, k, s.path, e.off)
		}
		return 0, fmt.Errorf("nvme: read %s at %d: %w", s.path, e.off, err)
	}
	t.st.readBytes.Add(uint64(e.extent()))
	if err := verifyExtentFP(hdr, k, e, fp); err != nil {
		return 0, fmt.Errorf("%w (%s:%d)", err, s.path, e.off)
	}
	return fp, nil
}

// readSplit reads the extent at off of f into hdr (its header page) and
// payload (the rest), the header beside the payload's chunk reads, and
// returns the xxh3-64 of payload[:length].
func readSplit(f *os.File, hdr, payload []byte, off int64, length int) (uint64, error) {
	herr := make(chan error, 1)
	go func() {
		_, err := f.ReadAt(hdr, off)
		herr <- err
	}()
	fp, err := readHashed(f, payload, off+HeaderSize, 0, length)
	if e := <-herr; err == nil {
		err = e
	}
	return fp, err
}
