package s3

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// A pack is one S3 object holding many blocks:
//
//	block 0 bytes | block 1 bytes | ... | index | trailer (32 bytes)
//
// The index lists every block: its key, offset and length in the pack, its
// CRC-32C and its expiry. The trailer, at a fixed place (the last 32 bytes),
// says how long the index is and carries its CRC-32C, so a reader that knows
// nothing about a pack finds its index with one ranged GET of the tail and
// one of the index. See docs/s3tier.md.
//
// Damage to any byte of the index or trailer is detected, except in the
// trailer's created time, which no checksum covers: it only orders
// compaction and is reported as a block's creation time (expiry is per
// block, in the checksummed index).

const (
	trailerSize  = 32
	packVersion  = 1
	maxPackCount = 1 << 20
)

var packMagic = [8]byte{'C', 'T', 'X', 'P', 'A', 'C', 'K', 0x01}

// packEntry is one block of a pack.
type packEntry struct {
	Key     block.Key
	Off     int64
	Len     int64
	Sum     uint32
	Expires int64 // unix nanoseconds, 0 for never
}

// entrySize is the encoded size of e in the index.
func entrySize(e packEntry) int { return 1 + len(e.Key.Namespace) + 8 + 2 + 1 + 8 + 4 + 4 + 8 }

// appendEntry appends e's index encoding to b.
func appendEntry(b []byte, e packEntry) []byte {
	b = append(b, byte(len(e.Key.Namespace)))
	b = append(b, e.Key.Namespace...)
	b = binary.LittleEndian.AppendUint64(b, e.Key.Hash)
	b = binary.LittleEndian.AppendUint16(b, e.Key.Part)
	// flags: bit 0 has part, bits 1..7 the erasure shard (block.Key.Shard,
	// 0 for a whole block), as in the NVMe extent header.
	flags := e.Key.Shard << 1
	if e.Key.HasPart {
		flags |= 1
	}
	b = append(b, flags)
	b = binary.LittleEndian.AppendUint64(b, uint64(e.Off))
	b = binary.LittleEndian.AppendUint32(b, uint32(e.Len))
	b = binary.LittleEndian.AppendUint32(b, e.Sum)
	b = binary.LittleEndian.AppendUint64(b, uint64(e.Expires))
	return b
}

// encodeIndex returns the index and trailer of a pack whose block bytes take
// dataLen bytes.
func encodeIndex(entries []packEntry, created time.Time) []byte {
	n := trailerSize
	for _, e := range entries {
		n += entrySize(e)
	}
	b := make([]byte, 0, n)
	for _, e := range entries {
		b = appendEntry(b, e)
	}
	idxLen := len(b)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(entries)))
	b = binary.LittleEndian.AppendUint32(b, uint32(idxLen))
	b = binary.LittleEndian.AppendUint32(b, block.Checksum(b[:idxLen]))
	b = binary.LittleEndian.AppendUint16(b, packVersion)
	b = binary.LittleEndian.AppendUint16(b, 0)
	b = binary.LittleEndian.AppendUint64(b, uint64(created.UnixNano()))
	b = append(b, packMagic[:]...)
	return b
}

// trailer is a pack's decoded trailer.
type trailer struct {
	count   int
	idxLen  int64
	idxSum  uint32
	created int64
}

