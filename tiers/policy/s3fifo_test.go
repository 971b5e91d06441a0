package policy

import "testing"

// drain evicts until Victim reports none and returns the victims in order.
func drain(p Policy, evictable func(Handle) bool) []Handle {
	var got []Handle
	for {
		h, ok := p.Victim(evictable)
		if !ok {
			return got
		}
		got = append(got, h)
		p.Remove(h)
	}
}

func TestS3FIFOOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		touch   []Handle
		pinned  map[Handle]bool
		victims []Handle
	}{
		// 10 blocks, S holds >= 1 block (10%): all in S; untouched ones go
		// in FIFO order, a touched one is promoted to M and leaves last.
		{"fifo without hits", nil, nil, []Handle{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{"hit promotes to main", []Handle{0}, nil, []Handle{1, 2, 3, 4, 5, 6, 7, 8, 9, 0}},
		// 0 and 1 are promoted in S's order (counters reset) and M is a
		// FIFO: touch order does not matter.
		{"main is fifo", []Handle{1, 0, 0}, nil, []Handle{2, 3, 4, 5, 6, 7, 8, 9, 0, 1}},
		{"pinned blocks stay", nil, map[Handle]bool{3: true, 5: true}, []Handle{0, 1, 2, 4, 6, 7, 8, 9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewS3FIFO(10)
			for h := Handle(0); h < 10; h++ {
				p.Insert(h, Meta{Hash: uint64(h) + 100})
			}
			for _, h := range tc.touch {
				p.Touch(h)
			}
			got := drain(p, func(h Handle) bool { return !tc.pinned[h] })
			if len(got) != len(tc.victims) {
				t.Fatalf("victims %v, want %v", got, tc.victims)
			}
			for i := range got {
				if got[i] != tc.victims[i] {
					t.Fatalf("victims %v, want %v", got, tc.victims)
				}
			}
			if p.Len() != len(tc.pinned) {
				t.Fatalf("%d blocks left, want the %d pinned", p.Len(), len(tc.pinned))
			}
		})
	}
}

// TestS3FIFOMainReinsertion: a block of M with a positive counter is moved
// to M's head with the counter decremented, so a block hit three times
// survives the scans that evict the blocks hit fewer times.
func TestS3FIFOMainReinsertion(t *testing.T) {
	p := NewS3FIFO(10)
	for h := Handle(0); h < 4; h++ {
		p.Insert(h, Meta{Hash: uint64(h) + 1})
		p.Touch(h)
	}
	// S is above its share (4 >= 1): all four were hit and move to M with
	// counters reset; S is then empty and M's oldest, 0, is proposed.
	if h, ok := p.Victim(nil); !ok || h != 0 {
		t.Fatalf("first victim %d %v, want 0", h, ok)
	}
	p.Touch(0)
	p.Touch(0) // 0 is not removed: hit twice in M, it is reinserted
	got := drain(p, nil)
	want := []Handle{1, 2, 3, 0}
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			t.Fatalf("victims %v, want %v", got, want)
		}
	}
}

// TestS3FIFOGhostAdmitsToMain: a block evicted from S and inserted again
// while the ghost remembers it enters M and outlives new S blocks.
func TestS3FIFOGhostAdmitsToMain(t *testing.T) {
	p := NewS3FIFO(10)
	p.Insert(0, Meta{Hash: 42})
	if h, ok := p.Victim(nil); !ok || h != 0 {
		t.Fatalf("victim %d %v", h, ok)
	}
	p.Remove(0)
	p.Insert(0, Meta{Hash: 42}) // back: ghost hit, goes to main
	for h := Handle(1); h < 10; h++ {
		p.Insert(h, Meta{Hash: uint64(h) + 1000})
	}
	got := drain(p, nil)
	if got[len(got)-1] != 0 {
		t.Fatalf("victims %v: the ghost-admitted block should leave last", got)
	}
}

func TestS3FIFONamed(t *testing.T) {
	if _, err := Lookup("s3fifo"); err != nil {
		t.Fatal(err)
	}
}
