package object

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Header is one stored response header of an S3 object: Content-Type,
// Content-Encoding, Cache-Control, an x-amz-meta-* entry...
type Header struct{ Name, Value string }

// Meta is an S3 object's metadata, kept in its manifest.
type Meta struct {
	Size int64
	// ETag is the quoted entity tag: the MD5 of the bytes for a single PUT,
	// "<md5 of the parts' MD5s>-N" for an object of N multipart parts.
	ETag     string
	Modified time.Time
	// Parts is the number of multipart parts, 0 for a single PUT.
	Parts   int
	Headers []Header
}

// Segment is a run of data blocks written by one stream (a PUT or one
// multipart part): blocks (namespace, Version, part i) for i in
// [0, ceil(Size/Chunk)), each Chunk bytes except the last.
type Segment struct {
	Version uint64
	Size    int64
	Chunk   int64
}

// Blocks returns how many data blocks the segment has.
func (g Segment) Blocks() int {
	if g.Size == 0 {
		return 0
	}
	return int((g.Size + g.Chunk - 1) / g.Chunk)
}

// manifest is the value of an object's record: its metadata and segments.
type manifest struct {
	Meta
	Segments []Segment
}

// Limits of a manifest's decoder: far above what the S3 layer writes, so a
// damaged record cannot make it allocate without bound.
const (
	maxHeaders  = 1024
	maxSegments = 10000
	maxField    = 64 << 10
	// MaxChunksPerSegment is the number of data blocks one segment may
	// have: block parts are 16-bit.
	MaxChunksPerSegment = 1 << 16
)

const manifestMagic = "CTXM\x01"

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func (m manifest) encode() []byte {
	b := []byte(manifestMagic)
	b = binary.AppendUvarint(b, uint64(m.Size))
	b = appendStr(b, m.ETag)
	b = binary.AppendVarint(b, m.Modified.UnixNano())
	b = binary.AppendUvarint(b, uint64(m.Parts))
	b = binary.AppendUvarint(b, uint64(len(m.Headers)))
	for _, h := range m.Headers {
		b = appendStr(appendStr(b, h.Name), h.Value)
	}
	b = binary.AppendUvarint(b, uint64(len(m.Segments)))
	for _, g := range m.Segments {
		b = binary.LittleEndian.AppendUint64(b, g.Version)
		b = binary.AppendUvarint(b, uint64(g.Size))
		b = binary.AppendUvarint(b, uint64(g.Chunk))
	}
	return b
}

// reader decodes varints and strings, remembering the first error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: object manifest: bad %s", block.ErrInvalidArgument, what)
	}
}

func (r *reader) uvarint(what string, limit uint64) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > limit {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint(what string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) str(what string) string {
	n := r.uvarint(what, maxField)
	if r.err != nil || uint64(len(r.b)) < n {
		r.fail(what)
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *reader) u64(what string) uint64 {
	if r.err != nil || len(r.b) < 8 {
		r.fail(what)
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

// decodeManifest parses a record's value. It checks that the segments add up
// to the size and that every segment fits the block-part space, so a reader
// never computes a block outside the object.
func decodeManifest(b []byte) (manifest, error) {
	if len(b) < len(manifestMagic) || string(b[:len(manifestMagic)]) != manifestMagic {
		return manifest{}, fmt.Errorf("%w: record is not an object manifest", block.ErrInvalidArgument)
	}
	r := &reader{b: b[len(manifestMagic):]}
	var m manifest
	m.Size = int64(r.uvarint("size", 1<<62))
	m.ETag = r.str("etag")
	m.Modified = time.Unix(0, r.varint("time")).UTC()
	m.Parts = int(r.uvarint("parts", maxSegments))
	nh := r.uvarint("header count", maxHeaders)
	for i := uint64(0); i < nh && r.err == nil; i++ {
		m.Headers = append(m.Headers, Header{Name: r.str("header name"), Value: r.str("header value")})
	}
	ns := r.uvarint("segment count", maxSegments)
	var total int64
	for i := uint64(0); i < ns && r.err == nil; i++ {
		g := Segment{Version: r.u64("segment version"), Size: int64(r.uvarint("segment size", 1<<62)), Chunk: int64(r.uvarint("segment chunk", block.HardMaxBlockSize))}
		if r.err == nil && (g.Chunk < 1 || g.Blocks() > MaxChunksPerSegment) {
			r.fail("segment shape")
		}
		total += g.Size
		m.Segments = append(m.Segments, g)
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	if r.err == nil && total != m.Size {
		r.fail("size (segments do not add up)")
	}
	return m, r.err
}
