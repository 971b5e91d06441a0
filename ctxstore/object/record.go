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
//	version 1 byte  (1)
//	flags   1 byte  (0; reserved)
//	keylen  4 bytes
//	expires 8 bytes Unix milliseconds, 0 for none
//	key     keylen bytes
//	value   the rest
const (
	recordMagic   = "CTXO"
	recordVersion = 1
	// HeaderSize is the fixed part of a record; a value's limit is the
	// namespace's max block size less HeaderSize and the key's length.
	HeaderSize = 18
)

// encodeRecord builds the block bytes for key and value.
func encodeRecord(key, value []byte, expires time.Time) []byte {
	b := make([]byte, HeaderSize+len(key)+len(value))
	copy(b, recordMagic)
	b[4] = recordVersion
	binary.LittleEndian.PutUint32(b[6:], uint32(len(key)))
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
}

// decodeRecord parses a block's bytes; a block that is not a record (an
// engine's KV block in the same namespace, a damaged header) is
// block.ErrInvalidArgument.
func decodeRecord(b []byte) (record, error) {
	if len(b) < HeaderSize || string(b[:4]) != recordMagic {
		return record{}, fmt.Errorf("%w: block is not an object record", block.ErrInvalidArgument)
	}
	if b[4] != recordVersion {
		return record{}, fmt.Errorf("%w: object record version %d (want %d)", block.ErrInvalidArgument, b[4], recordVersion)
	}
	kl := binary.LittleEndian.Uint32(b[6:])
	if uint64(kl) > uint64(len(b)-HeaderSize) {
		return record{}, fmt.Errorf("%w: object record key length %d past its %d bytes", block.ErrInvalidArgument, kl, len(b))
	}
	r := record{key: b[HeaderSize : HeaderSize+int(kl)], value: b[HeaderSize+int(kl):]}
	if ms := int64(binary.LittleEndian.Uint64(b[10:])); ms != 0 {
		r.expires = time.UnixMilli(ms)
	}
	return r, nil
}

// live reports whether r has not expired at now.
func (r record) live(now time.Time) bool { return r.expires.IsZero() || now.Before(r.expires) }
