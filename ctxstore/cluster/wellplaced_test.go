package cluster

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/erasure"
	"github.com/ctxtier/ctxtier/ctxstore/placement"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// wellPlacedMembers: two alive members, one of them restoring, a suspect,
// a draining, a dead and a left member ("gone" is unknown).
func wellPlacedMembers() (map[string]fsm.Member, int) {
	ms := map[string]fsm.Member{
		"a": {ID: "a", State: fsm.MemberAlive},
		"b": {ID: "b", State: fsm.MemberAlive, Restoring: true},
		"c": {ID: "c", State: fsm.MemberSuspect},
		"d": {ID: "d", State: fsm.MemberDraining},
		"e": {ID: "e", State: fsm.MemberDead},
		"f": {ID: "f", State: fsm.MemberLeft},
		"g": {ID: "g", State: fsm.MemberAlive},
	}
	return ms, 4 // a, b, c, g
}

func shards(spec ...any) []fsm.Shard {
	var p []fsm.Shard
	for i := 0; i < len(spec); i += 2 {
		p = append(p, fsm.Shard{NodeID: spec[i].(string), Index: uint16(spec[i+1].(int))})
	}
	return p
}

// TestWellPlaced: the scan's allocation-free fast path says "nothing to do"
// exactly for placements it can vouch for, with the restoring count of the
// full check.
func TestWellPlaced(t *testing.T) {
	ms, usable := wellPlacedMembers()
	for _, tc := range []struct {
		name      string
		k, m      int
		p         []fsm.Shard
		ok        bool
		restoring int
	}{
		{"one copy", 1, 0, shards("a", 0), true, 0},
		{"one copy restoring", 1, 0, shards("b", 0), true, 1},
		{"three replicas", 1, 2, shards("a", 0, "b", 0, "c", 0), true, 1},
		{"replicas as many as usable members", 1, 5, shards("a", 0, "b", 0, "c", 0, "g", 0), true, 1},
		{"one replica short", 1, 2, shards("a", 0, "c", 0), false, 0},
		{"replica on a draining member", 1, 2, shards("a", 0, "c", 0, "d", 0), false, 0},
		{"replica on a dead member", 1, 2, shards("a", 0, "c", 0, "e", 0), false, 0},
		{"replica on an unknown member", 1, 0, shards("gone", 0), false, 0},
		{"two replicas on one member", 1, 1, shards("a", 0, "a", 0), false, 0},
		{"erasure complete", 2, 1, shards("a", 0, "b", 1, "g", 2), true, 1},
		{"erasure in any order", 2, 1, shards("g", 2, "a", 1, "c", 0), true, 0},
		{"erasure index missing", 2, 1, shards("a", 0, "b", 1), false, 0},
		{"erasure index twice", 2, 1, shards("a", 0, "b", 1, "g", 1), false, 0},
		{"erasure index out of the code", 2, 1, shards("a", 0, "b", 1, "g", 3), false, 0},
		{"erasure shards on one member", 2, 1, shards("a", 0, "a", 1, "g", 2), false, 0},
		{"erasure shard on a left member", 2, 1, shards("a", 0, "f", 1, "g", 2), false, 0},
		{"no placement", 1, 0, nil, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := erasure.New(tc.k, tc.m)
			if err != nil {
				t.Fatal(err)
			}
			r, ok := wellPlaced(tc.p, ms, c, usable)
			if ok != tc.ok || ok && r != tc.restoring {
				t.Fatalf("wellPlaced = %d, %v; want %d, %v", r, ok, tc.restoring, tc.ok)
			}
			if ok {
				assertNoTask(t, tc.p, c, ms, usable, r)
			}
		})
	}
}

