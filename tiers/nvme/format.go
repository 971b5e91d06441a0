package nvme

import (
	"encoding/binary"
	"fmt"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/descriptor"
)

// The on-disk extent format (header page, payload, padding) is defined in
// ctxstore/block/descriptor, so that a co-located reader can verify an
// extent without importing this package.
const (
	// Align is the alignment of every extent, header and payload.
	Align = descriptor.Align
	// HeaderSize is the size of the header page that starts every extent.
	HeaderSize = descriptor.HeaderSize
)

// header is the decoded header of one extent.
type header = descriptor.Header

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

func (e *entry) extent() int64 { return descriptor.ExtentLen(e.length) }

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
