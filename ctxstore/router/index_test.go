package router

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

func newIdx(t testing.TB, cfg IndexConfig) *Index {
	t.Helper()
	idx, err := NewIndex(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func stored(m Medium, parent *uint64, hs ...uint64) Event {
	ev := Event{Kind: Stored, Hashes: hs, Medium: m}
	if parent != nil {
		ev.Parent, ev.HasParent = *parent, true
	}
	return ev
}

func p(h uint64) *uint64 { return &h }

func apply(t testing.TB, idx *Index, w string, evs ...Event) ApplyStats {
	t.Helper()
	st, err := idx.Apply(w, evs)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// depths returns worker -> depths for a query, with stale marks.
func depths(idx *Index, hs ...uint64) map[string][NumMedia]int {
	out := map[string][NumMedia]int{}
	for _, m := range idx.Match(hs, nil) {
		out[m.Worker] = m.Depth
	}
	return out
}

func TestMatchDepthByMedium(t *testing.T) {
	idx := newIdx(t, DefaultIndexConfig())
	// w1: blocks 1,2,3 on device, 4 in host memory, 5 on disk.
	apply(t, idx, "w1",
		stored(Device, nil, 1, 2, 3),
		stored(Host, p(3), 4),
		stored(Disk, p(4), 5))
	// w2: blocks 1,2 on host only; 3 on device (offloaded prefix).
	apply(t, idx, "w2", stored(Host, nil, 1, 2), stored(Device, p(2), 3))
	// w3: a different first block: never matches.
	apply(t, idx, "w3", stored(Device, nil, 99, 2, 3))

	tests := []struct {
		name  string
		query []uint64
		want  map[string][NumMedia]int
	}{
		{"full", []uint64{1, 2, 3, 4, 5, 6}, map[string][NumMedia]int{"w1": {3, 4, 5}, "w2": {0, 3, 3}}},
		{"short", []uint64{1, 2}, map[string][NumMedia]int{"w1": {2, 2, 2}, "w2": {0, 2, 2}}},
		{"diverges at 2", []uint64{1, 2, 7, 4}, map[string][NumMedia]int{"w1": {2, 2, 2}, "w2": {0, 2, 2}}},
		{"first block unknown", []uint64{7, 2, 3}, map[string][NumMedia]int{}},
		{"w3 prefix", []uint64{99, 2, 3, 4}, map[string][NumMedia]int{"w3": {3, 3, 3}}},
		{"empty", nil, map[string][NumMedia]int{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := depths(idx, tc.query...)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("got %v want %v", got, tc.want)
			}
		})
	}
}

func TestRemoveClearOrphan(t *testing.T) {
	idx := newIdx(t, DefaultIndexConfig())
	apply(t, idx, "w", stored(Device, nil, 1, 2, 3), stored(Host, nil, 1, 2))
	st := apply(t, idx, "w", Event{Kind: Removed, Hashes: []uint64{2}, Medium: Device})
	if st.Removed != 1 {
		t.Fatalf("removed %d", st.Removed)
	}
	if got := depths(idx, 1, 2, 3)["w"]; got != [NumMedia]int{1, 3, 3} {
		t.Fatalf("after removing device copy of 2: %v", got)
	}
	// A remove of a block the index does not have is counted, not an error.
	st = apply(t, idx, "w", Event{Kind: Removed, Hashes: []uint64{42}, Medium: Device})
	if st.Unknown != 1 {
		t.Fatalf("unknown %d", st.Unknown)
	}
	// A store whose parent the worker does not hold is dropped.
	st = apply(t, idx, "w", stored(Device, p(77), 78, 79))
	if st.Orphans != 2 || idx.Stats().Orphans != 2 {
		t.Fatalf("orphans %d/%d", st.Orphans, idx.Stats().Orphans)
	}
	apply(t, idx, "w", Event{Kind: Cleared})
	if got := depths(idx, 1, 2, 3); len(got) != 0 {
		t.Fatalf("after clear: %v", got)
	}
	if s := idx.Stats(); s.Keys != 0 || s.Residencies != 0 {
		t.Fatalf("after clear: %+v", s)
	}
}

func TestStaleAndReplace(t *testing.T) {
	idx := newIdx(t, DefaultIndexConfig())
	apply(t, idx, "w", stored(Device, nil, 1, 2))
	idx.MarkStale("w")
	ms := idx.Match([]uint64{1, 2}, nil)
	if len(ms) != 1 || !ms[0].Stale || ms[0].Depth != [NumMedia]int{2, 2, 2} {
		t.Fatalf("stale match: %+v", ms)
	}
	// Events keep applying while stale; the mark stays until a dump.
	apply(t, idx, "w", stored(Device, p(2), 3))
	if !idx.Stale("w") {
		t.Fatal("stale mark lost")
	}
	st, err := idx.ReplaceWorker("w", []Event{stored(Host, nil, 1, 5)})
	if err != nil {
		t.Fatal(err)
	}
	if st.Removed != 3 || st.Stored != 2 || idx.Stale("w") {
		t.Fatalf("replace: %+v stale=%v", st, idx.Stale("w"))
	}
	if got := depths(idx, 1, 2)["w"]; got != [NumMedia]int{0, 1, 1} {
		t.Fatalf("after dump: %v", got)
	}
	idx.MarkStale("w")
	if n := idx.ClearWorker("w"); n != 2 || idx.Stale("w") {
		t.Fatalf("clear dropped %d, stale=%v", n, idx.Stale("w"))
	}
}

func TestRestoreSameHashDifferentPosition(t *testing.T) {
	idx := newIdx(t, DefaultIndexConfig())
	apply(t, idx, "w", stored(Device, nil, 1, 2))
	apply(t, idx, "w", stored(Device, nil, 2)) // 2 now claimed at position 0
	if got := depths(idx, 2)["w"]; got != [NumMedia]int{1, 1, 1} {
		t.Fatalf("moved: %v", got)
	}
	if got := depths(idx, 1, 2)["w"]; got != [NumMedia]int{1, 1, 1} {
		t.Fatalf("old position still claimed: %v", got)
	}
	if s := idx.Stats(); s.Residencies != 2 || s.Keys != 2 {
		t.Fatalf("stats %+v", s)
	}
}

func TestEvictionUnderBudget(t *testing.T) {
	cfg := DefaultIndexConfig()
	cfg.BytesPerKey, cfg.BytesPerResidency = 10, 10
	cfg.MaxBytes = 20 * 100 // 100 single-holder blocks
	cfg.EvictBatch = 8
	idx := newIdx(t, cfg)
	// Old worker stores first, then a newer one; both chains are private.
	for i := range uint64(60) {
		parent := (*uint64)(nil)
		if i > 0 {
			parent = p(1000 + i - 1)
		}
		apply(t, idx, "old", stored(Device, parent, 1000+i))
	}
	for i := range uint64(60) {
		parent := (*uint64)(nil)
		if i > 0 {
			parent = p(2000 + i - 1)
		}
		apply(t, idx, "new", stored(Device, parent, 2000+i))
	}
	s := idx.Stats()
	if s.Bytes > cfg.MaxBytes {
		t.Fatalf("over budget: %+v", s)
	}
	if s.Evicted == 0 {
		t.Fatalf("nothing evicted: %+v", s)
	}
	// The newest worker's chain is intact; the old one lost its oldest
	// (leading) blocks first, so its prefix no longer matches.
	newQ := make([]uint64, 60)
	oldQ := make([]uint64, 60)
	for i := range newQ {
		newQ[i], oldQ[i] = 2000+uint64(i), 1000+uint64(i)
	}
	if got := depths(idx, newQ...)["new"]; got[Disk] != 60 {
		t.Fatalf("new worker evicted: %v (%+v)", got, s)
	}
	if got := depths(idx, oldQ...)["old"]; got[Disk] != 0 {
		t.Fatalf("old worker's oldest blocks survived: %v", got)
	}

	// A stale worker is evicted before a fresher one, whatever its age.
	cfg.LowWater = 0.95
	idx2 := newIdx(t, cfg)
	apply(t, idx2, "a", stored(Device, nil, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10))
	apply(t, idx2, "b", stored(Device, nil, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20))
	idx2.MarkStale("b")
	hs := make([]uint64, 81)
	for i := range hs {
		hs[i] = 100 + uint64(i)
	}
	apply(t, idx2, "c", stored(Device, nil, hs...)) // pushes over budget
	if got := depths(idx2, 1, 2)["a"]; got[Disk] != 2 {
		t.Fatalf("fresh worker a evicted before stale b: %v %+v", got, idx2.Stats())
	}
	if got := depths(idx2, 11, 12)["b"]; got[Disk] != 0 {
		t.Fatalf("stale worker b kept: %v", got)
	}
}

func TestRefreshMovesEntryToBack(t *testing.T) {
	cfg := DefaultIndexConfig()
	cfg.BytesPerKey, cfg.BytesPerResidency = 10, 10
	cfg.MaxBytes = 20 * 4
	cfg.LowWater = 1
	cfg.EvictBatch = 1
	idx := newIdx(t, cfg)
	apply(t, idx, "w", stored(Device, nil, 1), stored(Device, nil, 2), stored(Device, nil, 3), stored(Device, nil, 4))
	apply(t, idx, "w", stored(Device, nil, 1)) // refresh 1: now 2 is the stalest
	apply(t, idx, "w", stored(Device, nil, 5)) // over budget by one
	if got := depths(idx, 1)["w"]; got[Disk] != 1 {
		t.Fatal("refreshed block evicted")
	}
	if got := depths(idx, 2)["w"]; got[Disk] != 0 {
		t.Fatal("stalest block kept")
	}
}

// TestConcurrentWritersReaders runs one writer per worker and readers at once
// (meaningful under -race) and checks the final state.
func TestConcurrentWritersReaders(t *testing.T) {
	idx := newIdx(t, DefaultIndexConfig())
	const workers, chain = 8, 200
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := []uint64{1, 2, 3, 4, 5}
			buf := make([]Match, 0, workers)
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, m := range idx.Match(q, buf[:0]) {
					if m.Depth[Device] > m.Depth[Host] || m.Depth[Host] > m.Depth[Disk] || m.Depth[Disk] > len(q) {
						t.Errorf("reader %d: bad depths %+v", r, m)
						return
					}
				}
			}
		}()
	}
	var ww sync.WaitGroup
	for w := range workers {
		ww.Add(1)
		go func() {
			defer ww.Done()
			name := fmt.Sprintf("w%d", w)
			for round := range 5 {
				for i := uint64(1); i <= chain; i++ {
					var parent *uint64
					if i > 1 {
						parent = p(i - 1)
					}
					apply(t, idx, name, stored(Medium(round%3), parent, i))
				}
				if round < 4 {
					apply(t, idx, name, Event{Kind: Cleared})
				}
			}
		}()
	}
	ww.Wait()
	close(stop)
	wg.Wait()
	q := make([]uint64, chain)
	for i := range q {
		q[i] = uint64(i + 1)
	}
	ms := idx.Match(q, nil)
	names := make([]string, 0, len(ms))
	for _, m := range ms {
		if m.Depth != [NumMedia]int{0, chain, chain} { // round 4 stored on Host
			t.Fatalf("%s: %v", m.Worker, m.Depth)
		}
		names = append(names, m.Worker)
	}
	slices.Sort(names)
	if len(names) != workers {
		t.Fatalf("workers %v", names)
	}
	if s := idx.Stats(); s.Keys != chain || s.Residencies != workers*chain {
		t.Fatalf("stats %+v", s)
	}
}

