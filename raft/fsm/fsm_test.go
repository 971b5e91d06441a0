package fsm

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

func apply(t testing.TB, f *FSM, idx uint64, data []byte) *Response {
	t.Helper()
	r, ok := f.Apply(&hraft.Log{Index: idx, Type: hraft.LogCommand, Data: data}).(*Response)
	if !ok {
		t.Fatalf("Apply returned %T", r)
	}
	return r
}

func testEntry(sum uint32) Entry {
	return Entry{Size: 100, Sum: sum, Placement: []Shard{{NodeID: "n1", Index: 0}, {NodeID: "n2", Index: 1}}, TierHints: HintDRAM,
		Created: time.Unix(1700000000, 0).UTC()}
}

func key(h uint64) block.Key { return block.NewKey(block.DefaultNamespace, h) }

func TestApplyIndexOps(t *testing.T) {
	pin := time.Unix(1800000000, 0).UTC()
	tests := []struct {
		name string
		ops  []Op
		want []Status
	}{
		{"put new", []Op{PutOp(key(1), testEntry(7))}, []Status{StatusCreated}},
		{"put same sum existed", []Op{PutOp(key(1), testEntry(7)), PutOp(key(1), testEntry(7))}, []Status{StatusCreated, StatusExisted}},
		{"put other sum conflict", []Op{PutOp(key(1), testEntry(7)), PutOp(key(1), testEntry(8))}, []Status{StatusCreated, StatusConflict}},
		{"put unknown namespace", []Op{PutOp(block.NewKey("nope", 1), testEntry(7))}, []Status{StatusUnknownNamespace}},
		{"put invalid size", []Op{PutOp(key(1), Entry{Size: 0, Sum: 1, Placement: []Shard{{NodeID: "n1"}}})}, []Status{StatusInvalid}},
		{"put no placement", []Op{PutOp(key(1), Entry{Size: 1, Sum: 1})}, []Status{StatusInvalid}},
		{"delete absent", []Op{DeleteOp(key(1), 0)}, []Status{StatusNotFound}},
		{"delete present", []Op{PutOp(key(1), testEntry(7)), DeleteOp(key(1), 0), DeleteOp(key(1), 0)}, []Status{StatusCreated, StatusDeleted, StatusNotFound}},
		{"delete wrong generation", []Op{PutOp(key(1), testEntry(7)), DeleteOp(key(1), 99)}, []Status{StatusCreated, StatusConflict}},
		{"pin", []Op{PutOp(key(1), testEntry(7)), PinOp(key(1), pin)}, []Status{StatusCreated, StatusPinned}},
		{"pin absent", []Op{PinOp(key(1), pin)}, []Status{StatusNotFound}},
		{"place", []Op{PutOp(key(1), testEntry(7)), PlaceOp(key(1), 7, []Shard{{NodeID: "n3"}})}, []Status{StatusCreated, StatusUpdated}},
		{"place wrong sum", []Op{PutOp(key(1), testEntry(7)), PlaceOp(key(1), 8, []Shard{{NodeID: "n3"}})}, []Status{StatusCreated, StatusConflict}},
		{"place from the placement read", []Op{PutOp(key(1), testEntry(7)), MovePlaceOp(key(1), 7, testEntry(7).Placement, []Shard{{"n3", 0}, {"n2", 1}}, time.Time{})},
			[]Status{StatusCreated, StatusUpdated}},
		{"place planned from a placement changed since", []Op{PutOp(key(1), testEntry(7)),
			MovePlaceOp(key(1), 7, testEntry(7).Placement, []Shard{{"n3", 0}, {"n2", 1}}, pin),
			MovePlaceOp(key(1), 7, testEntry(7).Placement, []Shard{{"n1", 0}, {"n4", 1}}, pin)},
			[]Status{StatusCreated, StatusUpdated, StatusConflict}},
		{"place retried after it committed", []Op{PutOp(key(1), testEntry(7)),
			MovePlaceOp(key(1), 7, testEntry(7).Placement, []Shard{{"n3", 0}, {"n2", 1}}, pin),
			MovePlaceOp(key(1), 7, testEntry(7).Placement, []Shard{{"n3", 0}, {"n2", 1}}, pin)},
			[]Status{StatusCreated, StatusUpdated, StatusUpdated}},
		{"place expecting another order", []Op{PutOp(key(1), testEntry(7)), MovePlaceOp(key(1), 7, []Shard{{"n2", 1}, {"n1", 0}}, []Shard{{"n3", 0}}, pin)},
			[]Status{StatusCreated, StatusConflict}},
		{"parts are distinct keys", []Op{PutOp(key(1), testEntry(7)), PutOp(key(1).WithPart(0), testEntry(8)), PutOp(key(1).WithPart(1), testEntry(9))},
			[]Status{StatusCreated, StatusCreated, StatusCreated}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := New(nil)
			r := apply(t, f, 10, EncodeIndex(tc.ops))
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			if len(r.Results) != len(tc.want) {
				t.Fatalf("%d results, want %d", len(r.Results), len(tc.want))
			}
			for i, w := range tc.want {
				if r.Results[i].Status != w {
					t.Errorf("op %d (%s): %s, want %s", i, tc.ops[i].Kind, r.Results[i].Status, w)
				}
			}
		})
	}
}

