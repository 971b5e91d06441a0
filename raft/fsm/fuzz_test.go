package fsm

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// FuzzDecodeCommand: any input either decodes to a command that re-encodes
// to an input that decodes the same way, or is rejected with an error; it
// never panics, and applying it never panics.
func FuzzDecodeCommand(f *testing.F) {
	f.Add(EncodeIndex([]Op{PutOp(key(1), testEntry(1)), DeleteOp(key(2), 3), PinOp(key(3), time.Unix(5, 0)), PlaceOp(key(4).WithPart(2), 9, []Shard{{"n", 1}})}))
	f.Add(EncodeMember(MemberCommand{MemberUpsert, Member{ID: "n1", RaftAddr: "a", State: MemberAlive}}))
	f.Add(EncodeMember(MemberCommand{MemberSetState, Member{ID: "n1", State: MemberDead}}))
	f.Add(EncodeNamespace(NamespaceCommand{NamespaceCreate, block.DefaultNamespaceConfig()}))
	f.Add(EncodeNamespace(NamespaceCommand{NamespaceDelete, block.Namespace{Name: "x"}}))
	f.Add(EncodeCredential(CredentialCommand{CredentialPut, Credential{AccessKeyID: "a", Kind: SecretHashed, Secret: make([]byte, 52), Scopes: []Scope{{"*", 7}}}}))
	f.Add(EncodeIncarnation(IncarnationCommand{ID: "n1", Incarnation: 1 << 40, Restoring: true}))
	f.Add([]byte{0x50 | FlagIgnoreUnknown, 1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCommand(b)
		fsm := New(nil)
		_ = fsm.Apply(&hraft.Log{Index: 1, Type: hraft.LogCommand, Data: b})
		if err != nil {
			return
		}
		var again []byte
		switch c.Type {
		case CmdIndex:
			for _, o := range c.Ops {
				if o.Kind == 0 {
					return // skipped unknown op: not re-encodable
				}
			}
			again = EncodeIndex(c.Ops)
		case CmdMember:
			again = EncodeMember(c.Member)
		case CmdNamespace:
			again = EncodeNamespace(c.Namespace)
		case CmdCredential:
			again = EncodeCredential(c.Credential)
		case CmdIncarnation:
			again = EncodeIncarnation(c.Incarnation)
		}
		c2, err := DecodeCommand(again)
		if err != nil {
			t.Fatalf("re-encoded command does not decode: %v", err)
		}
		if !bytes.Equal(EncodeAny(c2), again) {
			t.Fatal("encode(decode(encode(x))) differs")
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

// FuzzReadSnapshot: a damaged snapshot is rejected, never panics.
func FuzzReadSnapshot(f *testing.F) {
	var buf bytes.Buffer
	st := New(nil)
	apply(f, st, 1, EncodeIndex([]Op{PutOp(key(1), testEntry(1))}))
	apply(f, st, 2, EncodeMember(MemberCommand{MemberUpsert, Member{ID: "n1", RaftAddr: "a", State: MemberAlive}}))
	apply(f, st, 3, EncodeIncarnation(IncarnationCommand{ID: "n1", Incarnation: 9, Restoring: true}))
	if err := writeSnapshot(&buf, st.cur.Load()); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := readSnapshot(bytes.NewReader(b))
		if err != nil {
			return
		}
		// What was accepted writes out and reads back as the same state.
		var again bytes.Buffer
		if err := writeSnapshot(&again, st); err != nil {
			t.Fatalf("accepted snapshot does not write: %v", err)
		}
		st2, err := readSnapshot(bytes.NewReader(again.Bytes()))
		if err != nil {
			t.Fatalf("rewritten snapshot does not read: %v", err)
		}
		if st2.applied != st.applied || !reflect.DeepEqual(st2.members, st.members) || !reflect.DeepEqual(st2.namespaces, st.namespaces) ||
			!reflect.DeepEqual(st2.creds, st.creds) || st2.index.Len() != st.index.Len() {
			t.Fatal("a snapshot's state changed through write and read")
		}
	})
}
