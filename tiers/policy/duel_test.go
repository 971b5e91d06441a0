package policy

import (
	"errors"
	"testing"
)

// replayStream runs the block accesses of stream (one-block requests: a hit
// is a resident block) through a cache of capacity blocks ordered by the
// policy f builds, the way a tier drives it, and returns its hits and the
// policy.
func replayStream(f Factory, capacity int, stream []uint64) (int, Policy) {
	s := newShadow(f, capacity, capacity)
	hits := 0
	for _, k := range stream {
		if s.access(Meta{Hash: k}) {
			hits++
		}
	}
	return hits, s.p
}

// scanStream favours Window: a hot set of 40% of the capacity read round
// robin, each read followed by three blocks never used again. The hot
// blocks' reuse distance (1.6 x capacity) defeats LRU; Window's ghost puts
// them in main, which the scan never reaches.
func scanStream(capacity, n int) []uint64 {
	var out []uint64
	next := uint64(1 << 32)
	hot := 2 * capacity / 5
	for i := range n {
		out = append(out, uint64(i%hot))
		for range 3 {
			next++
			out = append(out, next)
		}
	}
	return out
}

// recencyStream favours LRU: every block is read twice, the second time
// 40% of a capacity of new blocks later (80% of a capacity of distinct
// blocks, counting the second reads in between), and never again. LRU hits
// every second read; Window keeps new blocks in a window of 10% of the
// capacity and fills main with blocks that are dead once hit.
func recencyStream(capacity, n int) []uint64 {
	var out []uint64
	gap := 4 * capacity / 10
	for i := range n {
		out = append(out, uint64(1<<40+i))
		if i >= gap {
			out = append(out, uint64(1<<40+i-gap))
		}
	}
	return out
}

// TestDuelFollowsTheBetterPolicy replays a stream where Window wins and one
// where LRU wins, each started under either leader: Duel must end with the
// better policy leading and within 3% of its hits.
func TestDuelFollowsTheBetterPolicy(t *testing.T) {
	const capacity = 1000
	for _, tc := range []struct {
		name    string
		stream  []uint64
		winnerA bool // Window (A) is the better policy
	}{
		{"scan, window wins", scanStream(capacity, 30000), true},
		{"recency, lru wins", recencyStream(capacity, 60000), false},
	} {
		for _, startA := range []bool{false, true} {
			c := DefaultDuelConfig()
			c.StartA = startA
			win, _ := replayStream(NewWindow, capacity, tc.stream)
			lru, _ := replayStream(NewLRU, capacity, tc.stream)
			duel, p := replayStream(c.Factory(), capacity, tc.stream)
			d := p.(*Duel)
			best, worst := win, lru
			if !tc.winnerA {
				best, worst = lru, win
			}
			t.Logf("%s, start A %v: window %d, lru %d, duel %d hits (%d switches)", tc.name, startA, win, lru, duel, d.Switches())
			if 10*best < 11*worst {
				t.Fatalf("%s: the stream does not separate the policies (best %d, other %d)", tc.name, best, worst)
			}
			if d.LeaderA() != tc.winnerA {
				t.Errorf("%s, start A %v: leader A = %v at the end, want %v", tc.name, startA, d.LeaderA(), tc.winnerA)
			}
			if float64(duel) < 0.97*float64(best) {
				t.Errorf("%s, start A %v: duel %d hits, more than 3%% below the better policy's %d", tc.name, startA, duel, best)
			}
		}
	}
}

// TestDuelSwitchesWhenTheWorkloadChanges runs the recency stream, then the
// scan stream: the lead must follow each phase (a long phase won by LRU
// must not keep it leading in the next), and the new leader must start from
// its shadow's window target. (The other order does not separate the
// policies: the scan grows Window's target to 82% of the capacity, after
// which Window is within 0.2% of LRU on the recency stream.)
func TestDuelSwitchesWhenTheWorkloadChanges(t *testing.T) {
	const capacity = 1000
	d := DefaultDuelConfig().Factory()(capacity).(*Duel)
	s := &shadow{p: d, slot: map[uint64]Handle{}, capacity: capacity}
	phases := []struct {
		stream  []uint64
		leaderA bool
	}{
		{recencyStream(capacity, 60000), false},
		{scanStream(capacity, 30000), true},
	}
	switches := 0
	for i, ph := range phases {
		for _, k := range ph.stream {
			before := d.LeaderA()
			s.access(Meta{Hash: k + uint64(i)<<48})
			if d.LeaderA() != before {
				switches++
				got, want := d.a.(*Window).target, d.sa.p.(*Window).target
				if got != want {
					t.Fatalf("phase %d: after the switch the real Window's target is %v, its shadow's %v", i, got, want)
				}
			}
		}
		if d.LeaderA() != ph.leaderA {
			t.Fatalf("phase %d: leader A = %v, want %v", i, d.LeaderA(), ph.leaderA)
		}
	}
	if switches != d.Switches() || switches < 1 {
		t.Fatalf("%d switches seen, Switches() = %d, want at least 1", switches, d.Switches())
	}
}

