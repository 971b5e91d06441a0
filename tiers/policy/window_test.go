package policy

import "testing"

func staticWindow(frac float64) WindowConfig {
	c := DefaultWindowConfig()
	c.Adaptive = false
	c.WindowFraction = frac
	return c
}

func TestWindowGhostAdmitsReturningBlock(t *testing.T) {
	for _, ghost := range []bool{true, false} {
		c := staticWindow(0.1)
		c.Ghost = ghost
		w := c.Factory()(100).(*Window)
		w.Insert(0, Meta{Hash: 7})
		w.Remove(0) // evicted: the ghost remembers hash 7
		w.Insert(1, Meta{Hash: 8})
		w.Insert(0, Meta{Hash: 7}) // came back
		if got := w.seg(0) == segMain; got != ghost {
			t.Fatalf("ghost=%v: returning block in main=%v", ghost, got)
		}
		if w.seg(1) != segWindow {
			t.Fatal("a new block must enter the window")
		}
	}
}

// TestWindowHitPromotes checks that a hit block outlives new blocks while
// the window is above its target.
func TestWindowHitPromotes(t *testing.T) {
	w := staticWindow(0.01).Factory()(100).(*Window)
	for h := Handle(0); h < 4; h++ {
		w.Insert(h, Meta{Hash: uint64(100 + h)})
	}
	w.Touch(0)
	if w.seg(0) != segMain {
		t.Fatal("a hit block must move to main")
	}
	for range 2 { // window holds 3 blocks, target 1: two window victims
		v, _ := w.Victim(nil)
		if v == 0 {
			t.Fatal("the hit block was evicted before the window shrank to its target")
		}
		w.Remove(v)
	}
}

func TestWindowChainTailFirst(t *testing.T) {
	p := staticWindow(0.5).Factory()(16)
	p.Insert(0, Meta{Hash: 10})
	p.Insert(1, Meta{Hash: 11, Parent: 10, HasParent: true})
	p.Insert(2, Meta{Hash: 12, Parent: 11, HasParent: true})
	p.Insert(3, Meta{Hash: 20}) // an unrelated request ends the walk
	var got []Handle
	for p.Len() > 1 {
		v, _ := p.Victim(func(h Handle) bool { return h != 3 })
		got = append(got, v)
		p.Remove(v)
	}
	if got[0] != 2 || got[1] != 1 || got[2] != 0 {
		t.Fatalf("victims %v, want tail first [2 1 0]", got)
	}
}

// TestWindowAdaptation checks the direction of the adaptation: blocks that
// return right after their eviction from the window grow the window's
// target; blocks that return right after eviction from main shrink it.
func TestWindowAdaptation(t *testing.T) {
	const n = 1000
	for _, fromMain := range []bool{false, true} {
		w := NewWindow(n).(*Window)
		start := w.WindowTarget()
		for i := range 50 {
			h := Handle(0)
			w.Insert(h, Meta{Hash: uint64(1000 + i)})
			if fromMain {
				w.Touch(h)
			}
			w.Remove(h)
			w.Insert(h, Meta{Hash: uint64(1000 + i)}) // returns at once
			w.Remove(h)
		}
		end := w.WindowTarget()
		if fromMain && end >= start || !fromMain && end <= start {
			t.Errorf("returns from main=%v: target %.0f -> %.0f, wrong direction", fromMain, start, end)
		}
	}
}

func TestGhostSet(t *testing.T) {
	g := newGhostSet(1000)
	for i := uint32(0); i < 400; i++ {
		g.add(i)
	}
	for i := uint32(0); i < 400; i++ {
		if !g.contains(i) {
			t.Fatalf("fingerprint %d forgotten within the span", i)
		}
	}
	fp := 0
	for i := uint32(1 << 20); i < 1<<20+10000; i++ {
		if g.contains(i) {
			fp++
		}
	}
	if fp > 600 { // the design rate is about 3%
		t.Fatalf("%d of 10000 unseen fingerprints reported seen", fp)
	}
	for i := uint32(10000); i < 11000; i++ { // two generations later
		g.add(i)
	}
	old := 0
	for i := uint32(0); i < 400; i++ {
		if g.contains(i) {
			old++
		}
	}
	if old > 40 {
		t.Fatalf("%d of 400 fingerprints remembered beyond the span", old)
	}
}

func TestWindowConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		mod func(*WindowConfig)
		ok  bool
	}{
		{func(*WindowConfig) {}, true},
		{func(c *WindowConfig) { c.WindowFraction = 0 }, false},
		{func(c *WindowConfig) { c.WindowFraction = 1.5 }, false},
		{func(c *WindowConfig) { c.GhostSpan = 0 }, false},
		{func(c *WindowConfig) { c.GhostMargin = 2 }, false},
		{func(c *WindowConfig) { c.Step = 0 }, false},
		{func(c *WindowConfig) { c.Adaptive = false; c.Step = 0 }, true},
	} {
		c := DefaultWindowConfig()
		tc.mod(&c)
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: err %v, want ok=%v", c, err, tc.ok)
		}
	}
}

