package fsm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"maps"
	"slices"

	hraft "github.com/hashicorp/raft"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Snapshot record types. A snapshot is a stream of records, each a type
// byte, a uvarint body length and the body. The first is a header, the last
// an end record carrying the record count and a CRC-32C of every byte before
// it, so truncation and corruption are detected. A record type with
// FlagIgnoreUnknown set may be skipped by a reader that does not know it.
const (
	RecHeader     = 1
	RecNamespace  = 2
	RecMember     = 3
	RecCredential = 4
	RecEntry      = 5
	// RecIncarnation (flagged ignore-unknown, so older readers skip it)
	// carries a member's incarnation and restoring flag; it follows the
	// member records and is not counted in the header.
	RecIncarnation = 6 | FlagIgnoreUnknown
	RecEnd         = 0x7f
)

// SnapshotVersion is the snapshot format version written in the header.
const SnapshotVersion = 1

// maxRecord bounds one snapshot record's body.
const maxRecord = 16 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// snapshot is a point-in-time state: an immutable value, so Persist can run
// while applies go on.
type snapshot struct{ s *state }

// Snapshot captures the current state in O(1).
func (f *FSM) Snapshot() (hraft.FSMSnapshot, error) { return snapshot{f.cur.Load()}, nil }

// Persist streams the state's records to sink.
func (s snapshot) Persist(sink hraft.SnapshotSink) error {
	if err := writeSnapshot(sink, s.s); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release is a no-op: the state is garbage collected when unreferenced.
func (snapshot) Release() {}

type recWriter struct {
	w     *bufio.Writer
	crc   hash.Hash32
	count uint64
	enc   encoder
	hdr   []byte
}

func (r *recWriter) record(typ byte, body []byte) error {
	r.hdr = append(r.hdr[:0], typ)
	r.hdr = binary.AppendUvarint(r.hdr, uint64(len(body)))
	r.count++
	if _, err := r.w.Write(r.hdr); err != nil {
		return err
	}
	_, err := r.w.Write(body)
	return err
}

// body resets the scratch encoder.
func (r *recWriter) body() *encoder { r.enc.b = r.enc.b[:0]; return &r.enc }

// writeSnapshot writes st (an FSM's state) as a record stream to w.
func writeSnapshot(w io.Writer, st *state) error {
	crc := crc32.New(castagnoli)
	rw := &recWriter{w: bufio.NewWriterSize(io.MultiWriter(w, crc), 256<<10), crc: crc}
	e := rw.body()
	e.u8(SnapshotVersion)
	e.uvarint(st.applied)
	e.uvarint(uint64(len(st.namespaces)))
	e.uvarint(uint64(len(st.members)))
	e.uvarint(uint64(len(st.creds)))
	e.uvarint(uint64(st.indexLen()))
	if err := rw.record(RecHeader, e.b); err != nil {
		return err
	}
	for _, n := range st.namespaces {
		e := rw.body()
		e.namespace(n)
		if err := rw.record(RecNamespace, e.b); err != nil {
			return err
		}
	}
	for _, m := range st.members {
		e := rw.body()
		e.member(m)
		if err := rw.record(RecMember, e.b); err != nil {
			return err
		}
	}
	for _, m := range st.members {
		if m.Incarnation == 0 && !m.Restoring {
			continue
		}
		e := rw.body()
		e.str(m.ID)
		e.uvarint(m.Incarnation)
		e.bool(m.Restoring)
		if err := rw.record(RecIncarnation, e.b); err != nil {
			return err
		}
	}
	for _, c := range st.creds {
		e := rw.body()
		e.credential(c)
		if err := rw.record(RecCredential, e.b); err != nil {
			return err
		}
	}
	// Entries in (namespace, hash, part) order, as before the index had
	// a tree per namespace.
	var werr error
	for _, ns := range slices.Sorted(maps.Keys(st.index)) {
		st.index[ns].ascend(ikey{}, func(sl *slot) bool {
			e := rw.body()
			e.key(sl.key().blockKey(ns))
			e.entry(sl.entry(st))
			werr = rw.record(RecEntry, e.b)
			return werr == nil
		})
		if werr != nil {
			return werr
		}
	}
	// The end record's CRC covers everything written so far.
	if err := rw.w.Flush(); err != nil {
		return err
	}
	e = rw.body()
	e.uvarint(rw.count)
	e.u32(crc.Sum32())
	if err := rw.record(RecEnd, e.b); err != nil {
		return err
	}
	return rw.w.Flush()
}

func (e *encoder) entry(v Entry) {
	e.varint(v.Size)
	e.u32(v.Sum)
	e.shards(v.Placement)
	e.u8(uint8(v.TierHints))
	e.time(v.PinUntil)
	e.uvarint(v.Generation)
	e.time(v.Created)
}

func (d *decoder) entry() Entry {
	return Entry{Size: d.varint(), Sum: d.u32(), Placement: d.shards(), TierHints: TierHints(d.u8()), PinUntil: d.time(), Generation: d.uvarint(), Created: d.time()}
}

// Restore replaces the state with the snapshot read from rc.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st, err := readSnapshot(rc)
	if err != nil {
		return err
	}
	f.wmu.Lock()
	f.publish(st)
	f.forgetPuts()
	f.wmu.Unlock()
	return nil
}

