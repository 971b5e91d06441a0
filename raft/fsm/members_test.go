package fsm

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// wantMembers is the members of f's current state sorted by id, computed
// from the map itself rather than the cached list.
func wantMembers(f *FSM) []Member {
	out := slices.Collect(maps.Values(f.cur.Load().members))
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func eachMember(f *FSM) []Member {
	var out []Member
	f.EachMember(func(m Member) bool { out = append(out, m); return true })
	return out
}

// The sorted member list publish caches follows every change of the
// members: upserts, state changes, removal, incarnations, a restore.
func TestMembersListFollowsChanges(t *testing.T) {
	member := func(id string) Member {
		return Member{ID: id, RaftAddr: "127.0.0.1:1", Zone: "z", Capacity: 1 << 30, State: MemberAlive}
	}
	steps := []struct {
		name string
		cmd  []byte
		ids  string
	}{
		{"upsert n3", EncodeMember(MemberCommand{MemberUpsert, member("n3")}), "n3"},
		{"upsert n1", EncodeMember(MemberCommand{MemberUpsert, member("n1")}), "n1,n3"},
		{"upsert n2", EncodeMember(MemberCommand{MemberUpsert, member("n2")}), "n1,n2,n3"},
		{"n2 suspect", EncodeMember(MemberCommand{MemberSetState, Member{ID: "n2", State: MemberSuspect}}), "n1,n2,n3"},
		{"n3 incarnation", EncodeIncarnation(IncarnationCommand{ID: "n3", Incarnation: 7, Restoring: true}), "n1,n2,n3"},
		{"remove n1", EncodeMember(MemberCommand{MemberRemove, Member{ID: "n1"}}), "n2,n3"},
		{"a put changes no member", EncodeIndex([]Op{PutOp(key(1), testEntry(1))}), "n2,n3"},
	}
	f := New(nil)
	if got := f.Members(); len(got) != 0 {
		t.Fatalf("new FSM: %v", got)
	}
	for i, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			before := f.Members()
			if r := apply(t, f, uint64(i+1), st.cmd); r.Err != nil {
				t.Fatal(r.Err)
			}
			got, want := f.Members(), wantMembers(f)
			var ids []string
			for _, m := range got {
				ids = append(ids, m.ID)
			}
			if strings.Join(ids, ",") != st.ids || !slices.Equal(got, want) {
				t.Fatalf("Members() = %+v, want ids %s and %+v", got, st.ids, want)
			}
			if each := eachMember(f); !slices.Equal(each, want) {
				t.Fatalf("EachMember saw %+v, want %+v", each, want)
			}
			// A list handed out before the change keeps what it had.
			if len(before) > 0 && slices.Equal(before, got) && st.name != "a put changes no member" {
				t.Fatalf("the list from before %s equals the one after: %+v", st.name, got)
			}
		})
	}
	if m, _ := f.Member("n2"); m.State != MemberSuspect {
		t.Fatalf("n2 %+v", m)
	}
	if m, _ := f.Member("n3"); m.Incarnation != 7 || !m.Restoring {
		t.Fatalf("n3 %+v", m)
	}

	// The caller owns what Members returns.
	got := f.Members()
	got[0].ID = "changed"
	if f.Members()[0].ID != "n2" {
		t.Fatal("changing the returned slice changed the FSM's list")
	}

	// EachMember stops when told to.
	calls := 0
	f.EachMember(func(Member) bool { calls++; return false })
	if calls != 1 {
		t.Fatalf("EachMember went on after false: %d calls", calls)
	}

	// A restored FSM lists the snapshot's members.
	g := New(nil)
	if err := g.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, f)))); err != nil {
		t.Fatal(err)
	}
	if got, want := g.Members(), wantMembers(f); !slices.Equal(got, want) {
		t.Fatalf("restored members %+v, want %+v", got, want)
	}
}

// BenchmarkMembers is the members read a put's placement does per block,
// over a 9-member cluster: EachMember (no copy) and Members (a copy of the
// cached sorted list), each against sorting the map per call as Members
// did before the list was cached, timed alternately in the same run; it
// reports ns per read of each and the ratios sort/EachMember and
// sort/Members.
func BenchmarkMembers(b *testing.B) {
	f := New(nil)
	for i := range 9 {
		m := Member{ID: fmt.Sprintf("node-%02d", 9-i), RaftAddr: "127.0.0.1:1", Zone: "z", Capacity: 1 << 30, State: MemberAlive}
		apply(b, f, uint64(i+1), EncodeMember(MemberCommand{MemberUpsert, m}))
	}
	var sink int
	ways := []func(){
		func() { sink += len(wantMembers(f)) },
		func() { sink += len(f.Members()) },
		func() { f.EachMember(func(m Member) bool { sink += int(m.Capacity >> 30); return true }) },
	}
	var spent [3]time.Duration
	const chunk = 1000
	for b.Loop() {
		for w, fn := range ways {
			start := time.Now()
			for range chunk {
				fn()
			}
			spent[w] += time.Since(start)
		}
	}
	if sink == 0 {
		b.Fatal("no members read")
	}
	per := func(w int) float64 { return float64(spent[w].Nanoseconds()) / float64(b.N*chunk) }
	b.ReportMetric(per(0), "ns/sort")
	b.ReportMetric(per(1), "ns/Members")
	b.ReportMetric(per(2), "ns/EachMember")
	b.ReportMetric(per(0)/per(1), "ratio_sort_vs_Members")
	b.ReportMetric(per(0)/per(2), "ratio_sort_vs_EachMember")
}
