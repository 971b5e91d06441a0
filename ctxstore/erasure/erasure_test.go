package erasure

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

func TestRoundTripWithLosses(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	cases := []struct{ k, m, size int }{
		{1, 0, 1000}, {1, 2, 4096}, {2, 1, 2 << 20}, {2, 1, 7}, {4, 2, 1<<20 + 3}, {3, 0, 999},
	}
	for _, tc := range cases {
		c, err := New(tc.k, tc.m)
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, tc.size)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		shards, err := c.Encode(data)
		if err != nil {
			t.Fatal(err)
		}
		// Every subset that loses at most m shards decodes to the original.
		for mask := 0; mask < 1<<c.N(); mask++ {
			lost := 0
			in := make([][]byte, c.N())
			for i := range in {
				if mask&(1<<i) != 0 {
					lost++
					continue
				}
				in[i] = append([]byte(nil), shards[i]...)
			}
			got, err := c.Decode(in, tc.size)
			if lost <= tc.m {
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("k=%d m=%d lost mask %b: %v", tc.k, tc.m, mask, err)
				}
			} else if err == nil && !bytes.Equal(got, data) {
				t.Fatalf("k=%d m=%d lost mask %b: decoded wrong bytes", tc.k, tc.m, mask)
			} else if err != nil && !errors.Is(err, block.ErrUnavailable) {
				t.Fatalf("k=%d m=%d: too many losses must be ErrUnavailable, got %v", tc.k, tc.m, err)
			}
		}
	}
}

func TestReconstructForRepair(t *testing.T) {
	c, _ := New(2, 1)
	data := bytes.Repeat([]byte("kv"), 5000)
	shards, _ := c.Encode(data)
	want := append([]byte(nil), shards[2]...)
	in := [][]byte{shards[0], shards[1], nil}
	if err := c.Reconstruct(in, len(data)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(in[2], want) {
		t.Fatal("reconstructed parity differs")
	}
	if _, err := New(0, 1); !errors.Is(err, block.ErrInvalidArgument) {
		t.Fatal("k=0 must be rejected")
	}
}

func BenchmarkEncode2Plus1(b *testing.B) {
	c, _ := New(2, 1)
	data := make([]byte, 2<<20)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := c.Encode(data); err != nil {
			b.Fatal(err)
		}
	}
}

// TestNewCachesEachCode checks that New hands every caller, concurrent ones
// included, the one cached code of each (k, m), and refuses bad ones.
func TestNewCachesEachCode(t *testing.T) {
	cases := []struct {
		k, m int
		ok   bool
	}{{1, 0, true}, {1, 2, true}, {4, 2, true}, {32, 0, true}, {1, 31, true}, {0, 1, false}, {2, -1, false}, {30, 3, false}}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("k%d_m%d", tc.k, tc.m), func(t *testing.T) {
			const callers = 8
			got := make([]*Code, callers)
			errs := make([]error, callers)
			var wg sync.WaitGroup
			for i := range callers {
				wg.Go(func() { got[i], errs[i] = New(tc.k, tc.m) })
			}
			wg.Wait()
			for i := range callers {
				if (errs[i] == nil) != tc.ok {
					t.Fatalf("New(%d, %d): %v", tc.k, tc.m, errs[i])
				}
				if !tc.ok {
					continue
				}
				if got[i] != got[0] || got[i].K != tc.k || got[i].M != tc.m {
					t.Fatalf("caller %d got %p k=%d m=%d, caller 0 %p", i, got[i], got[i].K, got[i].M, got[0])
				}
			}
		})
	}
}