func TestEntryFieldsAndGeneration(t *testing.T) {
	f := New(nil)
	e := testEntry(7)
	apply(t, f, 42, EncodeIndex([]Op{PutOp(key(1), e)}))
	got, ok := f.Lookup(key(1))
	if !ok {
		t.Fatal("entry missing")
	}
	if got.Generation != 42 || got.Sum != 7 || got.Size != 100 || len(got.Placement) != 2 || got.Placement[1].NodeID != "n2" ||
		!got.Created.Equal(e.Created) || got.TierHints != HintDRAM {
		t.Fatalf("entry %+v", got)
	}
	// Pins only extend.
	later, earlier := time.Unix(1900000000, 0).UTC(), time.Unix(1800000000, 0).UTC()
	apply(t, f, 43, EncodeIndex([]Op{PinOp(key(1), later), PinOp(key(1), earlier)}))
	got, _ = f.Lookup(key(1))
	if !got.PinUntil.Equal(later) || got.Generation != 42 {
		t.Fatalf("pin %v gen %d", got.PinUntil, got.Generation)
	}
	// Delete + re-put gives a new generation.
	apply(t, f, 44, EncodeIndex([]Op{DeleteOp(key(1), 42)}))
	apply(t, f, 45, EncodeIndex([]Op{PutOp(key(1), e)}))
	got, _ = f.Lookup(key(1))
	if got.Generation != 45 || !got.PinUntil.IsZero() {
		t.Fatalf("re-put: %+v", got)
	}
	if f.AppliedIndex() != 45 || f.OpsApplied() != 5 {
		t.Fatalf("applied %d ops %d", f.AppliedIndex(), f.OpsApplied())
	}
}

// Replaying a command (a client retrying after ErrLeadershipLost, whose first
// attempt did commit) leaves the state as one application did.
func TestReplayIdempotent(t *testing.T) {
	cmds := [][]byte{
		EncodeNamespace(NamespaceCommand{Action: NamespaceCreate, Namespace: block.Namespace{Name: "t1", ParityShards: 2}}),
		EncodeMember(MemberCommand{Action: MemberUpsert, Member: Member{ID: "n1", RaftAddr: "a:1", State: MemberAlive}}),
		EncodeIndex([]Op{PutOp(key(1), testEntry(1)), PutOp(block.NewKey("t1", 2), testEntry(2)), PinOp(key(1), time.Unix(2e9, 0))}),
		EncodeIndex([]Op{DeleteOp(key(1), 0), PutOp(key(3), testEntry(3))}),
	}
	once, twice := New(nil), New(nil)
	idx := uint64(1)
	for _, c := range cmds {
		apply(t, once, idx, c)
		r1 := apply(t, twice, idx, c)
		idx++
		r2 := apply(t, twice, idx, c) // the retry commits at a later index
		idx++
		for i := range r2.Results {
			if r2.Results[i].Err() != nil && r1.Results[i].Err() == nil && r2.Results[i].Status != StatusNotFound {
				t.Errorf("retry of op %d: %s after %s", i, r2.Results[i].Status, r1.Results[i].Status)
			}
		}
		if r2.Err != nil {
			t.Errorf("retry: %v", r2.Err)
		}
	}
	a, b := dump(t, once), dump(t, twice)
	// Generations differ (log indices differ) but the logical content must not.
	if len(a) != len(b) {
		t.Fatalf("once %d entries, twice %d", len(a), len(b))
	}
	for k, ea := range a {
		eb, ok := b[k]
		if !ok || ea.Sum != eb.Sum || ea.Size != eb.Size || !ea.PinUntil.Equal(eb.PinUntil) {
			t.Errorf("%s: once %+v twice %+v", k, ea, eb)
		}
	}
	if len(once.Members()) != 1 || len(twice.Members()) != 1 || len(twice.Namespaces()) != 2 {
		t.Fatal("members/namespaces differ")
	}

	// Replaying the exact same log entry (same index) is a no-op on the state.
	f := New(nil)
	c := EncodeIndex([]Op{PutOp(key(9), testEntry(9))})
	apply(t, f, 5, c)
	r := apply(t, f, 5, c)
	if r.Results[0].Status != StatusExisted || r.Results[0].Generation != 5 {
		t.Fatalf("replay: %+v", r.Results[0])
	}
}

