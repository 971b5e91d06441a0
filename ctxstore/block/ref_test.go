package block

import "testing"

// countingLessor records what its Refs told it.
type countingLessor struct {
	ended, sent map[uint64]int
}

func (l *countingLessor) EndLease(h uint64)  { l.ended[h]++ }
func (l *countingLessor) LeaseSent(h uint64) { l.sent[h]++ }

func TestRefLease(t *testing.T) {
	tests := []struct {
		name      string
		releases  int
		fileRange bool
		wantEnded int
		wantSent  int
	}{
		{name: "released once", releases: 1, wantEnded: 1},
		{name: "released twice ends the lease once", releases: 2, wantEnded: 1},
		{name: "never released", releases: 0, wantEnded: 0},
		{name: "sent from the file", releases: 1, fileRange: true, wantEnded: 1, wantSent: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := &countingLessor{ended: map[uint64]int{}, sent: map[uint64]int{}}
			data := []byte("block bytes")
			ref := NewLeasedRef(data, 7, TierDRAM, l, 42, 9, 8192)
			if string(ref.Data) != "block bytes" || ref.Sum != 7 || ref.Tier != TierDRAM {
				t.Fatalf("ref = %q sum %d tier %s", ref.Data, ref.Sum, ref.Tier)
			}
			if tc.fileRange {
				fd, off, ok := ref.FileRange()
				if !ok || fd != 9 || off != 8192 {
					t.Fatalf("FileRange = %d, %d, %v; want 9, 8192, true", fd, off, ok)
				}
			}
			for range tc.releases {
				ref.Release()
			}
			if l.ended[42] != tc.wantEnded || l.sent[42] != tc.wantSent || len(l.ended) > 1 || len(l.sent) > 1 {
				t.Fatalf("ended %v sent %v; want lease 42 ended %d times, sent %d", l.ended, l.sent, tc.wantEnded, tc.wantSent)
			}
		})
	}
}

func TestNewRefWithoutLessor(t *testing.T) {
	released := 0
	ref := NewRef([]byte("x"), 1, TierNVMe, func() { released++ })
	if _, _, ok := ref.FileRange(); ok {
		t.Fatal("FileRange ok on a Ref without a file")
	}
	ref.Release()
	ref.Release()
	if released != 1 {
		t.Fatalf("release ran %d times, want 1", released)
	}
}