// decodeTrailer parses the last trailerSize bytes of a pack of packSize bytes.
func decodeTrailer(b []byte, packSize int64) (trailer, error) {
	if len(b) != trailerSize {
		return trailer{}, fmt.Errorf("%w: s3 pack trailer is %d bytes, want %d", block.ErrChecksum, len(b), trailerSize)
	}
	if [8]byte(b[24:32]) != packMagic {
		return trailer{}, fmt.Errorf("%w: s3 pack trailer has no pack magic", block.ErrChecksum)
	}
	t := trailer{
		count:   int(binary.LittleEndian.Uint32(b[0:4])),
		idxLen:  int64(binary.LittleEndian.Uint32(b[4:8])),
		idxSum:  binary.LittleEndian.Uint32(b[8:12]),
		created: int64(binary.LittleEndian.Uint64(b[16:24])),
	}
	if v := binary.LittleEndian.Uint16(b[12:14]); v != packVersion {
		return trailer{}, fmt.Errorf("%w: s3 pack version %d, want %d", block.ErrInvalidArgument, v, packVersion)
	}
	if r := binary.LittleEndian.Uint16(b[14:16]); r != 0 {
		return trailer{}, fmt.Errorf("%w: s3 pack trailer reserved bytes %#04x, want 0", block.ErrChecksum, r)
	}
	minEntry := int64(entrySize(packEntry{}))
	switch {
	case t.count > maxPackCount:
		return trailer{}, fmt.Errorf("%w: s3 pack claims %d blocks", block.ErrChecksum, t.count)
	case t.idxLen < int64(t.count)*minEntry || t.idxLen > packSize-trailerSize:
		return trailer{}, fmt.Errorf("%w: s3 pack index length %d does not fit %d blocks in a %d-byte pack", block.ErrChecksum, t.idxLen, t.count, packSize)
	}
	return t, nil
}

// decodeIndex parses a pack's index (verified against t) into entries,
// checking that every block lies inside the data area before the index.
func decodeIndex(b []byte, t trailer, packSize int64) ([]packEntry, error) {
	if int64(len(b)) != t.idxLen {
		return nil, fmt.Errorf("%w: s3 pack index is %d bytes, trailer says %d", block.ErrChecksum, len(b), t.idxLen)
	}
	if s := block.Checksum(b); s != t.idxSum {
		return nil, fmt.Errorf("%w: s3 pack index crc32c %08x, trailer says %08x", block.ErrChecksum, s, t.idxSum)
	}
	dataEnd := packSize - trailerSize - t.idxLen
	out := make([]packEntry, 0, t.count)
	for i := 0; i < t.count; i++ {
		if len(b) < 1 {
			return nil, fmt.Errorf("%w: s3 pack index truncated at entry %d", block.ErrChecksum, i)
		}
		nl := int(b[0])
		if len(b) < 1+nl+35 {
			return nil, fmt.Errorf("%w: s3 pack index truncated at entry %d", block.ErrChecksum, i)
		}
		var e packEntry
		e.Key.Namespace = string(b[1 : 1+nl])
		p := b[1+nl:]
		e.Key.Hash = binary.LittleEndian.Uint64(p[0:8])
		e.Key.Part = binary.LittleEndian.Uint16(p[8:10])
		e.Key.HasPart = p[10]&1 != 0
		e.Key.Shard = p[10] >> 1 // seven bits: at most block.MaxShard
		if !e.Key.HasPart && e.Key.Part != 0 {
			return nil, fmt.Errorf("%w: s3 pack entry %d has a part without the part flag", block.ErrChecksum, i)
		}
		e.Off = int64(binary.LittleEndian.Uint64(p[11:19]))
		e.Len = int64(binary.LittleEndian.Uint32(p[19:23]))
		e.Sum = binary.LittleEndian.Uint32(p[23:27])
		e.Expires = int64(binary.LittleEndian.Uint64(p[27:35]))
		if err := block.ValidNamespaceName(e.Key.Namespace); err != nil {
			return nil, fmt.Errorf("%w: s3 pack entry %d: %v", block.ErrChecksum, i, err)
		}
		if e.Off < 0 || e.Len < 1 || e.Off > dataEnd || e.Len > dataEnd-e.Off {
			return nil, fmt.Errorf("%w: s3 pack entry %d (%d bytes at %d) lies outside the data area of %d bytes", block.ErrChecksum, i, e.Len, e.Off, dataEnd)
		}
		out = append(out, e)
		b = p[35:]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: s3 pack index has %d trailing bytes", block.ErrChecksum, len(b))
	}
	return out, nil
}