// TestDuelFitsCapacityFromFirstEviction checks that the shadows take the
// tier's real capacity (the resident count at the first eviction), not the
// expectedBlocks guess, whether the guess is too large or too small, and
// that they evict nothing before it is known.
func TestDuelFitsCapacityFromFirstEviction(t *testing.T) {
	for _, tc := range []struct{ guess, real int }{{1000, 50}, {50, 200}} {
		d := NewDuel(tc.guess).(*Duel)
		for h := range Handle(tc.real) {
			d.Insert(h, Meta{Hash: uint64(h) + 1})
		}
		if _, ok := d.Victim(nil); !ok {
			t.Fatalf("guess %d: no victim among %d blocks", tc.guess, tc.real)
		}
		if d.capacity != tc.real || d.sa.capacity != tc.real || d.sb.capacity != tc.real {
			t.Fatalf("guess %d: capacity %d, shadows %d and %d; want %d", tc.guess, d.capacity, d.sa.capacity, d.sb.capacity, tc.real)
		}
		if len(d.sa.slot) != tc.real || len(d.sb.slot) != tc.real {
			t.Fatalf("guess %d: shadows hold %d and %d blocks, want all %d", tc.guess, len(d.sa.slot), len(d.sb.slot), tc.real)
		}
	}
}

func TestDuelConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*DuelConfig)
		ok   bool
	}{
		{"default", func(*DuelConfig) {}, true},
		{"saturating counter", func(c *DuelConfig) { c.Z = 0 }, true},
		{"no policy", func(c *DuelConfig) { c.B = nil }, false},
		{"zero margin", func(c *DuelConfig) { c.Margin = 0 }, false},
		{"margin above 1", func(c *DuelConfig) { c.Margin = 1.5 }, false},
		{"negative z", func(c *DuelConfig) { c.Z = -1 }, false},
	} {
		c := DefaultDuelConfig()
		tc.mod(&c)
		err := c.Validate()
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Validate() = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

// TestShadowPrefixHitsInTierOrder checks the shadows' prefix rule in the
// order a tier sees a request: its hits (reads) before its misses (puts).
func TestShadowPrefixHitsInTierOrder(t *testing.T) {
	chain := []Meta{{Hash: 1}, {Hash: 2, Parent: 1, HasParent: true}, {Hash: 3, Parent: 2, HasParent: true}}
	for _, tc := range []struct {
		name  string
		order []int // indexes into chain, after a walk that stored it and one that hit it
		hits  int
	}{
		{"walk order", []int{0, 1, 2}, 3},
		{"tier order: block 2 missed by the real cache, put last", []int{0, 2, 1}, 3},
		{"head evicted from the shadow", nil, 0},
	} {
		s := newShadow(NewLRU, 8, 8)
		for range 2 {
			for _, m := range chain {
				s.access(m)
			}
		}
		if tc.order == nil { // evict the head: the chain is no prefix any more
			delete(s.slot, 1)
			tc.order = []int{1, 2}
		}
		hits := 0
		for _, i := range tc.order {
			if s.access(chain[i]) {
				hits++
			}
		}
		if hits != tc.hits {
			t.Errorf("%s: %d prefix hits, want %d", tc.name, hits, tc.hits)
		}
	}
}

// TestLeading: which policy a tier's metrics say picks the victims, for
// each named policy, and for a Duel before and after it follows Window
// (the scan phase of TestDuelSwitchesWhenTheWorkloadChanges).
func TestLeading(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window bool
	}{
		{"lru", false}, {"s3fifo", false}, {"segmented", false},
		{"window", true}, {"window-nohints", true},
		{"duel", false}, {"duel-nohints", false}, // they start at LRU
	} {
		f, err := Lookup(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if w, n := Leading(f(100)); w != tc.window || n != 0 {
			t.Errorf("%s: Leading = %v, %d switches; want %v, 0", tc.name, w, n, tc.window)
		}
	}
	const capacity = 1000
	f, _ := Lookup("duel")
	p := f(capacity)
	s := &shadow{p: p, slot: map[uint64]Handle{}, capacity: capacity}
	for _, k := range scanStream(capacity, 30000) {
		s.access(Meta{Hash: k})
	}
	if w, n := Leading(p); !w || n != 1 {
		t.Fatalf("duel after a scan-heavy stream: Leading = %v, %d switches; want Window after 1", w, n)
	}
}