func dump(t *testing.T, f *FSM) map[block.Key]Entry {
	t.Helper()
	out := map[block.Key]Entry{}
	for _, ns := range f.Namespaces() {
		if err := f.Scan(ns.Name, "", func(k block.Key, e Entry) bool { out[k] = e; return true }); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestUnknownCommandFlag(t *testing.T) {
	f := New(nil)
	// A newer leader's command type 0x50 with the ignore-unknown flag is skipped.
	r := apply(t, f, 1, []byte{0x50 | FlagIgnoreUnknown, 1, 9, 9, 9})
	if !r.Skipped || r.Err != nil || f.Fault() != nil {
		t.Fatalf("flagged unknown: %+v fault %v", r, f.Fault())
	}
	// A known type of an unknown version with the flag is skipped too.
	r = apply(t, f, 2, []byte{byte(CmdIndex) | FlagIgnoreUnknown, 9})
	if !r.Skipped {
		t.Fatalf("flagged unknown version: %+v", r)
	}
	// An unknown op inside a known batch, flagged, is skipped; the others apply.
	b := EncodeIndex([]Op{PutOp(key(1), testEntry(1))})
	b[2]++ // two ops
	b = append(b, 0x60|FlagIgnoreUnknown, 3, 1, 2, 3)
	r = apply(t, f, 3, b)
	if r.Err != nil || len(r.Results) != 2 || r.Results[0].Status != StatusCreated || r.Results[1].Status != StatusSkipped {
		t.Fatalf("flagged unknown op: %+v", r)
	}
	// Without the flag it is a hard error: nothing changes, Fault is set.
	before := f.Len()
	bad := EncodeIndex([]Op{PutOp(key(2), testEntry(2))})
	bad[2]++
	bad = append(bad, 0x60, 0)
	r = apply(t, f, 4, bad)
	if !errors.Is(r.Err, ErrUnknownCommand) || f.Len() != before {
		t.Fatalf("unflagged unknown op: %+v len %d", r, f.Len())
	}
	r = apply(t, f, 5, []byte{0x50, 1})
	if !errors.Is(r.Err, ErrUnknownCommand) || !errors.Is(f.Fault(), ErrUnknownCommand) {
		t.Fatalf("unflagged unknown type: %+v fault %v", r, f.Fault())
	}
}

func TestNamespaceCommands(t *testing.T) {
	f := New(nil)
	ns := block.Namespace{Name: "t1", Model: "m", ParityShards: 2}
	steps := []struct {
		cmd     NamespaceCommand
		wantErr error
	}{
		{NamespaceCommand{NamespaceCreate, ns}, nil},
		{NamespaceCommand{NamespaceCreate, ns}, nil}, // identical: idempotent
		{NamespaceCommand{NamespaceCreate, block.Namespace{Name: "t1", Model: "other"}}, block.ErrNamespaceExists},
		{NamespaceCommand{NamespaceUpdate, block.Namespace{Name: "t1", Model: "other"}}, block.ErrInvalidArgument},
		{NamespaceCommand{NamespaceUpdate, block.Namespace{Name: "t1", Model: "m", Priority: 3, ParityShards: 2}}, nil},
		{NamespaceCommand{NamespaceUpdate, block.Namespace{Name: "t1", Model: "m", Priority: 3, ParityShards: 1}}, block.ErrInvalidArgument},
		{NamespaceCommand{NamespaceUpdate, block.Namespace{Name: "zz"}}, block.ErrUnknownNamespace},
		{NamespaceCommand{NamespaceCreate, block.Namespace{Name: "BAD"}}, block.ErrInvalidArgument},
		{NamespaceCommand{NamespaceDelete, block.Namespace{Name: block.DefaultNamespace}}, block.ErrInvalidArgument},
	}
	for i, s := range steps {
		r := apply(t, f, uint64(i+1), EncodeNamespace(s.cmd))
		if !errors.Is(r.Err, s.wantErr) || (s.wantErr == nil && r.Err != nil) {
			t.Errorf("step %d: %v, want %v", i, r.Err, s.wantErr)
		}
	}
	got, err := f.Namespace("t1")
	if err != nil || got.Priority != 3 || got.ParityShards != 2 || got.BlockTokens != 512 {
		t.Fatalf("t1 = %+v, %v", got, err)
	}
	apply(t, f, 20, EncodeIndex([]Op{PutOp(block.NewKey("t1", 5), testEntry(1))}))
	if r := apply(t, f, 21, EncodeNamespace(NamespaceCommand{NamespaceDelete, block.Namespace{Name: "t1"}})); !errors.Is(r.Err, block.ErrNamespaceNotEmpty) {
		t.Fatalf("delete non-empty: %v", r.Err)
	}
	apply(t, f, 22, EncodeIndex([]Op{DeleteOp(block.NewKey("t1", 5), 0)}))
	if r := apply(t, f, 23, EncodeNamespace(NamespaceCommand{NamespaceDelete, block.Namespace{Name: "t1"}})); r.Err != nil {
		t.Fatalf("delete empty: %v", r.Err)
	}
	if _, err := f.Namespace("t1"); !errors.Is(err, block.ErrUnknownNamespace) {
		t.Fatalf("after delete: %v", err)
	}
}

func TestMemberAndCredentialCommands(t *testing.T) {
	f := New(nil)
	m := Member{ID: "n1", RaftAddr: "127.0.0.1:1", DataAddr: "127.0.0.1:2", HTTPAddr: "127.0.0.1:3", Zone: "z1", Capacity: 1 << 30, State: MemberAlive}
	if r := apply(t, f, 1, EncodeMember(MemberCommand{MemberUpsert, m})); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := apply(t, f, 2, EncodeMember(MemberCommand{MemberSetState, Member{ID: "n1", State: MemberSuspect}})); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := apply(t, f, 3, EncodeMember(MemberCommand{MemberSetState, Member{ID: "nx", State: MemberDead}})); !errors.Is(r.Err, block.ErrInvalidArgument) {
		t.Fatalf("unknown member: %v", r.Err)
	}
	if r := apply(t, f, 4, EncodeMember(MemberCommand{MemberUpsert, Member{ID: "n2"}})); !errors.Is(r.Err, block.ErrInvalidArgument) {
		t.Fatalf("invalid member: %v", r.Err)
	}
	got, ok := f.Member("n1")
	want := m
	want.State = MemberSuspect
	if !ok || got != want {
		t.Fatalf("member %+v", got)
	}
	// A draining member stays draining when it joins or registers again as
	// alive; a state change ends the drain.
	if r := apply(t, f, 5, EncodeMember(MemberCommand{MemberSetState, Member{ID: "n1", State: MemberDraining}})); r.Err != nil {
		t.Fatal(r.Err)
	}
	moved := m
	moved.DataAddr = "127.0.0.1:9"
	apply(t, f, 6, EncodeMember(MemberCommand{MemberUpsert, moved}))
	if got, _ := f.Member("n1"); got.State != MemberDraining || got.DataAddr != moved.DataAddr || got.State.String() != "draining" {
		t.Fatalf("re-registered draining member %+v", got)
	}
	apply(t, f, 7, EncodeMember(MemberCommand{MemberSetState, Member{ID: "n1", State: MemberAlive}}))
	if got, _ := f.Member("n1"); got.State != MemberAlive {
		t.Fatalf("drain not cancelled: %+v", got)
	}
	if r := apply(t, f, 8, EncodeMember(MemberCommand{MemberSetState, Member{ID: "n1", State: MemberDraining + 1}})); !errors.Is(r.Err, block.ErrInvalidArgument) {
		t.Fatalf("state past draining: %v", r.Err)
	}
	apply(t, f, 9, EncodeMember(MemberCommand{MemberRemove, Member{ID: "n1"}}))
	if len(f.Members()) != 0 {
		t.Fatal("member not removed")
	}

	blob, err := HashSecret("s3cret")
	if err != nil {
		t.Fatal(err)
	}
	c := Credential{AccessKeyID: "AK1", Kind: SecretHashed, Secret: blob, Scopes: []Scope{{Namespace: "default", Perms: PermRead | PermWrite}}}
	if r := apply(t, f, 10, EncodeCredential(CredentialCommand{CredentialPut, c})); r.Err != nil {
		t.Fatal(r.Err)
	}
	plain := Credential{AccessKeyID: "AK2", Kind: 0, Secret: []byte("plaintext-secret-here")}
	if r := apply(t, f, 11, EncodeCredential(CredentialCommand{CredentialPut, plain})); !errors.Is(r.Err, block.ErrInvalidArgument) {
		t.Fatalf("plaintext credential accepted: %v", r.Err)
	}
	gc, ok := f.Credential("AK1")
	if !ok || !VerifySecret(gc.Secret, "s3cret") || VerifySecret(gc.Secret, "wrong") || !gc.Allows("default", PermRead) || gc.Allows("default", PermAdmin) || gc.Allows("other", PermRead) {
		t.Fatalf("credential %+v", gc)
	}
	if ids := f.CredentialIDs(); len(ids) != 1 || ids[0] != "AK1" {
		t.Fatalf("ids %v", ids)
	}
	apply(t, f, 12, EncodeCredential(CredentialCommand{CredentialDelete, Credential{AccessKeyID: "AK1"}}))
	if _, ok := f.Credential("AK1"); ok {
		t.Fatal("credential not deleted")
	}
}

func TestSealSecret(t *testing.T) {
	k := bytes.Repeat([]byte{7}, 32)
	blob, err := SealSecret(k, "AK", "secret")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(blob, []byte("secret")) {
		t.Fatal("plaintext visible in sealed blob")
	}
	if s, err := OpenSecret(k, "AK", blob); err != nil || s != "secret" {
		t.Fatalf("open: %q %v", s, err)
	}
	if _, err := OpenSecret(k, "OTHER", blob); !errors.Is(err, block.ErrUnauthenticated) {
		t.Fatalf("open under other id: %v", err)
	}
}

func TestLookupPrefixAndScan(t *testing.T) {
	f := New(nil)
	hashes := []uint64{0x1000000000000001, 0x1000000000000002, 0x1f00000000000000, 0x2000000000000000}
	var ops []Op
	for _, h := range hashes {
		ops = append(ops, PutOp(key(h), testEntry(uint32(h))))
	}
	ops = append(ops, PutOp(key(hashes[0]).WithPart(3), testEntry(1)))
	apply(t, f, 1, EncodeIndex(ops))
	chain := []block.Key{key(hashes[0]), key(hashes[1]), key(0xdead), key(hashes[2])}
	if n := f.LookupPrefix(chain); n != 2 {
		t.Fatalf("LookupPrefix = %d, want 2", n)
	}
	tests := []struct {
		prefix string
		want   int
	}{{"", 5}, {"1", 4}, {"10", 3}, {"1f", 1}, {"2", 1}, {"3", 0}, {"1000000000000001", 2}}
	for _, tc := range tests {
		n := 0
		if err := f.Scan(block.DefaultNamespace, tc.prefix, func(block.Key, Entry) bool { n++; return true }); err != nil {
			t.Fatal(err)
		}
		if n != tc.want {
			t.Errorf("Scan(%q) = %d, want %d", tc.prefix, n, tc.want)
		}
	}
	if err := f.Scan(block.DefaultNamespace, "XYZ", func(block.Key, Entry) bool { return true }); !errors.Is(err, block.ErrInvalidKey) {
		t.Fatalf("bad prefix: %v", err)
	}
}

func TestDecodeRejectsMalformed(t *testing.T) {
	good := EncodeIndex([]Op{PutOp(key(1), testEntry(1))})
	for i := 0; i < len(good); i++ {
		if _, err := DecodeCommand(good[:i]); err == nil {
			t.Errorf("truncated at %d accepted", i)
		}
	}
	if _, err := DecodeCommand(append(good, 0)); !errors.Is(err, ErrMalformed) {
		t.Errorf("trailing byte: %v", err)
	}
	huge := []byte{byte(CmdIndex), CommandVersion, 0xff, 0xff, 0xff, 0xff, 0x0f}
	if _, err := DecodeCommand(huge); !errors.Is(err, ErrMalformed) {
		t.Errorf("huge count: %v", err)
	}
}

func TestWaitApplied(t *testing.T) {
	f := New(nil)
	if err := f.WaitApplied(context.Background(), 0); err != nil {
		t.Fatalf("index 0: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- f.WaitApplied(context.Background(), 3) }()
	apply(t, f, 1, EncodeIndex([]Op{PutOp(key(1), testEntry(1))}))
	// Entries that are not commands (a configuration change) count too.
	f.ApplyBatch([]*hraft.Log{{Index: 2, Type: hraft.LogConfiguration}})
	select {
	case err := <-done:
		t.Fatalf("returned at applied index %d: %v", f.AppliedIndex(), err)
	case <-time.After(20 * time.Millisecond):
	}
	f.ApplyBatch([]*hraft.Log{{Index: 3, Type: hraft.LogCommand, Data: EncodeIndex([]Op{PutOp(key(2), testEntry(2))})}})
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitApplied did not wake at index 3")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := f.WaitApplied(ctx, 4); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("index never applied: %v", err)
	}
}

// TestIncarnation: a start's incarnation and restoring flag are recorded;
// an older incarnation changes nothing; upserts and state changes keep
// them; an FSM that does not know the command skips it (the flag).
func TestIncarnation(t *testing.T) {
	member := Member{ID: "n1", RaftAddr: "r", DataAddr: "d", HTTPAddr: "h", State: MemberAlive}
	inc := func(n uint64, restoring bool) []byte {
		return EncodeIncarnation(IncarnationCommand{ID: "n1", Incarnation: n, Restoring: restoring})
	}
	tests := []struct {
		name          string
		cmds          [][]byte
		wantInc       uint64
		wantRestoring bool
		wantErr       bool // of the last command
	}{
		{"none yet", nil, 0, false, false},
		{"start restoring", [][]byte{inc(10, true)}, 10, true, false},
		{"restored", [][]byte{inc(10, true), inc(10, false)}, 10, false, false},
		{"new start restores again", [][]byte{inc(10, true), inc(10, false), inc(11, true)}, 11, true, false},
		{"late message of an older start ignored", [][]byte{inc(11, true), inc(10, false)}, 11, true, false},
		{"upsert keeps it", [][]byte{inc(12, true), EncodeMember(MemberCommand{MemberUpsert, Member{ID: "n1", RaftAddr: "r2", DataAddr: "d2", HTTPAddr: "h", State: MemberAlive}})}, 12, true, false},
		{"state change keeps it", [][]byte{inc(12, true), EncodeMember(MemberCommand{MemberSetState, Member{ID: "n1", State: MemberSuspect}})}, 12, true, false},
		{"incarnation 0 refused", [][]byte{inc(0, true)}, 0, false, true},
		{"unknown member refused", [][]byte{EncodeIncarnation(IncarnationCommand{ID: "nope", Incarnation: 3})}, 0, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := New(nil)
			apply(t, f, 1, EncodeMember(MemberCommand{MemberUpsert, member}))
			var last *Response
			for i, c := range tc.cmds {
				last = apply(t, f, uint64(2+i), c)
			}
			if last != nil && (last.Err != nil) != tc.wantErr {
				t.Fatalf("last command error %v, want error %v", last.Err, tc.wantErr)
			}
			m, _ := f.Member("n1")
			if m.Incarnation != tc.wantInc || m.Restoring != tc.wantRestoring {
				t.Fatalf("incarnation %d restoring %v, want %d %v", m.Incarnation, m.Restoring, tc.wantInc, tc.wantRestoring)
			}
		})
	}
	// An FSM of an older version sees an unknown command type with the
	// ignore-unknown flag: it must skip it, not fault.
	b := inc(5, true)
	if b[0]&FlagIgnoreUnknown == 0 {
		t.Fatal("incarnation commands must carry FlagIgnoreUnknown")
	}
	old := append([]byte{byte(CmdIncarnation+40) | FlagIgnoreUnknown}, b[1:]...)
	f := New(nil)
	if r := apply(t, f, 1, old); !r.Skipped || r.Err != nil || f.Fault() != nil {
		t.Fatalf("flagged unknown command: skipped %v err %v fault %v", r.Skipped, r.Err, f.Fault())
	}
}

// TestPutDropsShardsOfRestartedHolders: a put that began before a holder's
// latest start may have written its shard to the holder's previous
// process; that shard leaves the entry's placement, and a put left with
// fewer shards than the namespace's data shards is refused. Puts that
// began after the start, puts with no start time, and members with no
// recorded incarnation keep every shard.
func TestPutDropsShardsOfRestartedHolders(t *testing.T) {
	start := time.Unix(1800000000, 0).UTC()
	inc := uint64(start.UnixNano())
	rs := block.Namespace{Name: "rs21", DataShards: 2, ParityShards: 1}
	three := []Shard{{NodeID: "n1", Index: 0}, {NodeID: "n2", Index: 1}, {NodeID: "n3", Index: 2}}
	tests := []struct {
		name    string
		ns      string
		created time.Time
		restart []string // members whose incarnation is start
		unknown bool     // no member has a recorded incarnation
		want    Status
		kept    []Shard
	}{
		{"no restart keeps all", "rs21", start.Add(-time.Second), nil, false, StatusCreated, three},
		{"began before the start: its shard drops", "rs21", start.Add(-time.Millisecond), []string{"n3"}, false, StatusCreated, three[:2]},
		{"began at the start keeps all", "rs21", start, []string{"n3"}, false, StatusCreated, three},
		{"began after the start keeps all", "rs21", start.Add(time.Millisecond), []string{"n1", "n2", "n3"}, false, StatusCreated, three},
		{"no start time keeps all", "rs21", time.Time{}, []string{"n3"}, false, StatusCreated, three},
		{"no recorded incarnation keeps all", "rs21", start.Add(-time.Second), nil, true, StatusCreated, three},
		{"fewer than k left is refused", "rs21", start.Add(-time.Second), []string{"n2", "n3"}, false, StatusStaleHolder, nil},
		{"one replica left is enough", "default", start.Add(-time.Second), []string{"n2", "n3"}, false, StatusCreated, three[:1]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := New(nil)
			idx := uint64(1)
			next := func(b []byte) *Response { idx++; return apply(t, f, idx, b) }
			next(EncodeNamespace(NamespaceCommand{NamespaceCreate, rs}))
			for _, id := range []string{"n1", "n2", "n3"} {
				next(EncodeMember(MemberCommand{MemberUpsert, Member{ID: id, RaftAddr: "r" + id, DataAddr: "d" + id, HTTPAddr: "h" + id, State: MemberAlive}}))
				if !tc.unknown {
					// Every member has an older start on record.
					next(EncodeIncarnation(IncarnationCommand{ID: id, Incarnation: inc - uint64(time.Hour)}))
				}
			}
			for _, id := range tc.restart {
				next(EncodeIncarnation(IncarnationCommand{ID: id, Incarnation: inc, Restoring: true}))
			}
			k := block.NewKey(tc.ns, 1)
			r := next(EncodeIndex([]Op{PutOp(k, Entry{Size: 100, Sum: 7, Placement: three, Created: tc.created})}))
			if r.Err != nil || len(r.Results) != 1 {
				t.Fatalf("apply: %v %v", r.Err, r.Results)
			}
			if got := r.Results[0].Status; got != tc.want {
				t.Fatalf("status %s, want %s", got, tc.want)
			}
			e, ok := f.Lookup(k)
			if tc.kept == nil {
				if ok {
					t.Fatalf("refused put left an entry: %+v", e)
				}
				if !errors.Is(r.Results[0].Err(), block.ErrUnavailable) {
					t.Fatalf("refused put maps to %v, want ErrUnavailable", r.Results[0].Err())
				}
				return
			}
			if !ok || fmt.Sprint(e.Placement) != fmt.Sprint(tc.kept) {
				t.Fatalf("placement %v (found %v), want %v", e.Placement, ok, tc.kept)
			}
		})
	}
}

// TestPlaceDropsShardsOfRestartedHolders: an OpPlace carrying the time its
// shard writes began drops its new shards on members that started after
// that time (their copy went with the old process); shards the entry
// already named stay. Left with fewer than the data shards it is refused
// and the entry keeps its old placement. No time (entries logged before
// the field existed) means no check.
func TestPlaceDropsShardsOfRestartedHolders(t *testing.T) {
	start := time.Unix(1800000000, 0).UTC()
	inc := uint64(start.UnixNano())
	before, after := start.Add(-time.Millisecond), start.Add(time.Millisecond)
	sh := func(id string, i uint16) Shard { return Shard{NodeID: id, Index: i} }
	tests := []struct {
		name    string
		ns      string
		old     []Shard
		place   []Shard
		written time.Time
		restart []string
		want    Status
		kept    []Shard // the entry's placement afterwards
	}{
		{"replica move to a restarted member is refused", "default",
			[]Shard{sh("n1", 0)}, []Shard{sh("n4", 0)}, before, []string{"n4"}, StatusStaleHolder, []Shard{sh("n1", 0)}},
		{"replica move written after the start commits", "default",
			[]Shard{sh("n1", 0)}, []Shard{sh("n4", 0)}, after, []string{"n4"}, StatusUpdated, []Shard{sh("n4", 0)}},
		{"no written time: no check", "default",
			[]Shard{sh("n1", 0)}, []Shard{sh("n4", 0)}, time.Time{}, []string{"n4"}, StatusUpdated, []Shard{sh("n4", 0)}},
		{"restarted member already named keeps its replica", "default",
			[]Shard{sh("n1", 0), sh("n2", 1)}, []Shard{sh("n2", 0), sh("n4", 1)}, before, []string{"n2"}, StatusUpdated, []Shard{sh("n2", 0), sh("n4", 1)}},
		{"one of two new replicas drops", "default",
			[]Shard{sh("n1", 0)}, []Shard{sh("n1", 0), sh("n3", 1), sh("n4", 2)}, before, []string{"n4"}, StatusUpdated, []Shard{sh("n1", 0), sh("n3", 1)}},
		{"RS new shard drops, k left", "rs21",
			[]Shard{sh("n1", 0), sh("n2", 1), sh("n3", 2)}, []Shard{sh("n1", 0), sh("n2", 1), sh("n4", 2)}, before, []string{"n4"}, StatusUpdated, []Shard{sh("n1", 0), sh("n2", 1)}},
		{"RS shard moved to a restarted holder under a new index drops", "rs21",
			[]Shard{sh("n1", 0), sh("n2", 1), sh("n3", 2)}, []Shard{sh("n1", 0), sh("n3", 1), sh("n4", 2)}, before, []string{"n3"}, StatusUpdated, []Shard{sh("n1", 0), sh("n4", 2)}},
		{"RS fewer than k left is refused", "rs21",
			[]Shard{sh("n1", 0), sh("n2", 1), sh("n3", 2)}, []Shard{sh("n1", 0), sh("n4", 1), sh("n5", 2)}, before, []string{"n4", "n5"}, StatusStaleHolder,
			[]Shard{sh("n1", 0), sh("n2", 1), sh("n3", 2)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := New(nil)
			idx := uint64(1)
			next := func(b []byte) *Response { idx++; return apply(t, f, idx, b) }
			next(EncodeNamespace(NamespaceCommand{NamespaceCreate, block.Namespace{Name: "rs21", DataShards: 2, ParityShards: 1}}))
			for _, id := range []string{"n1", "n2", "n3", "n4", "n5"} {
				next(EncodeMember(MemberCommand{MemberUpsert, Member{ID: id, RaftAddr: "r" + id, DataAddr: "d" + id, HTTPAddr: "h" + id, State: MemberAlive}}))
				next(EncodeIncarnation(IncarnationCommand{ID: id, Incarnation: inc - uint64(time.Hour)}))
			}
			k := block.NewKey(tc.ns, 1)
			if r := next(EncodeIndex([]Op{PutOp(k, Entry{Size: 100, Sum: 7, Placement: tc.old, Created: start.Add(-time.Hour)})})); r.Results[0].Status != StatusCreated {
				t.Fatalf("put: %s", r.Results[0].Status)
			}
			for _, id := range tc.restart {
				next(EncodeIncarnation(IncarnationCommand{ID: id, Incarnation: inc, Restoring: true}))
			}
			r := next(EncodeIndex([]Op{WrittenPlaceOp(k, 7, tc.place, tc.written)}))
			if r.Err != nil || len(r.Results) != 1 {
				t.Fatalf("apply: %v %v", r.Err, r.Results)
			}
			if got := r.Results[0].Status; got != tc.want {
				t.Fatalf("status %s, want %s", got, tc.want)
			}
			e, ok := f.Lookup(k)
			if !ok || fmt.Sprint(e.Placement) != fmt.Sprint(tc.kept) {
				t.Fatalf("placement %v (found %v), want %v", e.Placement, ok, tc.kept)
			}
		})
	}
}

// TestPlaceWrittenEncoding: the written time and the expected placement
// are optional trailing fields of an OpPlace: absent when unset (the
// encoding of entries logged before they existed); a trailing zero time or
// an empty expected placement is a second encoding and is refused.
func TestPlaceWrittenEncoding(t *testing.T) {
	k := block.NewKey("default", 9)
	plain := EncodeIndex([]Op{PlaceOp(k, 3, []Shard{{"n1", 0}})})
	at := time.Unix(1800000000, 5).UTC()
	timed := EncodeIndex([]Op{WrittenPlaceOp(k, 3, []Shard{{"n1", 0}}, at)})
	from := []Shard{{"n2", 0}, {"n3", 1}}
	tests := []struct {
		name    string
		in      []byte
		written time.Time
		from    []Shard
		bad     bool
	}{
		{"no written time decodes as zero", plain, time.Time{}, nil, false},
		{"written time round-trips", timed, at, nil, false},
		{"trailing zero is refused", zeroWritten(plain), time.Time{}, nil, true},
		{"expected placement round-trips", EncodeIndex([]Op{MovePlaceOp(k, 3, from, []Shard{{"n1", 0}}, at)}), at, from, false},
		{"expected placement after a zero written time", EncodeIndex([]Op{MovePlaceOp(k, 3, from, []Shard{{"n1", 0}}, time.Time{})}), time.Time{}, from, false},
		{"empty expected placement is refused", EncodeIndex([]Op{MovePlaceOp(k, 3, []Shard{}, []Shard{{"n1", 0}}, at)}), time.Time{}, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := DecodeCommand(tc.in)
			if tc.bad {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("err %v, want ErrMalformed", err)
				}
				return
			}
			if err != nil || len(c.Ops) != 1 || !c.Ops[0].Written.Equal(tc.written) || !slices.Equal(c.Ops[0].IfPlacement, tc.from) {
				t.Fatalf("decoded %+v err %v, want written %v, expected placement %v", c.Ops, err, tc.written, tc.from)
			}
			if again := EncodeIndex(c.Ops); !bytes.Equal(again, tc.in) {
				t.Fatalf("re-encoded %x, want %x", again, tc.in)
			}
		})
	}
}

