package fsm

import (
	"bytes"
	"errors"
	"hash/crc32"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

type bufSink struct {
	bytes.Buffer
	cancelled bool
}

func (b *bufSink) ID() string    { return "test" }
func (b *bufSink) Cancel() error { b.cancelled = true; return nil }
func (b *bufSink) Close() error  { return nil }

func populated(t *testing.T) *FSM {
	t.Helper()
	f := New(nil)
	apply(t, f, 1, EncodeNamespace(NamespaceCommand{NamespaceCreate, block.Namespace{Name: "t1", Model: "llama", ParityShards: 2, TTLSeconds: 60}}))
	apply(t, f, 2, EncodeMember(MemberCommand{MemberUpsert, Member{ID: "n1", RaftAddr: "r", DataAddr: "d", HTTPAddr: "h", Zone: "z", Capacity: 5, State: MemberAlive}}))
	apply(t, f, 2, EncodeIncarnation(IncarnationCommand{ID: "n1", Incarnation: 77, Restoring: true}))
	apply(t, f, 3, EncodeCredential(CredentialCommand{CredentialPut, Credential{AccessKeyID: "AK", Kind: SecretSealed, Secret: bytes.Repeat([]byte{1}, 40), Scopes: []Scope{{"t1", PermRead}}}}))
	var ops []Op
	for i := uint64(0); i < 500; i++ {
		e := testEntry(uint32(i))
		if i%7 == 0 {
			e.PinUntil = time.Unix(1900000000, int64(i)).UTC()
		}
		k := block.NewKey("t1", i*0x9e3779b97f4a7c15)
		if i%5 == 0 {
			k = k.WithPart(uint16(i))
		}
		ops = append(ops, PutOp(k, e))
	}
	apply(t, f, 4, EncodeIndex(ops))
	return f
}

func snapshotBytes(t *testing.T, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink bufSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	return sink.Bytes()
}

func TestSnapshotRoundTrip(t *testing.T) {
	f := populated(t)
	b := snapshotBytes(t, f)
	g := New(nil)
	if err := g.Restore(io.NopCloser(bytes.NewReader(b))); err != nil {
		t.Fatal(err)
	}
	if g.Len() != 500 || g.AppliedIndex() != 4 {
		t.Fatalf("restored len %d applied %d", g.Len(), g.AppliedIndex())
	}
	if !reflect.DeepEqual(dump(t, f), dump(t, g)) {
		t.Fatal("index differs after restore")
	}
	if !reflect.DeepEqual(f.Members(), g.Members()) || !reflect.DeepEqual(f.Namespaces(), g.Namespaces()) {
		t.Fatal("members or namespaces differ")
	}
	cf, _ := f.Credential("AK")
	cg, _ := g.Credential("AK")
	if !reflect.DeepEqual(cf, cg) {
		t.Fatalf("credential %+v vs %+v", cf, cg)
	}
	// Snapshotting the restored state gives the same bytes modulo map order:
	// compare by restoring again and dumping.
	h := New(nil)
	if err := h.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, g)))); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(dump(t, g), dump(t, h)) {
		t.Fatal("second round trip differs")
	}
}

// A snapshot is a point in time: applies after Snapshot() do not leak in.
func TestSnapshotIsolation(t *testing.T) {
	f := populated(t)
	snap, _ := f.Snapshot()
	apply(t, f, 5, EncodeIndex([]Op{PutOp(key(1), testEntry(1))}))
	var sink bufSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	g := New(nil)
	if err := g.Restore(io.NopCloser(&sink)); err != nil {
		t.Fatal(err)
	}
	if _, ok := g.Lookup(key(1)); ok || g.Len() != 500 {
		t.Fatalf("later apply leaked into snapshot: len %d", g.Len())
	}
}

func TestSnapshotRejectsDamage(t *testing.T) {
	b := snapshotBytes(t, populated(t))
	cases := map[string][]byte{
		"empty":     nil,
		"truncated": b[:len(b)/2],
		"no end":    b[:len(b)-8],
		"flipped":   func() []byte { c := bytes.Clone(b); c[len(c)/2] ^= 0x40; return c }(),
		"trailing":  append(bytes.Clone(b[:len(b)-1]), b[len(b)-1]^1),
	}
	for name, in := range cases {
		g := New(nil)
		before := g.Namespaces()
		if err := g.Restore(io.NopCloser(bytes.NewReader(in))); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if !reflect.DeepEqual(before, g.Namespaces()) {
			t.Errorf("%s: failed restore changed state", name)
		}
	}
	// An unknown record type without the ignore flag is refused; with it, skipped.
	if _, err := readSnapshot(bytes.NewReader([]byte{0x33, 0})); err == nil {
		t.Error("stream starting with an unknown record accepted")
	}
}

func TestSnapshotSkipsFlaggedUnknownRecord(t *testing.T) {
	b := snapshotBytes(t, New(nil))
	// Rebuild the stream with an extra flagged record after the header, then
	// recompute the end record.
	d := decoder{b: b}
	d.u8()
	hdrLen := int(d.uvarint())
	hdrEnd := d.off + hdrLen
	extra := []byte{0x40 | FlagIgnoreUnknown, 2, 0xaa, 0xbb}
	body := append(append(bytes.Clone(b[:hdrEnd]), extra...), b[hdrEnd:lastRecordStart(t, b)]...)
	withEnd := appendEnd(body, countRecords(t, body))
	g := New(nil)
	if err := g.Restore(io.NopCloser(bytes.NewReader(withEnd))); err != nil {
		t.Fatalf("flagged unknown record: %v", err)
	}
	unflagged := append(append(bytes.Clone(b[:hdrEnd]), 0x40, 0), b[hdrEnd:lastRecordStart(t, b)]...)
	if err := New(nil).Restore(io.NopCloser(bytes.NewReader(appendEnd(unflagged, countRecords(t, unflagged))))); !errors.Is(err, ErrUnknownCommand) {
		t.Fatalf("unflagged unknown record: %v", err)
	}
}

func countRecords(t *testing.T, b []byte) uint64 {
	d := decoder{b: b}
	var n uint64
	for d.remaining() > 0 {
		d.u8()
		d.rawBytes()
		if d.err != nil {
			t.Fatal(d.err)
		}
		n++
	}
	return n
}

func lastRecordStart(t *testing.T, b []byte) int {
	d := decoder{b: b}
	last := 0
	for d.remaining() > 0 {
		last = d.off
		d.u8()
		d.rawBytes()
		if d.err != nil {
			t.Fatal(d.err)
		}
	}
	return last
}

func appendEnd(body []byte, n uint64) []byte {
	e := encoder{}
	e.uvarint(n)
	e.u32(crc32c(body))
	out := append(bytes.Clone(body), RecEnd)
	out = append(out, byte(len(e.b)))
	return append(out, e.b...)
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
