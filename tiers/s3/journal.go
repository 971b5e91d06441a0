package s3

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// The local index is kept in memory and persisted as a journal of records,
// each framed as length (u32) | CRC-32C (u32) | payload:
//
//	'P' pack added:   name, size, created, data bytes, block count, live entries
//	'D' block deleted: key
//	'R' pack removed: name
//
// Open replays it (a torn or damaged tail is cut off) and rewrites it as a
// snapshot of the live state, so it stays proportional to what S3 holds.

const (
	recPack   = 'P'
	recDelete = 'D'
	recRemove = 'R'
	maxRecord = 64 << 20
)

// packRecord is a decoded 'P' record.
type packRecord struct {
	name      string
	size      int64
	created   int64
	dataBytes int64
	count     int
	entries   []packEntry
}

func appendString16(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func encodePackRecord(r packRecord) []byte {
	b := []byte{recPack}
	b = appendString16(b, r.name)
	b = binary.LittleEndian.AppendUint64(b, uint64(r.size))
	b = binary.LittleEndian.AppendUint64(b, uint64(r.created))
	b = binary.LittleEndian.AppendUint64(b, uint64(r.dataBytes))
	b = binary.LittleEndian.AppendUint32(b, uint32(r.count))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(r.entries)))
	for _, e := range r.entries {
		b = appendEntry(b, e)
	}
	return b
}

func appendKey(b []byte, k block.Key) []byte {
	b = append(b, byte(len(k.Namespace)))
	b = append(b, k.Namespace...)
	b = binary.LittleEndian.AppendUint64(b, k.Hash)
	b = binary.LittleEndian.AppendUint16(b, k.Part)
	if k.HasPart {
		return append(b, 1)
	}
	return append(b, 0)
}

func encodeDeleteRecord(k block.Key) []byte { return appendKey([]byte{recDelete}, k) }

func encodeRemoveRecord(name string) []byte { return appendString16([]byte{recRemove}, name) }

var errRecord = errors.New("s3: malformed index journal record")

// reader walks a record payload.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil || n < 0 || len(r.b) < n {
		r.err = errRecord
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}
func (r *reader) u8() byte {
	if v := r.take(1); v != nil {
		return v[0]
	}
	return 0
}
func (r *reader) u16() uint16 {
	if v := r.take(2); v != nil {
		return binary.LittleEndian.Uint16(v)
	}
	return 0
}
func (r *reader) u32() uint32 {
	if v := r.take(4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}
func (r *reader) u64() uint64 {
	if v := r.take(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}
func (r *reader) str16() string { return string(r.take(int(r.u16()))) }

func (r *reader) key() block.Key {
	var k block.Key
	k.Namespace = string(r.take(int(r.u8())))
	k.Hash = r.u64()
	k.Part = r.u16()
	switch r.u8() {
	case 0:
		if k.Part != 0 {
			r.err = errRecord
		}
	case 1:
		k.HasPart = true
	default:
		r.err = errRecord
	}
	if r.err == nil && block.ValidNamespaceName(k.Namespace) != nil {
		r.err = errRecord
	}
	return k
}

// record is one decoded journal record.
type record struct {
	kind byte
	pack packRecord // recPack
	key  block.Key  // recDelete
	name string     // recRemove
}

// decodeRecord parses one record payload.
func decodeRecord(b []byte) (record, error) {
	r := &reader{b: b}
	var rec record
	rec.kind = r.u8()
	switch rec.kind {
	case recPack:
		p := &rec.pack
		p.name = r.str16()
		p.size = int64(r.u64())
		p.created = int64(r.u64())
		p.dataBytes = int64(r.u64())
		p.count = int(r.u32())
		n := int(r.u32())
		if r.err == nil && (n > p.count || p.count > maxPackCount || p.size < trailerSize || p.dataBytes < 0 || p.dataBytes > p.size || p.name == "") {
			r.err = errRecord
		}
		for i := 0; i < n && r.err == nil; i++ {
			var e packEntry
			e.Key = r.key()
			e.Off = int64(r.u64())
			e.Len = int64(r.u32())
			e.Sum = r.u32()
			e.Expires = int64(r.u64())
			if r.err == nil && (e.Off < 0 || e.Len < 1 || e.Off > p.size-e.Len) {
				r.err = errRecord
			}
			p.entries = append(p.entries, e)
		}
	case recDelete:
		rec.key = r.key()
	case recRemove:
		rec.name = r.str16()
		if rec.name == "" {
			r.err = errRecord
		}
	default:
		r.err = errRecord
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = errRecord
	}
	if r.err != nil {
		return record{}, fmt.Errorf("%w (kind %q, %d bytes)", r.err, rec.kind, len(b))
	}
	return rec, nil
}

// frame prefixes payload with its length and CRC-32C.
func frame(payload []byte) []byte {
	b := make([]byte, 8, 8+len(payload))
	binary.LittleEndian.PutUint32(b[0:4], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[4:8], block.Checksum(payload))
	return append(b, payload...)
}

// readJournal replays every intact record of r through fn. It stops at the
// first torn or damaged frame and reports how many bytes were intact.
func readJournal(r io.Reader, fn func(record)) (good int64, err error) {
	br := bufio.NewReaderSize(r, 1<<20)
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return good, nil
			}
			return good, fmt.Errorf("%w: torn frame header", errRecord)
		}
		n := binary.LittleEndian.Uint32(hdr[0:4])
		if n == 0 || n > maxRecord {
			return good, fmt.Errorf("%w: frame length %d", errRecord, n)
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(br, payload); err != nil {
			return good, fmt.Errorf("%w: torn frame", errRecord)
		}
		if block.Checksum(payload) != binary.LittleEndian.Uint32(hdr[4:8]) {
			return good, fmt.Errorf("%w: frame crc32c mismatch", errRecord)
		}
		rec, err := decodeRecord(payload)
		if err != nil {
			return good, err
		}
		fn(rec)
		good += int64(8 + n)
	}
}

// journal appends framed records to the index file.
type journal struct {
	f *os.File
}

func (j *journal) append(payload []byte, sync bool) error {
	if _, err := j.f.Write(frame(payload)); err != nil {
		return fmt.Errorf("s3: index journal: %w", err)
	}
	if sync {
		if err := j.f.Sync(); err != nil {
			return fmt.Errorf("s3: index journal sync: %w", err)
		}
	}
	return nil
}
