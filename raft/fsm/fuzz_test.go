package fsm

import (
	"bytes"
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// FuzzDecodeCommand: any input is rejected with an error, or decodes to a
// command whose encoding is exactly the input (every field has one
// encoding, so a log entry cannot be read two ways); applying it never
// panics. The one exception is an index command holding an unknown op that
// its sender flagged ignore-unknown: it decodes (the op skipped) but cannot
// be re-encoded, so only the known ops are checked, against a decode of
// their own encoding.
func FuzzDecodeCommand(f *testing.F) {
	f.Add(EncodeIndex([]Op{PutOp(key(1), testEntry(1)), DeleteOp(key(2), 3), PinOp(key(3), time.Unix(5, 0)), PlaceOp(key(4).WithPart(2), 9, []Shard{{"n", 1}})}))
	// A placement change carrying the time its shard writes began, and one
	// with that time as an explicit zero (a second encoding: refused).
	f.Add(EncodeIndex([]Op{WrittenPlaceOp(key(5), 9, []Shard{{"n", 0}, {"m", 1}}, time.Unix(1800000000, 1))}))
	f.Add(zeroWritten(EncodeIndex([]Op{PlaceOp(key(6), 9, []Shard{{"n", 0}})})))
	// Placement changes conditional on the placement their writer read.
	f.Add(EncodeIndex([]Op{MovePlaceOp(key(7), 9, []Shard{{"m", 0}}, []Shard{{"n", 0}}, time.Unix(1800000000, 1))}))
	f.Add(EncodeIndex([]Op{MovePlaceOp(key(8), 9, []Shard{{"m", 0}, {"o", 1}}, []Shard{{"n", 0}}, time.Time{})}))
	f.Add(EncodeMember(MemberCommand{MemberUpsert, Member{ID: "n1", RaftAddr: "a", State: MemberAlive}}))
	f.Add(EncodeMember(MemberCommand{MemberSetState, Member{ID: "n1", State: MemberDead}}))
	f.Add(EncodeMember(MemberCommand{MemberRemove, Member{ID: "n1"}}))
	f.Add(EncodeNamespace(NamespaceCommand{NamespaceCreate, block.DefaultNamespaceConfig()}))
	f.Add(EncodeNamespace(NamespaceCommand{NamespaceDelete, block.Namespace{Name: "x"}}))
	f.Add(EncodeNamespace(NamespaceCommand{NamespaceUpdate, block.Namespace{Name: "q", VLLMHashSeed: "7", S3Disabled: true, S3TTLSeconds: 9,
		Quota: block.Quota{DRAM: 1 << 20, NVMe: 1 << 30, S3: 1 << 40}}}))
	f.Add(EncodeNamespace(NamespaceCommand{NamespaceCreate, block.Namespace{Name: "o", Kind: block.KindObject, Quota: block.Quota{NVMe: 5}}}))
	f.Add(EncodeCredential(CredentialCommand{CredentialPut, Credential{AccessKeyID: "a", Kind: SecretHashed, Secret: make([]byte, 52), Scopes: []Scope{{"*", 7}}}}))
	f.Add(EncodeIncarnation(IncarnationCommand{ID: "n1", Incarnation: 1 << 40, Restoring: true}))
	f.Add(EncodeCredential(CredentialCommand{CredentialDelete, Credential{AccessKeyID: "a"}}))
	f.Add([]byte{0x50 | FlagIgnoreUnknown, 1})
	f.Add(append(EncodeIndex([]Op{PutOp(key(1), testEntry(1))})[:2:2], 2, 0x60|FlagIgnoreUnknown, 1, 0xaa, byte(OpDelete), 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
	f.Add([]byte{byte(CmdIndex), CommandVersion, 0x80, 0x00}) // a count in two bytes
	f.Add([]byte{})
	// A native batch of 64 blocks as the cluster backend commits it: one
	// CmdIndex of 64 puts (one copy each, spread over three nodes).
	f.Add(sizeBatches(64, 64)[0])
	f.Add(replicaBatches(64, 64, 3)[0])
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCommand(b)
		// Placements from shared chunks decode to exactly what one
		// allocation per placement gives.
		if each, err2 := decodeCommand(b, false); (err == nil) != (err2 == nil) || err == nil && !reflect.DeepEqual(c, each) {
			t.Fatalf("decoded with shared placement chunks: %+v, %v; one allocation each: %+v, %v", c, err, each, err2)
		}
		fsm := New(nil)
		_ = fsm.Apply(&hraft.Log{Index: 1, Type: hraft.LogCommand, Data: b})
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownCommand) {
				t.Fatalf("error %v is neither ErrMalformed nor ErrUnknownCommand", err)
			}
			return
		}
		if c.Type == CmdIndex {
			var known []Op
			for _, o := range c.Ops {
				if o.Kind != 0 {
					known = append(known, o)
				}
			}
			if len(known) != len(c.Ops) {
				enc := EncodeIndex(known)
				again, err := DecodeCommand(enc)
				if err != nil || !reflect.DeepEqual(again.Ops, known) && !(len(known) == 0 && len(again.Ops) == 0) {
					t.Fatalf("known ops of an ignore-unknown command do not round-trip: %v", err)
				}
				return
			}
		}
		again := EncodeAny(c)
		if c.IgnoreUnknown {
			again[0] |= FlagIgnoreUnknown
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("decode then encode changed the command:\n in  %x\n out %x", b, again)
		}
	})
}

