package policy

import "testing"

func TestLRUOrderWithinAndAcrossClasses(t *testing.T) {
	l := NewLRU(0)
	// Handles 0..3 in class 1, 4..5 in class 0 (evicted first).
	for h := Handle(0); h < 4; h++ {
		l.Insert(h, Meta{Priority: 1})
	}
	l.Insert(4, Meta{Priority: 0})
	l.Insert(5, Meta{Priority: 0})
	l.Touch(0) // 0 becomes most recent in class 1: order (old→new) 1,2,3,0
	pinned := map[Handle]bool{1: true}
	var got []Handle
	for l.Len() > 0 {
		h, ok := l.Victim(func(h Handle) bool { return !pinned[h] })
		if !ok {
			break
		}
		got = append(got, h)
		l.Remove(h)
	}
	want := []Handle{4, 5, 2, 3, 0}
	if len(got) != len(want) {
		t.Fatalf("victims %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("victims %v, want %v", got, want)
		}
	}
	if l.Len() != 1 {
		t.Fatalf("pinned block should remain tracked, len=%d", l.Len())
	}
	if _, ok := l.Victim(func(h Handle) bool { return !pinned[h] }); ok {
		t.Fatal("only a pinned block is left; Victim must report none")
	}
}

func TestLRUHandleReuse(t *testing.T) {
	l := NewLRU(2)
	l.Insert(0, Meta{})
	l.Insert(1, Meta{})
	l.Remove(0)
	l.Insert(0, Meta{Priority: 3})
	h, ok := l.Victim(nil)
	if !ok || h != 1 {
		t.Fatalf("victim %d,%v want 1 (class 0 before class 3)", h, ok)
	}
}