// TestWindowFitsCapacityFromFirstEviction builds Window with a hint far from
// the real capacity (the DRAM tier guesses it from bytes, for 256 KiB
// blocks), fills a tier of 2000 blocks, hits 100 of them and then scans 4000
// new blocks through it. At the first eviction the window target must be 10%
// of the real capacity, and the hit blocks, in main, must survive the scan:
// with the target sized from a hint of 20000 blocks (2000, the whole tier)
// victims would come from main first. With an exact hint (the simulator's
// case) nothing moves.
func TestWindowFitsCapacityFromFirstEviction(t *testing.T) {
	const capacity, hot, scan = 2000, 100, 4000
	for _, tc := range []struct {
		name string
		hint int
	}{
		{"hint larger than the tier", 10 * capacity},
		{"hint smaller than the tier", capacity / 8},
		{"exact hint", capacity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWindow(DefaultWindowConfig(), tc.hint)
			for h := range capacity {
				w.Insert(Handle(h), Meta{Hash: uint64(100 + h)})
			}
			for h := range hot {
				w.Touch(Handle(h))
			}
			for i := range scan {
				v, ok := w.Victim(nil)
				if !ok {
					t.Fatal("no victim in a full tier")
				}
				if i == 0 && (w.capacity != capacity || w.WindowTarget() != 0.1*capacity) {
					t.Fatalf("at the first eviction: capacity %d, target %.2f; want %d, %d", w.capacity, w.WindowTarget(), capacity, capacity/10)
				}
				if v < hot {
					t.Fatalf("scan block %d evicted hit block %d (window target %.1f of capacity %d)", i, v, w.WindowTarget(), w.capacity)
				}
				w.Remove(v)
				w.Insert(v, Meta{Hash: uint64(1_000_000 + i)})
			}
			if w.Len() != capacity {
				t.Fatalf("Len %d, want %d", w.Len(), capacity)
			}
		})
	}
}

// TestWindowParentlessStream puts blocks without parents (a client that
// sends no chain information) through Window: none may be tail-demoted, so
// victims come oldest first, as in LRU. Once most inserts carry a parent, a
// parentless block followed by an unrelated insert is a one-block walk and
// is demoted to the eviction end.
func TestWindowParentlessStream(t *testing.T) {
	w := newWindow(DefaultWindowConfig(), 8)
	for h := range 8 {
		w.Insert(Handle(h), Meta{Hash: uint64(100 + h)})
	}
	for want := range 4 {
		v, ok := w.Victim(nil)
		if !ok || v != Handle(want) {
			t.Fatalf("parentless stream: victim %d (%v), want %d, the oldest", v, ok, want)
		}
		w.Remove(v)
	}

	w = newWindow(DefaultWindowConfig(), 16)
	h := 0
	for c := range 3 { // three 3-block walks
		for i := range 3 {
			m := Meta{Hash: uint64(1000 + 10*c + i)}
			if i > 0 {
				m.Parent, m.HasParent = m.Hash-1, true
			}
			w.Insert(Handle(h), m)
			h++
		}
	}
	lone := Handle(h)
	w.Insert(lone, Meta{Hash: 5000}) // a one-block walk
	w.Insert(lone+1, Meta{Hash: 6000})
	if v, ok := w.Victim(nil); !ok || v != lone {
		t.Fatalf("chained stream: victim %d (%v), want the one-block walk %d", v, ok, lone)
	}
}

// TestWindowSkipsAndClasses checks the two rules the DRAM tier relies on:
// the lowest priority class that has an evictable block gives the victim,
// and blocks the tier says are not evictable (pinned, leased) are skipped
// in either segment.
func TestWindowSkipsAndClasses(t *testing.T) {
	w := newWindow(DefaultWindowConfig(), 8)
	for h := range 8 {
		w.Insert(Handle(h), Meta{Hash: uint64(100 + h), Priority: uint8(h / 4)}) // 0-3 class 0, 4-7 class 1
	}
	w.Touch(0) // into main
	w.Touch(5)
	held := map[Handle]bool{1: true, 2: true, 3: true, 4: true}
	evictable := func(h Handle) bool { return !held[h] }
	for _, want := range []Handle{0, 6, 7, 5} {
		v, ok := w.Victim(evictable)
		if !ok || v != want {
			t.Fatalf("victim %d (%v), want %d", v, ok, want)
		}
		w.Remove(v)
	}
	if v, ok := w.Victim(evictable); ok {
		t.Fatalf("victim %d although every remaining block is held", v)
	}
	if w.Len() != 4 {
		t.Fatalf("Len %d, want 4", w.Len())
	}
}