// EncodeAny re-encodes a decoded command (test helper).
func EncodeAny(c Command) []byte {
	switch c.Type {
	case CmdIndex:
		return EncodeIndex(c.Ops)
	case CmdMember:
		return EncodeMember(c.Member)
	case CmdNamespace:
		return EncodeNamespace(c.Namespace)
	case CmdIncarnation:
		return EncodeIncarnation(c.Incarnation)
	default:
		return EncodeCredential(c.Credential)
	}
}

// FuzzReadSnapshot: any input is rejected, or it is a snapshot: the state
// it holds writes out to a snapshot that reads back to the same state.
// (Whether damage to a real snapshot is caught is FuzzSnapshotDamage.)
func FuzzReadSnapshot(f *testing.F) {
	good := fuzzSnapshot(f)
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add(append(bytes.Clone(good), 0))
	f.Add([]byte{RecHeader, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := readSnapshot(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownCommand) && !errors.Is(err, block.ErrInvalidArgument) {
				t.Fatalf("error %v is not a format error", err)
			}
			return
		}
		var out bytes.Buffer
		if err := writeSnapshot(&out, st); err != nil {
			t.Fatal(err)
		}
		st2, err := readSnapshot(&out)
		if err != nil {
			t.Fatalf("an accepted snapshot's state does not write a readable snapshot: %v", err)
		}
		if !sameState(st, st2) {
			t.Fatal("an accepted snapshot's state changes through write and read")
		}
	})
}

// FuzzSnapshotDamage flips, truncates or extends a real snapshot (five
// record types, two index entries): every change must be rejected, since the
// end record's CRC-32C covers every byte before it, its own fields are
// checked, and nothing may follow it.
func FuzzSnapshotDamage(f *testing.F) {
	good := fuzzSnapshot(f)
	f.Add(uint32(0), byte(1), uint32(0), []byte(nil))
	f.Add(uint32(len(good)-1), byte(0x80), uint32(0), []byte(nil))
	f.Add(uint32(len(good)-5), byte(0xff), uint32(0), []byte(nil))
	f.Add(uint32(len(good)/2), byte(0x01), uint32(0), []byte(nil))
	f.Add(uint32(0), byte(0), uint32(1), []byte(nil))
	f.Add(uint32(0), byte(0), uint32(0), []byte{RecEnd, 0})
	f.Fuzz(func(t *testing.T, pos uint32, xor byte, cut uint32, tail []byte) {
		b := bytes.Clone(good)
		b[int(pos)%len(b)] ^= xor
		b = b[:len(b)-int(cut)%len(b)]
		b = append(b, tail...)
		if bytes.Equal(b, good) {
			return // no damage
		}
		if _, err := readSnapshot(bytes.NewReader(b)); err == nil {
			t.Fatalf("damaged snapshot accepted (byte %d ^%#x, %d cut, %d appended)", int(pos)%len(good), xor, int(cut)%len(good), len(tail))
		}
	})
}

// fuzzSnapshot writes a snapshot holding a namespace, a member, a
// credential and two index entries.
func fuzzSnapshot(f *testing.F) []byte {
	st := New(nil)
	apply(f, st, 1, EncodeNamespace(NamespaceCommand{NamespaceCreate, block.Namespace{Name: "t1", Model: "m", ParityShards: 1, VLLMHashSeed: "3", Quota: block.Quota{DRAM: 1 << 20}}}))
	apply(f, st, 2, EncodeMember(MemberCommand{MemberUpsert, Member{ID: "n1", RaftAddr: "r", DataAddr: "d", HTTPAddr: "h", Zone: "z", Capacity: 5, State: MemberAlive}}))
	apply(f, st, 3, EncodeCredential(CredentialCommand{CredentialPut, Credential{AccessKeyID: "AK", Kind: SecretSealed, Secret: bytes.Repeat([]byte{1}, 40), Scopes: []Scope{{"t1", PermRead}}}}))
	apply(f, st, 4, EncodeIndex([]Op{PutOp(key(1), testEntry(1)), PutOp(key(2).WithPart(1), testEntry(2))}))
	apply(f, st, 5, EncodeIncarnation(IncarnationCommand{ID: "n1", Incarnation: 9, Restoring: true}))
	var buf bytes.Buffer
	if err := writeSnapshot(&buf, st.cur.Load()); err != nil {
		f.Fatal(err)
	}
	if _, err := readSnapshot(bytes.NewReader(buf.Bytes())); err != nil {
		f.Fatalf("the undamaged snapshot is rejected: %v", err)
	}
	return buf.Bytes()
}

// sameState compares two states field by field, the index entry by entry.
func sameState(a, b *state) bool {
	if a.applied != b.applied || !reflect.DeepEqual(a.members, b.members) ||
		!reflect.DeepEqual(a.namespaces, b.namespaces) || !reflect.DeepEqual(a.creds, b.creds) || a.indexLen() != b.indexLen() {
		return false
	}
	return reflect.DeepEqual(indexEntries(a), indexEntries(b))
}

// indexEntries lists a state's index in key order.
func indexEntries(s *state) []struct {
	Key   block.Key
	Entry Entry
} {
	var out []struct {
		Key   block.Key
		Entry Entry
	}
	for _, ns := range slices.Sorted(maps.Keys(s.index)) {
		s.index[ns].ascend(ikey{}, func(sl *slot) bool {
			out = append(out, struct {
				Key   block.Key
				Entry Entry
			}{sl.key().blockKey(ns), sl.entry(s)})
			return true
		})
	}
	return out
}
