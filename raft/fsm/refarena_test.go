package fsm

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	hraft "github.com/hashicorp/raft"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// noPointers reports the path of the first field of t that holds a pointer
// (a pointer, slice, map, string, interface, channel or function), or "".
func noPointers(t reflect.Type, path string) string {
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if p := noPointers(f.Type, path+"."+f.Name); p != "" {
				return p
			}
		}
		return ""
	case reflect.Array:
		return noPointers(t.Elem(), path+"[]")
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return ""
	}
	return path + " (" + t.Kind().String() + ")"
}

// The index's leaves and the arena's chunks must hold no pointer: the
// garbage collector then skips them, however many entries the index
// holds. A slot stays 64 bytes.
func TestIndexMemoryHoldsNoPointers(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[slot](), reflect.TypeFor[[refChunk]shardRef]()} {
		if p := noPointers(typ, typ.String()); p != "" {
			t.Errorf("%s holds a pointer at %s: the collector would scan every entry", typ, p)
		}
	}
	if sz := reflect.TypeFor[slot]().Size(); sz != 64 {
		t.Errorf("a slot is %d bytes, want 64", sz)
	}
}

// Runs of every length read back as written, never cross a chunk, and the
// tails skipped to keep them whole count as dead.
func TestRefArenaRuns(t *testing.T) {
	var a refArena
	type run struct {
		off uint32
		ref []shardRef
	}
	var runs []run
	var skipped uint32
	for i := range 3000 {
		k := i%255 + 1
		before := a.n
		off, dst := a.alloc(k)
		if len(dst) != k || cap(dst) != k {
			t.Fatalf("run %d: %d references (cap %d), want %d", i, len(dst), cap(dst), k)
		}
		if off/refChunk != (off+uint32(k)-1)/refChunk {
			t.Fatalf("run %d at %d of %d references crosses a chunk", i, off, k)
		}
		skipped += off - before
		for j := range dst {
			dst[j] = shardRef{node: uint32(i), index: uint16(j)}
		}
		runs = append(runs, run{off, slices.Clone(dst)})
	}
	if a.dead != skipped || skipped == 0 {
		t.Fatalf("dead %d, skipped tails %d (some must have been skipped)", a.dead, skipped)
	}
	for i, r := range runs {
		if got := a.get(r.off, len(r.ref)); !slices.Equal(got, r.ref) {
			t.Fatalf("run %d reads back %v, wrote %v", i, got[:2], r.ref[:2])
		}
	}
	sl := slot{shards: 4}
	a.release(&sl)
	if a.dead != skipped+3 {
		t.Fatalf("releasing a 4-shard placement: dead %d, want %d", a.dead, skipped+3)
	}
}

// Placement changes and deletes of replicated entries leave dead runs;
// once they outnumber the live ones the arena is compacted. Every entry
// reads back as last written, and a state published before the compaction
// still reads its own placements.
func TestRefArenaCompaction(t *testing.T) {
	const entries = 2000
	f := New(nil)
	idx := uint64(0)
	apply := func(ops []Op) {
		t.Helper()
		for lo := 0; lo < len(ops); lo += 256 {
			idx++
			r := f.Apply(&hraft.Log{Index: idx, Type: hraft.LogCommand, Data: EncodeIndex(ops[lo:min(lo+256, len(ops))])}).(*Response)
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			for i, res := range r.Results {
				if res.Status != StatusCreated && res.Status != StatusUpdated && res.Status != StatusDeleted {
					t.Fatalf("op %d: status %v", lo+i, res.Status)
				}
			}
		}
	}
	placement := func(i, round int) []Shard {
		p := make([]Shard, 3+(i+round)%3)
		for c := range p {
			p[c] = Shard{NodeID: fmt.Sprintf("n%d", (i+c+round)%7), Index: uint16(c)}
		}
		return p
	}
	key := func(i int) block.Key { return block.NewKey(block.DefaultNamespace, uint64(i)*0x9e3779b97f4a7c15|1) }
	var ops []Op
	for i := range entries {
		ops = append(ops, PutOp(key(i), Entry{Size: 10, Sum: uint32(i), Placement: placement(i, 0)}))
	}
	apply(ops)
	want := map[int][]Shard{}
	for i := range entries {
		want[i] = placement(i, 0)
	}
	// checkState fails unless st, a published state, reads every entry of w.
	checkState := func(what string, st *state, w map[int][]Shard) {
		t.Helper()
		for i, p := range w {
			sl, ok := st.index[block.DefaultNamespace].get(keyOf(key(i)))
			if !ok {
				t.Fatalf("%s lost entry %d", what, i)
			}
			if got := sl.entry(st).Placement; !slices.Equal(got, p) {
				t.Fatalf("%s reads entry %d as %v, had %v", what, i, got, p)
			}
		}
	}
	firstState, firstWant := f.cur.Load(), cloneWant(want)

	compactions, lastN := 0, f.cur.Load().refs.n
	for round := 1; compactions < 2; round++ {
		prevState, prevWant := f.cur.Load(), cloneWant(want)
		if round > 200 {
			t.Fatalf("no second compaction after %d rounds (arena %d references, %d dead)", round, f.cur.Load().refs.n, f.cur.Load().refs.dead)
		}
		ops = ops[:0]
		for i := range entries {
			if i%50 == round%50 {
				if _, ok := want[i]; ok {
					ops = append(ops, DeleteOp(key(i), 0))
					delete(want, i)
					continue
				}
				ops = append(ops, PutOp(key(i), Entry{Size: 10, Sum: uint32(i), Placement: placement(i, round)}))
				want[i] = placement(i, round)
				continue
			}
			if _, ok := want[i]; ok {
				ops = append(ops, PlaceOp(key(i), uint32(i), placement(i, round)))
				want[i] = placement(i, round)
			}
		}
		apply(ops)
		if n := f.cur.Load().refs.n; n < lastN {
			compactions++
			checkState(fmt.Sprintf("the state published just before compaction %d", compactions), prevState, prevWant)
		}
		lastN = f.cur.Load().refs.n
	}
	s := f.cur.Load()
	live := uint32(0)
	for _, p := range want {
		live += uint32(len(p) - 1)
	}
	if s.refs.n-s.refs.dead != live || s.refs.n > 2*live+refChunk+compactMinDead {
		t.Fatalf("after compaction: %d references, %d dead, %d live wanted", s.refs.n, s.refs.dead, live)
	}
	if f.Len() != len(want) {
		t.Fatalf("index holds %d entries, want %d", f.Len(), len(want))
	}
	for i, p := range want {
		e, ok := f.Lookup(key(i))
		if !ok || !slices.Equal(e.Placement, p) || e.Sum != uint32(i) {
			t.Fatalf("entry %d: %v %+v, want placement %v", i, ok, e, p)
		}
	}
	checkState("the first state published", firstState, firstWant)
}

func cloneWant(m map[int][]Shard) map[int][]Shard {
	out := make(map[int][]Shard, len(m))
	for k, v := range m {
		out[k] = slices.Clone(v)
	}
	return out
}
