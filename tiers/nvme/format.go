package nvme

import (
	"encoding/binary"
	"fmt"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// On-disk extent format.
//
// Every block is one extent in a segment file, starting at a 4 KiB-aligned
// offset: one header page (HeaderSize bytes, of which the first
// headerFields+4 are used and the rest are zero), then the payload, zero-padded
// to the next 4 KiB boundary. The payload therefore starts on a 4 KiB boundary
// too, so a GPUDirect-Storage reader can DMA it without a bounce buffer, and
// one aligned read of ExtentLength bytes fetches header and payload together.
//
//	off  size  field
//	  0     4  magic "CTXN"
//	  4     2  format version (2)
//	  6     1  namespace length (<= 63)
//	  7     1  flags (bit 0: key has a part)
//	  8     8  sequence hash
//	 16     2  part
//	 18     1  priority
//	 19     1  reserved (0)
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

// header is the decoded header of one extent.
type header struct {
	key      block.Key
	priority uint8
	sum      uint32 // CRC-32C of the payload (the block's API checksum)
	fp       uint64 // xxh3-64 of the payload, verified on every read
	length   int64
	gen      uint64
	created  int64
	expires  int64
}

func alignUp(n int64) int64 { return (n + Align - 1) &^ (Align - 1) }

// extentLen is the aligned length of the extent holding a payload of n bytes.
func extentLen(n int64) int64 { return HeaderSize + alignUp(n) }

// encode writes h into the first headerFields+4 bytes of p (len(p) >= 128);
// the caller provides a zeroed page.
func (h *header) encode(p []byte) {
	copy(p[0:4], headerMagic)
	binary.LittleEndian.PutUint16(p[4:], formatVersion)
	p[6] = byte(len(h.key.Namespace))
	p[7] = 0
	if h.key.HasPart {
		p[7] = 1
	}
	if h.key.Shard != 0 {
		p[7] |= 2
	}
	binary.LittleEndian.PutUint64(p[8:], h.key.Hash)
	binary.LittleEndian.PutUint16(p[16:], h.key.Part)
	p[18] = h.priority
	p[19] = h.key.Shard // 0 for a whole block
	binary.LittleEndian.PutUint32(p[20:], h.sum)
	binary.LittleEndian.PutUint64(p[24:], uint64(h.length))
	binary.LittleEndian.PutUint64(p[32:], h.gen)
	binary.LittleEndian.PutUint64(p[40:], uint64(h.created))
	binary.LittleEndian.PutUint64(p[48:], uint64(h.expires))
	clear(p[56:124])
	copy(p[56:56+block.MaxNamespaceLen], h.key.Namespace)
	binary.LittleEndian.PutUint64(p[124:], h.fp)
	binary.LittleEndian.PutUint32(p[headerFields:], block.Checksum(p[:headerFields]))
}

// errBadHeader marks a page that is not a valid extent header.
var errBadHeader = fmt.Errorf("%w: not a valid extent header", block.ErrChecksum)

// decodeHeader parses and verifies a header page.
func decodeHeader(p []byte) (header, error) {
	if len(p) < headerFields+4 || string(p[0:4]) != headerMagic {
		return header{}, errBadHeader
	}
	if block.Checksum(p[:headerFields]) != binary.LittleEndian.Uint32(p[headerFields:]) {
		return header{}, errBadHeader
	}
	if v := binary.LittleEndian.Uint16(p[4:]); v != formatVersion {
		return header{}, fmt.Errorf("%w: extent format version %d", block.ErrChecksum, v)
	}
	nsLen := int(p[6])
	if nsLen == 0 || nsLen > block.MaxNamespaceLen {
		return header{}, errBadHeader
	}
	h := header{
		key:      block.Key{Namespace: string(p[56 : 56+nsLen]), Hash: binary.LittleEndian.Uint64(p[8:])},
		priority: p[18],
		sum:      binary.LittleEndian.Uint32(p[20:]),
		length:   int64(binary.LittleEndian.Uint64(p[24:])),
		gen:      binary.LittleEndian.Uint64(p[32:]),
		created:  int64(binary.LittleEndian.Uint64(p[40:])),
		expires:  int64(binary.LittleEndian.Uint64(p[48:])),
		fp:       binary.LittleEndian.Uint64(p[124:]),
	}
	if p[7]&1 != 0 {
		h.key.Part, h.key.HasPart = binary.LittleEndian.Uint16(p[16:]), true
	}
	if p[7]&2 != 0 {
		if p[19] == 0 || p[19] > block.MaxShard {
			return header{}, errBadHeader
		}
		h.key.Shard = p[19]
	}
	if h.length <= 0 || h.length > block.HardMaxBlockSize {
		return header{}, errBadHeader
	}
	return h, nil
}

// Index layout in badger.
//
//	"k" ns 0x00 hash(8, big endian) flags(1) part(2, big endian)  →  entry (entryLen bytes)
//
// flags: bit 0 has part, bits 1..7 the erasure shard (block.Key.Shard, 0 for
// a whole block; older indexes hold 0 or 1 there, which read as shard 0).
//
//	"m/head"                                                       →  head (24 bytes)
//
// Key order within a namespace is by hash, then part, which is the order of
// object names except among the parts of one hash (List sorts those).
const (
	keyPrefix = 'k'
	entryLen  = 8 + 8 + 8 + 4 + 8 + 1 + 1 + 8*4
)

var headKey = []byte("m/head")

func indexKey(k block.Key) []byte {
	b := make([]byte, 0, 1+len(k.Namespace)+1+11)
	b = append(b, keyPrefix)
	b = append(b, k.Namespace...)
	b = append(b, 0)
	b = binary.BigEndian.AppendUint64(b, k.Hash)
	f := k.Shard << 1
	if k.HasPart {
		f |= 1
	}
	b = append(b, f)
	return binary.BigEndian.AppendUint16(b, k.Part)
}

// nsPrefix is the index-key prefix of every block of namespace ns.
func nsPrefix(ns string) []byte {
	b := append([]byte{keyPrefix}, ns...)
	return append(b, 0)
}

func parseIndexKey(b []byte) (block.Key, bool) {
	if len(b) < 1+1+1+11 || b[0] != keyPrefix {
		return block.Key{}, false
	}
	rest := b[len(b)-11:]
	if b[len(b)-12] != 0 {
		return block.Key{}, false
	}
	k := block.Key{Namespace: string(b[1 : len(b)-12]), Hash: binary.BigEndian.Uint64(rest)}
	if rest[8]&1 == 1 {
		k.Part, k.HasPart = binary.BigEndian.Uint16(rest[9:]), true
	}
	k.Shard = rest[8] >> 1
	return k, true
}

const flagAccessed = 1

// entry is an index value: where a block's extent is and what it holds.
type entry struct {
	seg      uint64
	off      int64 // extent offset in the segment
	length   int64 // payload bytes
	sum      uint32
	gen      uint64
	priority uint8
	flags    uint8
	created  int64
	expires  int64
	pinUntil int64
	access   int64 // first access since written (0 = not accessed)
}

func (e *entry) extent() int64 { return extentLen(e.length) }

func (e *entry) encode() []byte {
	b := make([]byte, entryLen)
	binary.LittleEndian.PutUint64(b[0:], e.seg)
	binary.LittleEndian.PutUint64(b[8:], uint64(e.off))
	binary.LittleEndian.PutUint64(b[16:], uint64(e.length))
	binary.LittleEndian.PutUint32(b[24:], e.sum)
	binary.LittleEndian.PutUint64(b[28:], e.gen)
	b[36] = e.priority
	b[37] = e.flags
	binary.LittleEndian.PutUint64(b[38:], uint64(e.created))
	binary.LittleEndian.PutUint64(b[46:], uint64(e.expires))
	binary.LittleEndian.PutUint64(b[54:], uint64(e.pinUntil))
	binary.LittleEndian.PutUint64(b[62:], uint64(e.access))
	return b
}

func decodeEntry(b []byte) (entry, error) {
	if len(b) != entryLen {
		return entry{}, fmt.Errorf("%w: index entry of %d bytes", block.ErrChecksum, len(b))
	}
	return entry{
		seg:      binary.LittleEndian.Uint64(b[0:]),
		off:      int64(binary.LittleEndian.Uint64(b[8:])),
		length:   int64(binary.LittleEndian.Uint64(b[16:])),
		sum:      binary.LittleEndian.Uint32(b[24:]),
		gen:      binary.LittleEndian.Uint64(b[28:]),
		priority: b[36],
		flags:    b[37],
		created:  int64(binary.LittleEndian.Uint64(b[38:])),
		expires:  int64(binary.LittleEndian.Uint64(b[46:])),
		pinUntil: int64(binary.LittleEndian.Uint64(b[54:])),
		access:   int64(binary.LittleEndian.Uint64(b[62:])),
	}, nil
}

// head is the durable write position: every extent committed to the index
// lies below it, so the recovery scan starts there and never resurrects a
// deleted block.
type head struct {
	seg     uint64
	off     int64
	nextGen uint64
}

func (h head) encode() []byte {
	b := make([]byte, 24)
	binary.LittleEndian.PutUint64(b[0:], h.seg)
	binary.LittleEndian.PutUint64(b[8:], uint64(h.off))
	binary.LittleEndian.PutUint64(b[16:], h.nextGen)
	return b
}

func decodeHead(b []byte) (head, error) {
	if len(b) != 24 {
		return head{}, fmt.Errorf("%w: head record of %d bytes", block.ErrChecksum, len(b))
	}
	return head{
		seg:     binary.LittleEndian.Uint64(b[0:]),
		off:     int64(binary.LittleEndian.Uint64(b[8:])),
		nextGen: binary.LittleEndian.Uint64(b[16:]),
	}, nil
}

func (h head) after(seg uint64, off int64) bool {
	return h.seg > seg || (h.seg == seg && h.off >= off)
}