// TestWellPlacedAgreesWithCheck: on random placements over members in
// every state, whenever the fast path says "nothing to do", the full check
// finds no task and counts the same restoring shards.
func TestWellPlacedAgreesWithCheck(t *testing.T) {
	ms, usable := wellPlacedMembers()
	ids := []string{"a", "b", "c", "d", "e", "f", "g", "gone"}
	rng := rand.New(rand.NewPCG(1, 2))
	codes := [][2]int{{1, 0}, {1, 1}, {1, 2}, {2, 1}, {3, 1}, {4, 2}}
	fast := 0
	for i := range 20000 {
		km := codes[i%len(codes)]
		c, err := erasure.New(km[0], km[1])
		if err != nil {
			t.Fatal(err)
		}
		// Mostly healthy members, so that the fast path is taken often.
		pool := ids
		if rng.IntN(2) == 0 {
			pool = []string{"a", "b", "c", "g"}
		}
		var p []fsm.Shard
		for j := range rng.IntN(c.N() + 2) {
			idx := j
			if rng.IntN(8) == 0 {
				idx = rng.IntN(c.N() + 1)
			}
			p = append(p, fsm.Shard{NodeID: pool[rng.IntN(len(pool))], Index: uint16(idx)})
		}
		r, ok := wellPlaced(p, ms, c, usable)
		if !ok {
			continue
		}
		fast++
		assertNoTask(t, p, c, ms, usable, r)
		if t.Failed() {
			t.Fatalf("placement %v, code %v", p, km)
		}
	}
	if fast < 1000 {
		t.Fatalf("the fast path answered only %d of 20000 placements", fast)
	}
}

func assertNoTask(t *testing.T, p []fsm.Shard, c *erasure.Code, ms map[string]fsm.Member, usable, restoring int) {
	t.Helper()
	task, r := checkPlacement(block.NewKey("ns", 1), fsm.Entry{Placement: p}, c, ms, usable)
	if len(task.missing) > 0 || len(task.leaving) > 0 || len(task.dups) > 0 {
		t.Errorf("fast path said well placed, full check: missing %v, leaving %v, dups %v", task.missing, task.leaving, task.dups)
	}
	if r != restoring {
		t.Errorf("restoring: fast path %d, full check %d", restoring, r)
	}
}

// BenchmarkRepairScanEntry: the leader's per-entry cost of a repair scan
// over well-placed entries, through the fast path and through the full
// check alone (what every entry paid before).
func BenchmarkRepairScanEntry(b *testing.B) {
	ms, usable := wellPlacedMembers()
	for _, tc := range []struct {
		k, m int
		p    []fsm.Shard
	}{
		{1, 0, shards("a", 0)},
		{1, 2, shards("a", 0, "b", 0, "c", 0)},
		{2, 1, shards("a", 0, "b", 1, "g", 2)},
	} {
		c, err := erasure.New(tc.k, tc.m)
		if err != nil {
			b.Fatal(err)
		}
		e := fsm.Entry{Placement: tc.p}
		k := block.NewKey("ns", 1)
		b.Run(fmt.Sprintf("RS(%d,%d)/fast", tc.k, tc.m), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := wellPlaced(e.Placement, ms, c, usable); !ok {
					if task, _ := checkPlacement(k, e, c, ms, usable); len(task.missing) > 0 {
						b.Fatal("not well placed")
					}
				}
			}
		})
		b.Run(fmt.Sprintf("RS(%d,%d)/full", tc.k, tc.m), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if task, _ := checkPlacement(k, e, c, ms, usable); len(task.missing) > 0 {
					b.Fatal("not well placed")
				}
			}
		})
	}
}

// benchIndex is an index of n one-copy entries on three alive members of
// 1 GiB in three zones, each entry on the member placement picks for it,
// and the log index of its last command.
func benchIndex(b testing.TB, n int) (*fsm.FSM, uint64) {
	b.Helper()
	const batch = 1024
	f := fsm.New(nil)
	idx := uint64(0)
	ids := []string{"n1", "n2", "n3"}
	for i, id := range ids {
		benchApply(b, f, &idx, fsm.EncodeMember(fsm.MemberCommand{Action: fsm.MemberUpsert,
			Member: fsm.Member{ID: id, RaftAddr: id + ":1", Zone: fmt.Sprintf("z%d", i), Capacity: 1 << 30, State: fsm.MemberAlive}}))
	}
	benchApply(b, f, &idx, fsm.EncodeNamespace(fsm.NamespaceCommand{Action: fsm.NamespaceCreate,
		Namespace: block.Namespace{Name: "ns", DataShards: 1}}))
	nodes := candidatesOf(f, nil)
	ops := make([]fsm.Op, 0, batch)
	for i := range n {
		k := block.NewKey("ns", uint64(i)+1)
		pick, err := placement.Pick(k, nodes, 1)
		if err != nil {
			b.Fatal(err)
		}
		ops = append(ops, fsm.Op{Kind: fsm.OpPut, Key: k, Size: 4096, Placement: []fsm.Shard{{NodeID: pick[0].ID}}})
		if len(ops) == batch || i == n-1 {
			benchApply(b, f, &idx, fsm.EncodeIndex(ops))
			ops = ops[:0]
		}
	}
	return f, idx
}