func TestApplyRejects(t *testing.T) {
	idx := newIdx(t, DefaultIndexConfig())
	if _, err := idx.Apply("", nil); err == nil {
		t.Fatal("empty worker accepted")
	}
	if _, err := idx.Apply("w", []Event{{Kind: Stored, Medium: 9}}); err == nil {
		t.Fatal("bad medium accepted")
	}
	if _, err := NewIndex(IndexConfig{}); err == nil {
		t.Fatal("zero config accepted")
	}
}

func TestParseMedium(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Medium
		ok   bool
	}{
		{"", Device, true}, {"GPU", Device, true}, {"gpu", Device, true},
		{"CPU", Host, true}, {"CPU_TIER1", Host, true}, {"CPU_TIER2", Disk, true},
		{"STORAGE", Disk, true}, {"NVME", Disk, true}, {"REMOTE", Disk, true},
		{"tape", 0, false},
	} {
		got, err := ParseMedium(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("ParseMedium(%q) = %v, %v", tc.in, got, err)
		}
	}
}

func BenchmarkMatch(b *testing.B) {
	idx := newIdx(b, DefaultIndexConfig())
	const workers = 100
	q := make([]uint64, 32)
	for i := range q {
		q[i] = uint64(i + 1)
	}
	for w := range workers {
		n := 1 + w%len(q)
		apply(b, idx, fmt.Sprintf("w%d", w), stored(Medium(w%3), nil, q[:n]...))
	}
	buf := make([]Match, 0, workers)
	b.ReportAllocs()
	c0 := cpuTime()
	for b.Loop() {
		buf = idx.Match(q, buf[:0])
	}
	reportCPU(b, c0)
}