// crcReader feeds every byte read into a CRC.
type crcReader struct {
	r   *bufio.Reader
	crc hash.Hash32
}

func (c *crcReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.crc.Write([]byte{b})
	}
	return b, err
}

// readSnapshot parses a record stream into a state, checking the header's
// counts, the end record's count and CRC, and every record's encoding.
func readSnapshot(r io.Reader) (*state, error) {
	cr := &crcReader{r: bufio.NewReaderSize(r, 256<<10), crc: crc32.New(castagnoli)}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("snapshot: %w: %s", ErrMalformed, fmt.Sprintf(format, a...))
	}
	st := &state{index: map[string]*tree{}, nodeIDs: map[string]uint32{}, members: map[string]Member{}, namespaces: map[string]block.Namespace{}, creds: map[string]Credential{}}
	txn := st.indexTxn()
	var (
		count        uint64
		want         [4]uint64 // namespaces, members, creds, entries
		got          [4]uint64
		sawHeader    bool
		buf          []byte
		crcBeforeRec uint32
	)
	for {
		crcBeforeRec = cr.crc.Sum32()
		typ, err := cr.ReadByte()
		if errors.Is(err, io.EOF) {
			return nil, bad("truncated: no end record")
		}
		if err != nil {
			return nil, err
		}
		n, err := binary.ReadUvarint(cr)
		if err != nil {
			return nil, bad("record %d length: %v", count, err)
		}
		if n > maxRecord {
			return nil, bad("record %d length %d over %d", count, n, maxRecord)
		}
		if cap(buf) < int(n) {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(cr.r, buf); err != nil {
			return nil, bad("record %d body: %v", count, err)
		}
		cr.crc.Write(buf)
		count++
		d := decoder{b: buf}
		if !sawHeader && typ != RecHeader {
			return nil, bad("first record is type %d, not a header", typ)
		}
		switch typ {
		case RecHeader:
			if sawHeader {
				return nil, bad("second header")
			}
			sawHeader = true
			if v := d.u8(); d.err == nil && v != SnapshotVersion {
				return nil, fmt.Errorf("snapshot: %w: format version %d", ErrUnknownCommand, v)
			}
			st.applied = d.uvarint()
			for i := range want {
				want[i] = d.uvarint()
			}
		case RecNamespace:
			ns := d.namespace()
			if d.err == nil {
				if err := ns.Validate(); err != nil {
					return nil, fmt.Errorf("snapshot: %w", err)
				}
			}
			st.namespaces[ns.Name] = ns
			got[0]++
		case RecMember:
			m := d.member()
			st.members[m.ID] = m
			got[1]++
		case RecIncarnation:
			id, inc, restoring := d.str(), d.uvarint(), d.bool()
			m, ok := st.members[id]
			if d.err == nil && !ok {
				return nil, bad("incarnation record for unknown member %q", id)
			}
			m.Incarnation, m.Restoring = inc, restoring
			st.members[id] = m
		case RecCredential:
			c := d.credential()
			st.creds[c.AccessKeyID] = c
			got[2]++
		case RecEntry:
			k := d.key()
			e := d.entry()
			if d.err == nil {
				txn.tree(k.Namespace).set(txn.gen, st.toSlot(keyOf(k), e))
			}
			got[3]++
		case RecEnd:
			n := d.uvarint()
			sum := d.u32()
			if err := d.done(); err != nil {
				return nil, fmt.Errorf("snapshot end record: %w", err)
			}
			if n != count-1 {
				return nil, bad("end record counts %d records, read %d", n, count-1)
			}
			if sum != crcBeforeRec {
				return nil, bad("crc %08x, computed %08x", sum, crcBeforeRec)
			}
			if got != want {
				return nil, bad("header promised %v records (ns, members, creds, entries), read %v", want, got)
			}
			// Nothing follows the end record: bytes after it mean the
			// snapshot is not the one that was written.
			if _, err := cr.r.ReadByte(); !errors.Is(err, io.EOF) {
				if err != nil {
					return nil, err
				}
				return nil, bad("data after the end record")
			}
			txn.commit()
			return st, nil
		default:
			if typ&FlagIgnoreUnknown == 0 {
				return nil, fmt.Errorf("snapshot: %w: record type %d", ErrUnknownCommand, typ)
			}
			continue
		}
		if err := d.done(); err != nil {
			return nil, fmt.Errorf("snapshot record %d (type %d): %w", count-1, typ, err)
		}
	}
}
