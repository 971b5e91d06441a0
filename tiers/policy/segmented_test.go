package policy

import (
	"math/rand/v2"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

type policyCase struct {
	name string
	new  Factory
}

func allPolicies() []policyCase {
	var out []policyCase
	for _, n := range Names() {
		f, _ := Lookup(n)
		out = append(out, policyCase{n, f})
	}
	return out
}

// TestPolicyInvariants drives every policy with random operations against a
// reference model: Len matches, Victim only proposes tracked, evictable
// blocks of the lowest class that has an evictable block, and reports none
// exactly when none is evictable.
func TestPolicyInvariants(t *testing.T) {
	for _, pc := range allPolicies() {
		t.Run(pc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			p := pc.new(64)
			class := map[Handle]uint8{}
			pinned := map[Handle]bool{}
			var free []Handle
			next := Handle(0)
			var last uint64
			evictable := func(h Handle) bool { return !pinned[h] }
			for op := 0; op < 20000; op++ {
				switch r := rng.IntN(10); {
				case r < 4 || len(class) == 0:
					h := next
					if len(free) > 0 {
						h, free = free[len(free)-1], free[:len(free)-1]
					} else {
						next++
					}
					c := uint8(rng.IntN(3))
					hash := rng.Uint64()
					m := Meta{Hash: hash, Priority: c}
					if rng.IntN(2) == 0 {
						m.Parent, m.HasParent = last, true
					}
					last = hash
					p.Insert(h, m)
					class[h] = c
					pinned[h] = rng.IntN(8) == 0
				case r < 7:
					for h := range class {
						p.Touch(h)
						break
					}
				case r < 8:
					for h := range class {
						p.Remove(h)
						delete(class, h)
						delete(pinned, h)
						free = append(free, h)
						break
					}
				default:
					lowest := -1
					for h, c := range class {
						if !pinned[h] && (lowest < 0 || int(c) < lowest) {
							lowest = int(c)
						}
					}
					v, ok := p.Victim(evictable)
					if ok != (lowest >= 0) {
						t.Fatalf("op %d: Victim ok=%v, evictable blocks exist=%v", op, ok, lowest >= 0)
					}
					if !ok {
						continue
					}
					c, tracked := class[v]
					if !tracked || pinned[v] {
						t.Fatalf("op %d: victim %d tracked=%v pinned=%v", op, v, tracked, pinned[v])
					}
					if int(c) != lowest {
						t.Fatalf("op %d: victim in class %d, lowest evictable class is %d", op, c, lowest)
					}
					p.Remove(v)
					delete(class, v)
					delete(pinned, v)
					free = append(free, v)
				}
				if p.Len() != len(class) {
					t.Fatalf("op %d: Len %d, want %d", op, p.Len(), len(class))
				}
			}
		})
	}
}

func TestSegmentedEvictsTouchedLast(t *testing.T) {
	s := NewSegmented(16)
	for h := Handle(0); h < 4; h++ {
		s.Insert(h, Meta{Hash: uint64(100 + h)})
	}
	s.Touch(0) // 0 is now protected: evicted after every probation block
	var got []Handle
	for s.Len() > 0 {
		v, ok := s.Victim(nil)
		if !ok {
			t.Fatal("no victim with blocks tracked")
		}
		got = append(got, v)
		s.Remove(v)
	}
	if got[len(got)-1] != 0 {
		t.Fatalf("eviction order %v: the touched block must go last", got)
	}
}

func TestSegmentedChainTailFirst(t *testing.T) {
	cfg := DefaultSegmentedConfig()
	cfg.Adaptive = false
	s := cfg.Factory()(16)
	// One request: chain 10 -> 11 -> 12, inserted head first.
	s.Insert(0, Meta{Hash: 10})
	s.Insert(1, Meta{Hash: 11, Parent: 10, HasParent: true})
	s.Insert(2, Meta{Hash: 12, Parent: 11, HasParent: true})
	// A second, unrelated request ends the first chain walk.
	s.Insert(3, Meta{Hash: 20})
	var got []Handle
	for s.Len() > 1 {
		v, _ := s.Victim(func(h Handle) bool { return h != 3 })
		got = append(got, v)
		s.Remove(v)
	}
	want := []Handle{2, 1, 0}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("victims %v, want tail first %v", got, want)
		}
	}
}

func TestSegmentedConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		frac float64
		ok   bool
	}{{0, true}, {0.5, true}, {1, false}, {-0.1, false}} {
		c := DefaultSegmentedConfig()
		c.ProtectedFraction = tc.frac
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("ProtectedFraction %v: err %v, want ok=%v", tc.frac, err, tc.ok)
		}
	}
	if _, err := Lookup("nope"); err == nil {
		t.Error("Lookup of an unknown name must fail")
	}
}

func TestSketch(t *testing.T) {
	s := NewSketch(1024)
	for i := 0; i < 5; i++ {
		s.Record(42)
	}
	if got := s.Estimate(42); got != 5 {
		t.Fatalf("estimate %d, want 5", got)
	}
	// Unrelated hashes are rarely over-estimated at this load.
	over := 0
	for i := uint64(0); i < 2000; i++ {
		s.Record(1_000_000 + i)
	}
	for i := uint64(0); i < 2000; i++ {
		if s.Estimate(5_000_000+i) > 0 {
			over++
		}
	}
	if over > 100 {
		t.Fatalf("%d of 2000 unseen hashes estimated as seen", over)
	}
	a := NewSketchAdmitter(1024, 2)
	a.Record(7)
	if a.Admit(7) {
		t.Fatal("a block seen once must not be admitted with MinCount 2")
	}
	a.Record(7)
	if !a.Admit(7) {
		t.Fatal("a block seen twice must be admitted with MinCount 2")
	}
	var _ Admitter = a
}

func TestSegmentedClassesIndependentOfMaxPriority(t *testing.T) {
	s := NewSegmented(4)
	s.Insert(0, Meta{Hash: 1, Priority: block.MaxPriority + 5}) // clamped
	s.Insert(1, Meta{Hash: 2, Priority: 0})
	if v, _ := s.Victim(nil); v != 1 {
		t.Fatalf("victim %d, want the class-0 block", v)
	}
}
