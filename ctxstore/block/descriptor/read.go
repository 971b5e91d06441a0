package descriptor

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// ReadExtent is the co-located reader's side of an NVMe descriptor
// (d.Tier is block.TierNVMe): it opens d.Path with O_DIRECT (buffered where
// the filesystem refuses it), reads the extent [d.Offset,
// d.Offset+d.ReadLength) with one aligned pread, and verifies header and
// payload against key and d. It returns the payload in a fresh buffer. A
// descriptor of the wrong shape wraps block.ErrInvalidArgument; bytes that
// do not match, or an extent beyond the end of the file, block.ErrChecksum.
func ReadExtent(key block.Key, d block.Descriptor) ([]byte, error) {
	f, err := os.OpenFile(d.Path, os.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		f, err = os.OpenFile(d.Path, os.O_RDONLY, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("nvme: open descriptor: %w", err)
	}
	defer f.Close()
	if d.Offset%Align != 0 || d.Length <= 0 || d.ReadLength != ExtentLen(d.Length) || d.DataOffset != d.Offset+HeaderSize {
		return nil, fmt.Errorf("%w: malformed descriptor %+v", block.ErrInvalidArgument, d)
	}
	buf := AlignedBuffer(int(d.ReadLength))
	if _, err := f.ReadAt(buf, d.Offset); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: %s: extent beyond end of %s", block.ErrChecksum, key, d.Path)
		}
		return nil, fmt.Errorf("nvme: read descriptor: %w", err)
	}
	payload := buf[HeaderSize : HeaderSize+d.Length : HeaderSize+d.Length]
	want := Header{Key: key, Length: d.Length, Sum: d.Sum, Gen: d.Generation}
	if err := VerifyExtent(buf, want, xxh3.Hash(payload)); err != nil {
		return nil, err
	}
	return payload, nil
}
