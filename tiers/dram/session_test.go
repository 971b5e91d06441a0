package dram

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TestReadRetainAndSessionRelease: with the hint-aware default policy, a
// read's retain window (block.GetOptions.Retain on Get, or Retain as LOOKUP does)
// keeps an otherwise oldest block past an eviction, and ending a session
// makes its own block (not its shared one) the next victim.
func TestReadRetainAndSessionRelease(t *testing.T) {
	const size = PageSize
	ctx := context.Background()
	type op func(t *testing.T, tr *Tier)
	get := func(i int, retain time.Duration) op {
		return func(t *testing.T, tr *Tier) {
			ref, err := tr.Get(ctx, key(i), block.GetOptions{Retain: retain})
			if err != nil {
				t.Fatal(err)
			}
			ref.Release()
		}
	}
	sess7 := block.PutOptions{Reuse: block.ReuseSession, Retain: time.Minute, Session: 7}
	sess8 := block.PutOptions{Reuse: block.ReuseSession, Retain: time.Minute, Session: 8}
	shared7 := block.PutOptions{Reuse: block.ReuseShared, Retain: time.Minute, Session: 7}
	for _, tc := range []struct {
		name     string
		puts     []block.PutOptions // blocks 0.. in order
		ops      []op               // after the puts, 10 s later
		release  uint64             // session ended before block 3 is put (0: none)
		released int
		evicted  int
	}{
		{name: "oldest goes", puts: []block.PutOptions{{}, {}, {}}, ops: []op{get(0, 0), get(1, 0), get(2, 0)}, evicted: 0},
		{name: "a read with a retain window keeps it", puts: []block.PutOptions{{}, {}, {}}, ops: []op{get(0, time.Minute), get(1, 0), get(2, 0)}, evicted: 1},
		{name: "a lookup's retain keeps it", puts: []block.PutOptions{{}, {}, {}}, ops: []op{
			func(t *testing.T, tr *Tier) {
				if !tr.Retain(key(0), time.Minute) || tr.Retain(key(9), time.Minute) {
					t.Fatal("Retain on a resident / missing block")
				}
			}}, evicted: 1},
		{name: "live sessions: the oldest own block goes", puts: []block.PutOptions{sess8, shared7, sess7}, evicted: 0},
		{name: "ended session: its own block goes", puts: []block.PutOptions{sess8, shared7, sess7}, release: 7, released: 1, evicted: 2},
		{name: "an unknown session releases nothing", puts: []block.PutOptions{sess8, shared7, sess7}, release: 9, evicted: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, now := windowTier(t, 3*size)
			for i, o := range tc.puts {
				if err := put(t, tr, key(i), payload(uint64(i), size), o); err != nil {
					t.Fatal(err)
				}
				*now = now.Add(time.Second)
			}
			*now = now.Add(10 * time.Second)
			for _, o := range tc.ops {
				o(t, tr)
			}
			if tc.release != 0 {
				n, err := tr.ReleaseSession(ctx, "default", tc.release)
				if err != nil || n != tc.released {
					t.Fatalf("ReleaseSession: %d blocks, %v; want %d", n, err, tc.released)
				}
			}
			if _, err := tr.ReleaseSession(ctx, "default", 0); !errors.Is(err, block.ErrInvalidArgument) {
				t.Fatalf("session 0: %v", err)
			}
			if err := put(t, tr, key(3), payload(3, size), block.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			for i := range 4 {
				if got := tr.Contains(key(i)); got == (i == tc.evicted) {
					t.Errorf("block %d resident %v; want block %d evicted", i, got, tc.evicted)
				}
			}
		})
	}
}