func benchApply(b testing.TB, f *fsm.FSM, idx *uint64, cmd []byte) {
	b.Helper()
	*idx++
	if r := f.Apply(&hraft.Log{Index: *idx, Type: hraft.LogCommand, Data: cmd}).(*fsm.Response); r.Err != nil {
		b.Fatal(r.Err)
	}
}

// BenchmarkRepairScan: one whole repair scan of an index of 1,000,000
// well-placed entries on three alive members (one-copy blocks), what the
// leader runs every RepairInterval.
//
//	go test -run '^$' -bench 'RepairScan$' -benchtime 3x ./ctxstore/cluster/
func BenchmarkRepairScan(b *testing.B) {
	const entries = 1_000_000
	f, _ := benchIndex(b, entries)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		tasks, scanned, _ := scanIndex(f)
		if len(tasks) > 0 || scanned != entries {
			b.Fatalf("%d tasks, %d scanned", len(tasks), scanned)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*entries), "ns/entry")
}

// BenchmarkRebalanceScan: one rebalancing scan (one page of 64 tasks, and
// the count of what is pending) of 1,000,000 one-copy entries, with the
// three members that placed them (nothing to move) and after a fourth
// joined (about a quarter of the entries move).
//
//	go test -run '^$' -bench 'RebalanceScan$' -benchtime 3x ./ctxstore/cluster/
func BenchmarkRebalanceScan(b *testing.B) {
	const entries = 1_000_000
	f, idx := benchIndex(b, entries)
	for _, joined := range []bool{false, true} {
		if joined {
			benchApply(b, f, &idx, fsm.EncodeMember(fsm.MemberCommand{Action: fsm.MemberUpsert,
				Member: fsm.Member{ID: "n4", RaftAddr: "n4:1", Zone: "z0", Capacity: 1 << 30, State: fsm.MemberAlive}}))
		}
		b.Run(fmt.Sprintf("joined=%v", joined), func(b *testing.B) {
			b.ReportAllocs()
			var pending int
			for b.Loop() {
				r := rebalanceScanIndex(f, 64, nil, scanCursor{}, true)
				pending = r.pending
				if r.scanned != entries || joined != (pending > 0) {
					b.Fatalf("%d pending, %d scanned", pending, r.scanned)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*entries), "ns/entry")
			b.ReportMetric(float64(pending), "pending")
		})
	}
}

// TestScanDue: periodic repair scans keep to a tenth of the leader's time.
func TestScanDue(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	for _, tc := range []struct {
		name  string
		since time.Duration // from the end of the last scan
		took  time.Duration
		due   bool
	}{
		{"never scanned", 0, 0, true},
		{"a quick scan, the next tick", time.Second, time.Millisecond, true},
		{"a 2 s scan, 1 s later", time.Second, 2 * time.Second, false},
		{"a 2 s scan, 17.9 s later", 17900 * time.Millisecond, 2 * time.Second, false},
		{"a 2 s scan, 18 s later", 18 * time.Second, 2 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			last := t0
			if tc.took == 0 {
				last = time.Time{}
			}
			if got := scanDue(last.Add(tc.since), last, tc.took); got != tc.due {
				t.Fatalf("scanDue = %v, want %v", got, tc.due)
			}
		})
	}
}

