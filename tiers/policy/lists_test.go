package policy

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// walk returns list i from head to tail, checking that the back links and
// the count agree with the forward links.
func walk(t *testing.T, l *handleLists, i int) []uint32 {
	t.Helper()
	var fwd []uint32
	for h := l.head[i]; h != nilHandle; h = l.next[h] {
		fwd = append(fwd, h)
		if len(fwd) > len(l.prev) {
			t.Fatalf("list %d: cycle", i)
		}
	}
	var back []uint32
	for h := l.tail[i]; h != nilHandle; h = l.prev[h] {
		back = append(back, h)
		if len(back) > len(l.prev) {
			t.Fatalf("list %d: back cycle", i)
		}
	}
	slices.Reverse(back)
	if !slices.Equal(fwd, back) {
		t.Fatalf("list %d: forward %v, backward %v", i, fwd, back)
	}
	if l.count[i] != len(fwd) {
		t.Fatalf("list %d: count %d, %d linked", i, l.count[i], len(fwd))
	}
	return fwd
}

func TestHandleLists(t *testing.T) {
	type op struct {
		kind    string // front, back, after, unlink
		list    int
		h, a    uint32
		want    []uint32 // list `list` after the op, head first
		wantOth []uint32 // list 1 after the op
	}
	tests := []struct {
		name string
		ops  []op
	}{
		{"front", []op{
			{kind: "front", h: 0, want: []uint32{0}},
			{kind: "front", h: 1, want: []uint32{1, 0}},
			{kind: "front", h: 2, want: []uint32{2, 1, 0}},
		}},
		{"back", []op{
			{kind: "back", h: 0, want: []uint32{0}},
			{kind: "back", h: 1, want: []uint32{0, 1}},
			{kind: "front", h: 2, want: []uint32{2, 0, 1}},
		}},
		{"after middle and tail", []op{
			{kind: "front", h: 0, want: []uint32{0}},
			{kind: "after", h: 1, a: 0, want: []uint32{0, 1}},
			{kind: "after", h: 2, a: 0, want: []uint32{0, 2, 1}},
			{kind: "after", h: 3, a: 1, want: []uint32{0, 2, 1, 3}},
		}},
		{"unlink head middle tail last", []op{
			{kind: "back", h: 0, want: []uint32{0}},
			{kind: "back", h: 1, want: []uint32{0, 1}},
			{kind: "back", h: 2, want: []uint32{0, 1, 2}},
			{kind: "back", h: 3, want: []uint32{0, 1, 2, 3}},
			{kind: "unlink", h: 1, want: []uint32{0, 2, 3}},
			{kind: "unlink", h: 0, want: []uint32{2, 3}},
			{kind: "unlink", h: 3, want: []uint32{2}},
			{kind: "unlink", h: 2, want: nil},
			{kind: "front", h: 3, want: []uint32{3}},
		}},
		{"lists are independent", []op{
			{kind: "front", h: 0, want: []uint32{0}},
			{kind: "front", list: 1, h: 1, want: []uint32{1}, wantOth: []uint32{1}},
			{kind: "back", list: 1, h: 2, want: []uint32{1, 2}, wantOth: []uint32{1, 2}},
			{kind: "unlink", h: 0, want: nil, wantOth: []uint32{1, 2}},
			{kind: "after", list: 1, h: 0, a: 1, want: []uint32{1, 0, 2}, wantOth: []uint32{1, 0, 2}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newHandleLists(2)
			for k, o := range tt.ops {
				l.grow(Handle(max(o.h, o.a)))
				switch o.kind {
				case "front":
					l.pushFront(o.list, o.h)
				case "back":
					l.pushBack(o.list, o.h)
				case "after":
					l.insertAfter(o.list, o.h, o.a)
				case "unlink":
					l.unlink(o.list, o.h)
				}
				if got := walk(t, &l, o.list); !slices.Equal(got, o.want) {
					t.Fatalf("op %d %s(%d): list %v, want %v", k, o.kind, o.h, got, o.want)
				}
				if got := walk(t, &l, 1); !slices.Equal(got, o.wantOth) {
					t.Fatalf("op %d: list 1 %v, want %v", k, got, o.wantOth)
				}
			}
		})
	}
}

func TestHandleListsScan(t *testing.T) {
	tests := []struct {
		name      string
		refuse    map[uint32]bool
		wantH     uint32
		wantOK    bool
		wantAfter []uint32
	}{
		{"nil accepts the tail", nil, 3, true, []uint32{0, 1, 2, 3}},
		{"refused tails move to the head", map[uint32]bool{3: true, 2: true}, 1, true, []uint32{2, 3, 0, 1}},
		{"all refused, each once", map[uint32]bool{0: true, 1: true, 2: true, 3: true}, 0, false, []uint32{0, 1, 2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newHandleLists(4)
			l.grow(3)
			for h := range uint32(4) {
				l.pushBack(0, h)
			}
			asked := map[Handle]int{}
			var ev func(Handle) bool
			if tt.refuse != nil {
				ev = func(h Handle) bool { asked[h]++; return !tt.refuse[uint32(h)] }
			}
			h, ok := l.scan(0, ev)
			if ok != tt.wantOK || (ok && uint32(h) != tt.wantH) {
				t.Fatalf("scan = %d, %v; want %d, %v", h, ok, tt.wantH, tt.wantOK)
			}
			for h, n := range asked {
				if n != 1 {
					t.Fatalf("handle %d asked %d times", h, n)
				}
			}
			if got := walk(t, &l, 0); !slices.Equal(got, tt.wantAfter) {
				t.Fatalf("after scan %v, want %v", got, tt.wantAfter)
			}
		})
	}
}

// TestHandleListsRandom checks the lists against a slice model under a
// random mix of every operation.
func TestHandleListsRandom(t *testing.T) {
	const n, lists = 64, 3
	rng := rand.New(rand.NewPCG(1, 2))
	l := newHandleLists(0)
	model := make([][]uint32, lists)
	where := map[uint32]int{}
	for range 20000 {
		h := uint32(rng.IntN(n))
		l.grow(Handle(h))
		if i, in := where[h]; in {
			l.unlink(i, h)
			model[i] = slices.DeleteFunc(model[i], func(x uint32) bool { return x == h })
			delete(where, h)
			continue
		}
		i := rng.IntN(lists)
		switch k := rng.IntN(3); {
		case k == 0 || len(model[i]) == 0:
			l.pushFront(i, h)
			model[i] = slices.Insert(model[i], 0, h)
		case k == 1:
			l.pushBack(i, h)
			model[i] = append(model[i], h)
		default:
			p := rng.IntN(len(model[i]))
			l.insertAfter(i, h, model[i][p])
			model[i] = slices.Insert(model[i], p+1, h)
		}
		where[h] = i
	}
	for i := range lists {
		if got := walk(t, &l, i); !slices.Equal(got, model[i]) {
			t.Fatalf("list %d: %v, model %v", i, got, model[i])
		}
	}
}
