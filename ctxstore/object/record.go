package object

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Record layout (little endian):
//
//	magic   4 bytes "CTXO"
//	format  1 byte  (2; 1 for records written before generations)
//	flags   1 byte  (0; reserved)
//	keylen  4 bytes
//	expires 8 bytes Unix milliseconds, 0 for none
//	gen     8 bytes the record's generation (format 2 only; format 1 is 0)
//	key     keylen bytes
//	value   the rest
//
// A key's records live in the two slots of its pair (slots.go); the one
// with the higher generation is the key's value.
const (
	recordMagic    = "CTXO"
	recordFormat   = 2
	recordFormatV1 = 1
	headerSizeV1   = 18
	// HeaderSize is the fixed part of a record; a value's limit is the
	// namespace's max block size less HeaderSize and the key's length.
	HeaderSize = 26
)

// encodeRecord builds the block bytes for key and value at generation gen.
func encodeRecord(key, value []byte, expires time.Time, gen uint64) []byte {
	b := make([]byte, HeaderSize+len(key)+len(value))
	copy(b, recordMagic)
	b[4] = recordFormat
	binary.LittleEndian.PutUint32(b[6:], uint32(len(key)))
	binary.LittleEndian.PutUint64(b[18:], gen)
	if !expires.IsZero() {
		ms := expires.UnixMilli()
		if ms == 0 {
			ms = 1 // 0 means "never"
		}
		binary.LittleEndian.PutUint64(b[10:], uint64(ms))
	}
	copy(b[HeaderSize:], key)
	copy(b[HeaderSize+len(key):], value)
	return b
}

// record is a decoded view into a block's bytes (no copy).
type record struct {
	key     []byte
	value   []byte
	expires time.Time
	gen     uint64
}

// decodeRecord parses a block's bytes; a block that is not a record (an
// engine's KV block in the same namespace, a damaged header) is
// block.ErrInvalidArgument.
func decodeRecord(b []byte) (record, error) {
	if len(b) < headerSizeV1 || string(b[:4]) != recordMagic {
		return record{}, fmt.Errorf("%w: block is not an object record", block.ErrInvalidArgument)
	}
	hs := HeaderSize
	switch b[4] {
	case recordFormat:
		if len(b) < HeaderSize {
			return record{}, fmt.Errorf("%w: object record of %d bytes is shorter than its header", block.ErrInvalidArgument, len(b))
		}
	case recordFormatV1:
		hs = headerSizeV1
	default:
		return record{}, fmt.Errorf("%w: object record format %d (want %d or %d)", block.ErrInvalidArgument, b[4], recordFormatV1, recordFormat)
	}
	kl := binary.LittleEndian.Uint32(b[6:])
	if uint64(kl) > uint64(len(b)-hs) {
		return record{}, fmt.Errorf("%w: object record key length %d past its %d bytes", block.ErrInvalidArgument, kl, len(b))
	}
	r := record{key: b[hs : hs+int(kl)], value: b[hs+int(kl):]}
	if hs == HeaderSize {
		r.gen = binary.LittleEndian.Uint64(b[18:])
	}
	if ms := int64(binary.LittleEndian.Uint64(b[10:])); ms != 0 {
		r.expires = time.UnixMilli(ms)
	}
	return r, nil
}

// live reports whether r has not expired at now.
func (r record) live(now time.Time) bool { return r.expires.IsZero() || now.Before(r.expires) }