// joinedIndex is benchIndex's n entries in namespace "ns", n/2 more in
// "ns2" (a second namespace for the cursor to cross), then a fourth member
// joins: about a quarter of the entries have a shard to move.
func joinedIndex(tb testing.TB, n int) *fsm.FSM {
	tb.Helper()
	f, idx := benchIndex(tb, n)
	benchApply(tb, f, &idx, fsm.EncodeNamespace(fsm.NamespaceCommand{Action: fsm.NamespaceCreate,
		Namespace: block.Namespace{Name: "ns2", DataShards: 1}}))
	nodes := candidatesOf(f, nil)
	var ops []fsm.Op
	for i := range n / 2 {
		k := block.NewKey("ns2", uint64(i)*7+3)
		pick, err := placement.Pick(k, nodes, 1)
		if err != nil {
			tb.Fatal(err)
		}
		ops = append(ops, fsm.Op{Kind: fsm.OpPut, Key: k, Size: 4096, Placement: []fsm.Shard{{NodeID: pick[0].ID}}})
	}
	benchApply(tb, f, &idx, fsm.EncodeIndex(ops))
	benchApply(tb, f, &idx, fsm.EncodeMember(fsm.MemberCommand{Action: fsm.MemberUpsert,
		Member: fsm.Member{ID: "n4", RaftAddr: "n4:1", Zone: "z0", Capacity: 1 << 30, State: fsm.MemberAlive}}))
	return f
}

// TestRebalanceScanPages: paging through the index (a counting first
// page, then pages resuming after the last page's last task) finds every
// task one unlimited scan finds, in the same order, once each, across
// namespaces, and reads the index about once in all (not once per page).
func TestRebalanceScanPages(t *testing.T) {
	const entries, limit = 6000, 64
	f := joinedIndex(t, entries)
	all := rebalanceScanIndex(f, 1<<30, nil, scanCursor{}, true)
	total := entries + entries/2
	if all.scanned != total || len(all.tasks) < total/8 || all.pending != len(all.tasks) || !all.end {
		t.Fatalf("unlimited scan: %d scanned, %d tasks, %d pending, end %v", all.scanned, len(all.tasks), all.pending, all.end)
	}
	var got []block.Key
	first := rebalanceScanIndex(f, limit, nil, scanCursor{}, true)
	if first.scanned != total || first.pending != all.pending || len(first.tasks) != limit {
		t.Fatalf("counting page: %d scanned, %d pending, %d tasks", first.scanned, first.pending, len(first.tasks))
	}
	for _, tk := range first.tasks {
		got = append(got, tk.key)
	}
	cur, resumedReads, pages := first.next, 0, 1
	for {
		r := rebalanceScanIndex(f, limit, nil, cur, false)
		pages++
		resumedReads += r.scanned
		for _, tk := range r.tasks {
			got = append(got, tk.key)
		}
		if len(r.tasks) < limit {
			if !r.end {
				t.Fatalf("page %d: %d tasks and not at the end", pages, len(r.tasks))
			}
			break
		}
		if r.end && r.next == cur {
			t.Fatal("no progress")
		}
		cur = r.next
	}
	if len(got) != len(all.tasks) {
		t.Fatalf("%d pages found %d tasks, one scan %d", pages, len(got), len(all.tasks))
	}
	for i, tk := range all.tasks {
		if got[i] != tk.key {
			t.Fatalf("task %d: pages %v, one scan %v", i, got[i], tk.key)
		}
	}
	if got[len(got)-1].Namespace != "ns2" || got[0].Namespace != "ns" {
		t.Fatalf("tasks from %s to %s: want both namespaces", got[0].Namespace, got[len(got)-1].Namespace)
	}
	// The resumed pages together read the index once at most (the first,
	// counting page read it all).
	if resumedReads > total {
		t.Fatalf("%d resumed pages read %d entries of %d", pages-1, resumedReads, total)
	}
	t.Logf("%d tasks in %d pages; the resumed pages read %d of %d entries", len(got), pages, resumedReads, total)
}

// BenchmarkRebalancePages: one resumed page (64 tasks) of a rebalancing
// pass over 1,000,000 one-copy entries after a fourth member joined,
// against the counting scan of the whole index every page cost before.
//
//	go test -run '^$' -bench 'RebalancePages$' -benchtime 20x ./ctxstore/cluster/
func BenchmarkRebalancePages(b *testing.B) {
	const entries = 1_000_000
	f := joinedIndex(b, entries)
	first := rebalanceScanIndex(f, 64, nil, scanCursor{}, true)
	cur, read := first.next, 0
	b.ResetTimer()
	for b.Loop() {
		r := rebalanceScanIndex(f, 64, nil, cur, false)
		read += r.scanned
		if len(r.tasks) < 64 { // the end: wrap around
			cur = first.next
			continue
		}
		cur = r.next
	}
	b.ReportMetric(float64(read)/float64(b.N), "entries/page")
}