// reportCPU adds the process CPU time per op: on a machine shared with other
// jobs, wall time per op (ns/op) includes waiting for a CPU.
func reportCPU(b *testing.B, c0 time.Duration) {
	b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkMatchNShared: 1000 workers all hold a shared first block, few go
// deeper; MatchN answers the 16 deepest, Match everyone.
func BenchmarkMatchNShared(b *testing.B) {
	idx := newIdx(b, DefaultIndexConfig())
	const workers = 1000
	q := make([]uint64, 24)
	for i := range q {
		q[i] = uint64(i + 1)
	}
	for w := range workers {
		evs := []Event{stored(Device, nil, 1)}
		if w%50 == 0 {
			evs = append(evs, stored(Device, p(1), q[1:1+w%23]...))
		}
		apply(b, idx, fmt.Sprintf("w%d", w), evs...)
	}
	for _, n := range []int{16, 0} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			buf := make([]Match, 0, workers)
			b.ReportAllocs()
			c0 := cpuTime()
			for b.Loop() {
				buf = idx.MatchN(q, n, buf[:0])
			}
			reportCPU(b, c0)
		})
	}
}

// BenchmarkApply: one worker storing 16-block chains and removing them.
func BenchmarkApply(b *testing.B) {
	idx := newIdx(b, DefaultIndexConfig())
	hs := make([]uint64, 16)
	b.ReportAllocs()
	i := uint64(0)
	c0 := cpuTime()
	for b.Loop() {
		for k := range hs {
			i++
			hs[k] = i * 0x9E3779B97F4A7C15
		}
		_, _ = idx.Apply("w", []Event{stored(Device, nil, hs...), {Kind: Removed, Hashes: hs, Medium: Device}})
	}
	reportCPU(b, c0)
	b.ReportMetric(float64(b.N*32)/b.Elapsed().Seconds(), "blockops/s")
}
