package chunked

import "testing"

// TestArray: handles are dense from 0, records start zero, survive growth
// at the same address, and Grow fills the gap up to a handle.
func TestArray(t *testing.T) {
	for _, tc := range []struct {
		name string
		add  int    // records added with Add
		grow uint32 // then Grow to this handle
		want int    // Len after
	}{
		{"empty", 0, 0, 1},
		{"within a chunk", 10, 5, 10},
		{"past a chunk by Add", ChunkLen + 1, 0, ChunkLen + 1},
		{"past chunks by Grow", 3, 3*ChunkLen + 7, 3*ChunkLen + 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a Array[[2]uint64]
			for i := range tc.add {
				if h := a.Add(); h != uint32(i) {
					t.Fatalf("Add #%d gave handle %d", i, h)
				}
				*a.At(uint32(i)) = [2]uint64{uint64(i), ^uint64(i)}
			}
			var first *[2]uint64
			if tc.add > 0 {
				first = a.At(0)
			}
			a.Grow(tc.grow)
			if a.Len() != tc.want {
				t.Fatalf("Len %d, want %d", a.Len(), tc.want)
			}
			if first != nil && first != a.At(0) {
				t.Fatal("record 0 moved when the array grew")
			}
			for i := range a.Len() {
				r := *a.At(uint32(i))
				want := [2]uint64{}
				if i < tc.add {
					want = [2]uint64{uint64(i), ^uint64(i)}
				}
				if r != want {
					t.Fatalf("record %d = %v, want %v", i, r, want)
				}
			}
		})
	}
}
