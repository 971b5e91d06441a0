package policy

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TestHintedWithoutHintsIsInner: with no hint on any block, Hinted makes
// exactly its inner policy's choices, op for op, over a random workload
// with pinned (non-evictable) blocks.
func TestHintedWithoutHintsIsInner(t *testing.T) {
	for _, name := range []string{"lru", "window-nohints", "s3fifo", "duel-nohints"} {
		t.Run(name, func(t *testing.T) {
			f, err := Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			const capacity = 64
			plain, hinted := f(capacity), DefaultHintConfig().Factory(f)(capacity)
			rng := rand.New(rand.NewPCG(1, 2))
			resident := map[Handle]bool{}
			free := []Handle{}
			next := Handle(0)
			evictable := func(h Handle) bool { return h%7 != 3 }
			for op := range 20000 {
				hinted.(Clocked).SetNow(int64(op))
				if len(resident) >= capacity {
					a, okA := plain.Victim(evictable)
					b, okB := hinted.Victim(evictable)
					if a != b || okA != okB {
						t.Fatalf("op %d: victim %d,%v from %s, %d,%v from the hinted one", op, a, okA, name, b, okB)
					}
					plain.Remove(a)
					hinted.Remove(b)
					delete(resident, a)
					free = append(free, a)
					continue
				}
				if len(resident) > 0 && rng.IntN(3) == 0 {
					for h := range resident { // a random resident block is hit
						plain.Touch(h)
						hinted.Touch(h)
						break
					}
					continue
				}
				h := next
				if len(free) > 0 {
					h, free = free[len(free)-1], free[:len(free)-1]
				} else {
					next++
				}
				m := Meta{Hash: rng.Uint64N(200), Parent: rng.Uint64N(200), HasParent: rng.IntN(2) == 0, Priority: uint8(rng.IntN(2))}
				plain.Insert(h, m)
				hinted.Insert(h, m)
				resident[h] = true
			}
			if plain.Len() != hinted.Len() {
				t.Fatalf("Len %d vs %d", plain.Len(), hinted.Len())
			}
		})
	}
}

func TestHintedOrder(t *testing.T) {
	const sec = int64(1e9)
	for _, tc := range []struct {
		name  string
		cfg   func(*HintConfig)
		metas []Meta // inserted as handles 0.. at time 0
		touch []Handle
		now   int64 // the time of the victim choice
		want  []Handle
	}{
		{
			name:  "no hints: LRU order",
			metas: []Meta{{Hash: 1}, {Hash: 2}, {Hash: 3}},
			want:  []Handle{0, 1, 2},
		},
		{
			name:  "reuse never goes first, oldest first",
			metas: []Meta{{Hash: 1}, {Hash: 2, Reuse: block.ReuseNever}, {Hash: 3}, {Hash: 4, Reuse: block.ReuseNever}},
			want:  []Handle{1, 3, 0, 2},
		},
		{
			name:  "reuse never ahead of a lower priority class",
			metas: []Meta{{Hash: 1}, {Hash: 2, Priority: 5, Reuse: block.ReuseNever}},
			want:  []Handle{1, 0},
		},
		{
			name:  "ephemeral off: reuse never is ordinary",
			cfg:   func(c *HintConfig) { c.Ephemeral = false },
			metas: []Meta{{Hash: 1}, {Hash: 2, Reuse: block.ReuseNever}, {Hash: 3}},
			want:  []Handle{0, 1, 2},
		},
		{
			name:  "retained blocks outlive unhinted ones within their window",
			metas: []Meta{{Hash: 1, Retain: 10 * sec}, {Hash: 2, Reuse: block.ReuseSession, Retain: 5 * sec}, {Hash: 3}, {Hash: 4}},
			now:   4 * sec,
			want:  []Handle{2, 3, 0, 1},
		},
		{
			name:  "a lapsed retain window is no protection",
			metas: []Meta{{Hash: 1, Retain: 10 * sec}, {Hash: 2, Reuse: block.ReuseSession, Retain: 5 * sec}, {Hash: 3}},
			now:   6 * sec,
			want:  []Handle{1, 2, 0},
		},
		{
			name:  "session without a window gets the default one",
			metas: []Meta{{Hash: 1, Reuse: block.ReuseSession}, {Hash: 2}},
			now:   29 * sec,
			want:  []Handle{1, 0},
		},
		{
			name:  "default window lapses",
			metas: []Meta{{Hash: 1, Reuse: block.ReuseSession}, {Hash: 2}},
			now:   31 * sec,
			want:  []Handle{0, 1},
		},
		{
			name:  "soft pin off: LRU order",
			cfg:   func(c *HintConfig) { c.SoftPin = false },
			metas: []Meta{{Hash: 1, Retain: 10 * sec}, {Hash: 2}},
			now:   sec,
			want:  []Handle{0, 1},
		},
		{
			name:  "shared without a window has no default one, only its class",
			metas: []Meta{{Hash: 1}, {Hash: 2, Reuse: block.ReuseShared}, {Hash: 3, Priority: 1}},
			now:   sec,
			want:  []Handle{0, 1, 2},
		},
		{
			name:  "shared blocks outlive session blocks after the windows lapse",
			metas: []Meta{{Hash: 1, Reuse: block.ReuseShared}, {Hash: 2, Reuse: block.ReuseSession}, {Hash: 3}},
			now:   60 * sec,
			want:  []Handle{1, 2, 0},
		},
		{
			name:  "a hit revives a reuse-never block",
			metas: []Meta{{Hash: 1}, {Hash: 2, Reuse: block.ReuseNever}, {Hash: 3}},
			touch: []Handle{1},
			want:  []Handle{0, 2, 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultHintConfig()
			if tc.cfg != nil {
				tc.cfg(&c)
			}
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			p := c.Factory(NewLRU)(8)
			p.(Clocked).SetNow(0)
			for i, m := range tc.metas {
				p.Insert(Handle(i), m)
			}
			for _, h := range tc.touch {
				p.Touch(h)
			}
			if p.Len() != len(tc.metas) {
				t.Fatalf("Len %d, want %d", p.Len(), len(tc.metas))
			}
			p.(Clocked).SetNow(tc.now)
			if got := drain(p, nil); !slices.Equal(got, tc.want) {
				t.Fatalf("victims %v, want %v", got, tc.want)
			}
			if p.Len() != 0 {
				t.Fatalf("Len %d after draining", p.Len())
			}
		})
	}
}