// zeroWritten appends an explicit zero written time to the single OpPlace
// of b, fixing up the op's body length (one byte, under 128).
func zeroWritten(b []byte) []byte {
	out := bytes.Clone(b)
	// header (2), count (1), kind (1), body length (1), body.
	out[4]++
	return append(out, 0)
}

// TestAppendOpBodyLengths checks an op's framing at every width of its body
// length (one, two and three uvarint bytes, and the edges between them):
// kind, uvarint(length), body, with the body decoding back to the op and
// re-encoding to the same bytes. AppendOp writes the body before it knows
// its length and moves it when the length needs more than one byte.
func TestAppendOpBodyLengths(t *testing.T) {
	created := time.Unix(1_700_000_000, 0).UTC()
	mk := func(shards int, id string) Op {
		place := make([]Shard, shards)
		for i := range place {
			place[i] = Shard{NodeID: fmt.Sprintf("%s-%03d", id, i), Index: uint16(i)}
		}
		return PutOp(block.NewKey("default", 7), Entry{Size: 4096, Sum: 9, Placement: place, Created: created})
	}
	tests := []struct {
		name    string
		op      Op
		lenSize int // bytes of the body's uvarint length
	}{
		{"delete, a few bytes", DeleteOp(block.NewKey("default", 1), 5), 1},
		{"one shard", mk(1, "n"), 1},
		{"body of 127 or less", mk(8, "n"), 1},
		{"body over 127", mk(12, "node"), 2},
		{"body over 16383", mk(256, "a-long-member-name-for-a-long-body-xxxxxxxxxxxxxxxxxxxxxxxxxxxx"), 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prefix := []byte{0xAA, 0xBB} // AppendOp appends after what dst holds
			b := AppendOp(bytes.Clone(prefix), tc.op)
			if !bytes.Equal(b[:2], prefix) || b[2] != uint8(tc.op.Kind) {
				t.Fatalf("head %x, want the prefix then kind %d", b[:3], tc.op.Kind)
			}
			n, k := binary.Uvarint(b[3:])
			if k != tc.lenSize || int(n) != len(b)-3-k {
				t.Fatalf("length %d in %d bytes, body %d bytes: want %d length bytes naming the rest", n, k, len(b)-3-k, tc.lenSize)
			}
			enc := EncodeIndexEncoded(1, b[2:])
			c, err := DecodeCommand(enc)
			if err != nil || len(c.Ops) != 1 {
				t.Fatalf("decode: %v, %d ops", err, len(c.Ops))
			}
			if again := AppendOp(nil, c.Ops[0]); !bytes.Equal(again, b[2:]) {
				t.Fatalf("re-encoded %d bytes differ from the %d first encoded", len(again), len(b)-2)
			}
			if tc.op.Kind == OpPut && !slices.Equal(c.Ops[0].Placement, tc.op.Placement) {
				t.Fatalf("placement %v, want %v", c.Ops[0].Placement, tc.op.Placement)
			}
		})
	}
}
