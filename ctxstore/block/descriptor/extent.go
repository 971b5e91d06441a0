package descriptor

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// On-disk extent format.
//
// Every block is one extent in a segment file, starting at a 4 KiB-aligned
// offset: one header page (HeaderSize bytes, of which the first
// headerFields+4 are used and the rest are zero), then the payload, zero-padded
// to the next 4 KiB boundary. The payload therefore starts on a 4 KiB boundary
// too, so a GPUDirect-Storage reader can DMA it without a bounce buffer, and
// one aligned read of ExtentLen bytes fetches header and payload together.
//
//	off  size  field
//	  0     4  magic "CTXN"
//	  4     2  format version (2)
//	  6     1  namespace length (<= 63)
//	  7     1  flags (bit 0: key has a part; bit 1: key has a shard)
//	  8     8  sequence hash
//	 16     2  part
//	 18     1  priority
//	 19     1  erasure shard (0 for a whole block)
//	 20     4  CRC-32C of the payload
//	 24     8  payload length
//	 32     8  generation (unique per extent written by this tier directory)
//	 40     8  created, unix nanoseconds
//	 48     8  expires, unix nanoseconds (0 = never)
//	 56    63  namespace bytes, zero-padded
//	119     5  reserved (0)
//	124     8  xxh3-64 fingerprint of the payload (what reads verify)
//	132     4  CRC-32C of bytes [0,132)
const (
	// Align is the alignment of every extent, header and payload.
	Align = 4096
	// HeaderSize is the size of the header page that starts every extent.
	HeaderSize    = Align
	headerFields  = 132
	headerMagic   = "CTXN"
	formatVersion = 2
)

// Header is the decoded header of one extent.
type Header struct {
	Key      block.Key
	Priority uint8
	Sum      uint32 // CRC-32C of the payload (the block's API checksum)
	FP       uint64 // xxh3-64 of the payload, verified on every read
	Length   int64
	Gen      uint64
	Created  int64
	Expires  int64
}

// AlignUp rounds n up to a multiple of Align.
func AlignUp(n int64) int64 { return (n + Align - 1) &^ (Align - 1) }

// ExtentLen is the aligned length of the extent holding a payload of n bytes.
func ExtentLen(n int64) int64 { return HeaderSize + AlignUp(n) }

// Encode writes h into the first headerFields+4 bytes of p (len(p) >= 136);
// the caller provides a zeroed page.
func (h *Header) Encode(p []byte) {
	copy(p[0:4], headerMagic)
	binary.LittleEndian.PutUint16(p[4:], formatVersion)
	p[6] = byte(len(h.Key.Namespace))
	p[7] = 0
	if h.Key.HasPart {
		p[7] = 1
	}
	if h.Key.Shard != 0 {
		p[7] |= 2
	}
	binary.LittleEndian.PutUint64(p[8:], h.Key.Hash)
	binary.LittleEndian.PutUint16(p[16:], h.Key.Part)
	p[18] = h.Priority
	p[19] = h.Key.Shard // 0 for a whole block
	binary.LittleEndian.PutUint32(p[20:], h.Sum)
	binary.LittleEndian.PutUint64(p[24:], uint64(h.Length))
	binary.LittleEndian.PutUint64(p[32:], h.Gen)
	binary.LittleEndian.PutUint64(p[40:], uint64(h.Created))
	binary.LittleEndian.PutUint64(p[48:], uint64(h.Expires))
	clear(p[56:124])
	copy(p[56:56+block.MaxNamespaceLen], h.Key.Namespace)
	binary.LittleEndian.PutUint64(p[124:], h.FP)
	binary.LittleEndian.PutUint32(p[headerFields:], block.Checksum(p[:headerFields]))
}

// errBadHeader marks a page that is not a valid extent header.
var errBadHeader = fmt.Errorf("%w: not a valid extent header", block.ErrChecksum)

// DecodeHeader parses and verifies a header page. Any page that is not a
// header this package's Encode wrote wraps block.ErrChecksum.
func DecodeHeader(p []byte) (Header, error) {
	if len(p) < headerFields+4 || string(p[0:4]) != headerMagic {
		return Header{}, errBadHeader
	}
	if block.Checksum(p[:headerFields]) != binary.LittleEndian.Uint32(p[headerFields:]) {
		return Header{}, errBadHeader
	}
	if v := binary.LittleEndian.Uint16(p[4:]); v != formatVersion {
		return Header{}, fmt.Errorf("%w: extent format version %d", block.ErrChecksum, v)
	}
	nsLen := int(p[6])
	if nsLen == 0 || nsLen > block.MaxNamespaceLen {
		return Header{}, errBadHeader
	}
	h := Header{
		Key:      block.Key{Namespace: string(p[56 : 56+nsLen]), Hash: binary.LittleEndian.Uint64(p[8:])},
		Priority: p[18],
		Sum:      binary.LittleEndian.Uint32(p[20:]),
		Length:   int64(binary.LittleEndian.Uint64(p[24:])),
		Gen:      binary.LittleEndian.Uint64(p[32:]),
		Created:  int64(binary.LittleEndian.Uint64(p[40:])),
		Expires:  int64(binary.LittleEndian.Uint64(p[48:])),
		FP:       binary.LittleEndian.Uint64(p[124:]),
	}
	if p[7]&1 != 0 {
		h.Key.Part, h.Key.HasPart = binary.LittleEndian.Uint16(p[16:]), true
	}
	if p[7]&2 != 0 {
		if p[19] == 0 || p[19] > block.MaxShard {
			return Header{}, errBadHeader
		}
		h.Key.Shard = p[19]
	}
	if h.Length <= 0 || h.Length > block.HardMaxBlockSize {
		return Header{}, errBadHeader
	}
	return h, nil
}

// VerifyExtent checks buf, an extent read whole from its start, against
// want (its key, generation, payload length and CRC-32C) and fp, the
// xxh3-64 of buf's payload that the caller computed: the header must decode,
// name want, and carry fp as its fingerprint. A mismatch wraps
// block.ErrChecksum.
func VerifyExtent(buf []byte, want Header, fp uint64) error {
	if int64(len(buf)) < HeaderSize {
		return fmt.Errorf("%w: %s: extent of %d bytes", block.ErrChecksum, want.Key, len(buf))
	}
	h, err := DecodeHeader(buf[:HeaderSize])
	if err != nil {
		return fmt.Errorf("%s: %w", want.Key, err)
	}
	if h.Key != want.Key || h.Gen != want.Gen || h.Length != want.Length || h.Sum != want.Sum {
		return fmt.Errorf("%w: %s: extent header names %s gen %d len %d crc %08x, index says gen %d len %d crc %08x",
			block.ErrChecksum, want.Key, h.Key, h.Gen, h.Length, h.Sum, want.Gen, want.Length, want.Sum)
	}
	// The header (itself CRC-protected and matched against the index above)
	// carries an xxh3-64 fingerprint of the payload: verifying it costs a
	// quarter of a CRC-32C pass, and reads are the hot path.
	if fp != h.FP {
		return fmt.Errorf("%w: %s: payload xxh3 %016x, want %016x", block.ErrChecksum, want.Key, fp, h.FP)
	}
	return nil
}

// AlignedBuffer returns n bytes (n a multiple of Align) starting on an Align
// boundary, as O_DIRECT reads and writes need.
func AlignedBuffer(n int) []byte {
	b := make([]byte, n+Align)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (Align - 1))
	return b[off : off+n : off+n]
}