// TestHintedSoftPinYieldsWhenNothingElse: retained blocks are evicted when
// every other block is pinned or leased, so a put never fails for a soft pin.
func TestHintedSoftPinYieldsWhenNothingElse(t *testing.T) {
	p := DefaultHintConfig().Wrap(NewLRU(4))
	p.SetNow(0)
	p.Insert(0, Meta{Hash: 1, Retain: 1e12})
	p.Insert(1, Meta{Hash: 2})
	h, ok := p.Victim(func(h Handle) bool { return h != 1 })
	if !ok || h != 0 {
		t.Fatalf("victim %d, %v; want the retained block 0", h, ok)
	}
}

func TestHintedRearmOnTouch(t *testing.T) {
	for _, rearm := range []bool{true, false} {
		c := DefaultHintConfig()
		c.RearmOnTouch = rearm
		p := c.Wrap(NewLRU(4))
		p.SetNow(0)
		p.Insert(0, Meta{Hash: 1, Retain: 10})
		p.Insert(1, Meta{Hash: 2})
		p.SetNow(8)
		p.Touch(0) // re-armed: retained until 18
		p.Touch(1) // block 1 is now the more recent
		p.SetNow(15)
		want := []Handle{1, 0}
		if !rearm {
			want = []Handle{0, 1}
		}
		if got := drain(p, nil); !slices.Equal(got, want) {
			t.Fatalf("rearm=%v: victims %v, want %v", rearm, got, want)
		}
	}
}

func TestHintedRelease(t *testing.T) {
	p := DefaultHintConfig().Wrap(NewLRU(4))
	p.Insert(0, Meta{Hash: 1})
	p.Insert(1, Meta{Hash: 2, Reuse: block.ReuseShared})
	p.Insert(2, Meta{Hash: 3})
	p.Release(2) // the session ended: its own block goes first
	p.Release(1) // a shared block stays
	if !p.Cold(2) || p.Cold(1) {
		t.Fatalf("cold: 2 %v, 1 %v", p.Cold(2), p.Cold(1))
	}
	if got := drain(p, nil); !slices.Equal(got, []Handle{2, 0, 1}) {
		t.Fatalf("victims %v", got)
	}
}

func TestHintConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		mod func(*HintConfig)
		ok  bool
	}{
		{func(*HintConfig) {}, true},
		{func(c *HintConfig) { c.SharedClass = block.MaxPriority }, true},
		{func(c *HintConfig) { c.SharedClass = block.MaxPriority + 1 }, false},
		{func(c *HintConfig) { c.DefaultRetain = -1 }, false},
	} {
		c := DefaultHintConfig()
		tc.mod(&c)
		if err := c.Validate(); (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrConfig)) {
			t.Errorf("%+v: Validate = %v, want ok=%v", c, err, tc.ok)
		}
	}
}
