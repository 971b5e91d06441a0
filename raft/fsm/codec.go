package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrMalformed is returned (wrapped) by every decoder for input that is
// truncated, over-long, or otherwise not a valid encoding. It wraps
// block.ErrInvalidArgument via the errors built by decodeErr.
var ErrMalformed = errors.New("fsm: malformed encoding")

// maxString bounds any length-prefixed string or byte field (1 MiB), so a
// corrupt length cannot make a decoder allocate without limit.
const maxString = 1 << 20

// encoder appends the primitive encodings to a byte slice.
type encoder struct{ b []byte }

func (e *encoder) u8(v uint8)       { e.b = append(e.b, v) }
func (e *encoder) u32(v uint32)     { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *encoder) u64(v uint64)     { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) bytes(v []byte) {
	e.uvarint(uint64(len(v)))
	e.b = append(e.b, v...)
}
func (e *encoder) str(v string) {
	e.uvarint(uint64(len(v)))
	e.b = append(e.b, v...)
}
func (e *encoder) bool(v bool) {
	if v {
		e.u8(1)
	} else {
		e.u8(0)
	}
}

// decoder reads primitives with bounds checks. The first error sticks: every
// later read returns zero values, and err reports what went wrong and where.
type decoder struct {
	b   []byte
	off int
	err error
	// last, when set, holds the strings most recently decoded by
	// cachedStr: an index batch names one namespace and a few nodes over
	// and over, and each repeat then shares one string instead of
	// allocating its own.
	last *[2]string
	// shardArena, when set, is where shards() carves placements from: an
	// index batch's placements then share a few allocations instead of
	// one each (see shardArena).
	shardArena *shardArena
}

// shardArena hands out placements of one decoded index command from
// shared chunks. Each placement is capped at its own length, so appending
// to one never writes into another's.
type shardArena struct {
	free []Shard
	// chunk is the size of a new chunk (at least what is asked for).
	chunk int
}

func (a *shardArena) take(n int) []Shard {
	if len(a.free) < n {
		a.free = make([]Shard, max(n, a.chunk))
	}
	out := a.free[:n:n]
	a.free = a.free[n:]
	return out
}

func (d *decoder) fail(format string, a ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w at byte %d: %s", ErrMalformed, d.off, fmt.Sprintf(format, a...))
	}
}

func (d *decoder) remaining() int { return len(d.b) - d.off }

func (d *decoder) u8() uint8 {
	if d.err != nil {
		return 0
	}
	if d.remaining() < 1 {
		d.fail("truncated")
		return 0
	}
	v := d.b[d.off]
	d.off++
	return v
}

func (d *decoder) u32() uint32 {
	if d.err != nil {
		return 0
	}
	if d.remaining() < 4 {
		d.fail("truncated")
		return 0
	}
	v := binary.LittleEndian.Uint32(d.b[d.off:])
	d.off += 4
	return v
}

func (d *decoder) u64() uint64 {
	if d.err != nil {
		return 0
	}
	if d.remaining() < 8 {
		d.fail("truncated")
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b[d.off:])
	d.off += 8
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	var min [binary.MaxVarintLen64]byte
	if n != binary.PutUvarint(min[:], v) {
		// Every encoder writes the shortest form: a longer one is not an
		// encoding of v, and accepting it would give one value two logs.
		d.fail("uvarint %d in %d bytes, not the shortest form", v, n)
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b[d.off:])
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	var min [binary.MaxVarintLen64]byte
	if n != binary.PutVarint(min[:], v) {
		d.fail("varint %d in %d bytes, not the shortest form", v, n)
		return 0
	}
	d.off += n
	return v
}

// count reads a uvarint element count and checks it against the bytes left,
// given that each element takes at least minSize bytes.
func (d *decoder) count(minSize int) int {
	n := d.uvarint()
	if d.err != nil {
		return 0
	}
	if minSize < 1 {
		minSize = 1
	}
	if n > uint64(d.remaining()/minSize) {
		d.fail("count %d exceeds the %d bytes left", n, d.remaining())
		return 0
	}
	return int(n)
}

func (d *decoder) rawBytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > maxString {
		d.fail("length %d over limit %d", n, maxString)
		return nil
	}
	if n > uint64(d.remaining()) {
		d.fail("length %d exceeds the %d bytes left", n, d.remaining())
		return nil
	}
	v := d.b[d.off : d.off+int(n)]
	d.off += int(n)
	return v
}

// bytes returns a copy, so decoded values never alias the log entry.
func (d *decoder) bytes() []byte {
	v := d.rawBytes()
	if v == nil {
		return nil
	}
	return append([]byte(nil), v...)
}

func (d *decoder) str() string { return string(d.rawBytes()) }

// cachedStr is str sharing the string of an earlier call (slot 0 or 1 of
// d.last) when the bytes are the same.
func (d *decoder) cachedStr(slot int) string {
	raw := d.rawBytes()
	if d.last == nil {
		return string(raw)
	}
	if string(raw) != d.last[slot] {
		d.last[slot] = string(raw)
	}
	return d.last[slot]
}

func (d *decoder) bool() bool {
	switch v := d.u8(); v {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail("bool byte %d", v)
		return false
	}
}

func (d *decoder) int() int {
	v := d.varint()
	if v > math.MaxInt32 || v < math.MinInt32 {
		d.fail("integer %d out of range", v)
		return 0
	}
	return int(v)
}

// done fails if bytes are left over: every encoding is exact.
func (d *decoder) done() error {
	if d.err == nil && d.remaining() != 0 {
		d.fail("%d trailing bytes", d.remaining())
	}
	return d.err
}
