package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/blocktest"
	"github.com/ctxtier/ctxtier/gateway/native"
)

// TestReadDirectRun reads runs of blocks spread over DRAM and NVMe, with
// missing keys among them, in batches of several sizes and both verify
// modes: every present block must come back right, every missing one
// NotFound at its own index, as ReadDirectBatch answers, and every lease
// must be released.
func TestReadDirectRun(t *testing.T) {
	const stored = 12 // DRAM holds 4: the oldest go down to NVMe
	ctx := context.Background()
	for _, mode := range verifyModes {
		m := stack(t, 4, true)
		srv, c := startDirect(t, native.DefaultConfig(), m, Options{Conns: 2, DirectVerify: mode})
		for i := range uint64(stored) {
			if err := c.Put(ctx, block.NewKey("default", i), payload(i, blockSize)); err != nil {
				t.Fatal(err)
			}
		}
		// A prefix in an engine's order, with two missing keys inside it.
		var ids []uint64
		for i := uint64(stored); i > 0; i-- {
			ids = append(ids, i-1)
			if i == 7 || i == 2 {
				ids = append(ids, 1000+i)
			}
		}
		keys := make([]block.Key, len(ids))
		for j, id := range ids {
			keys[j] = block.NewKey("default", id)
		}
		for _, batch := range []int{1, 3, 4, len(keys), len(keys) + 5} {
			t.Run(fmt.Sprintf("%s/batch%d", mode, batch), func(t *testing.T) {
				bufs := make([][]byte, len(keys))
				wantBufs := make([][]byte, len(keys))
				for j := range bufs {
					bufs[j] = make([]byte, blockSize)
					wantBufs[j] = make([]byte, blockSize)
				}
				before := c.DirectStats()
				sizes, errs, err := c.ReadDirectRun(ctx, keys, bufs, batch)
				if err != nil {
					t.Fatal(err)
				}
				wantSizes, wantErrs, err := c.ReadDirectBatch(ctx, keys, wantBufs)
				if err != nil {
					t.Fatal(err)
				}
				for j, id := range ids {
					switch {
					case id >= 1000:
						if !errors.Is(errs[j], block.ErrNotFound) || !errors.Is(wantErrs[j], block.ErrNotFound) {
							t.Fatalf("key %d (missing): run %v, batch %v", id, errs[j], wantErrs[j])
						}
					case errs[j] != nil || sizes[j] != blockSize || !bytes.Equal(bufs[j], payload(id, blockSize)):
						t.Fatalf("key %d: size %d err %v", id, sizes[j], errs[j])
					case wantErrs[j] != nil || wantSizes[j] != sizes[j]:
						t.Fatalf("key %d: ReadDirectBatch gives %d %v", id, wantSizes[j], wantErrs[j])
					}
				}
				after := c.DirectStats()
				if got := after.Direct - before.Direct; got != 2*stored || after.Fallbacks != before.Fallbacks {
					t.Fatalf("direct reads %d (want %d), stats %+v", got, 2*stored, after)
				}
				waitLeases(t, srv, 0)
			})
		}
	}
}

func TestReadDirectRunArguments(t *testing.T) {
	_, c := startDirect(t, native.DefaultConfig(), stack(t, 4, false), Options{Conns: 1})
	ctx := context.Background()
	keys := []block.Key{block.NewKey("default", 1)}
	for _, tc := range []struct {
		name  string
		bufs  [][]byte
		batch int
	}{
		{"buffers for no keys", nil, 1},
		{"batch 0", [][]byte{make([]byte, 8)}, 0},
		{"negative batch", [][]byte{make([]byte, 8)}, -2},
	} {
		if _, _, err := c.ReadDirectRun(ctx, keys, tc.bufs, tc.batch); !errors.Is(err, block.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", tc.name, err)
		}
	}
	sizes, errs, err := c.ReadDirectRun(ctx, nil, nil, 4)
	if err != nil || len(sizes) != 0 || len(errs) != 0 {
		t.Fatalf("empty run: %v %v %v", sizes, errs, err)
	}
}

// TestReadDirectRunFallback: a run from a server whose memory file cannot
// be opened fails per key without DirectFallback, and is read by GET with it;
// a tier without descriptors is read by GET either way.
func TestReadDirectRunFallback(t *testing.T) {
	ctx := context.Background()
	const n = 5
	keys := make([]block.Key, n)
	for i := range keys {
		keys[i] = block.NewKey("default", uint64(i))
	}
	newBufs := func() [][]byte {
		b := make([][]byte, n)
		for i := range b {
			b[i] = make([]byte, blockSize)
		}
		return b
	}
	check := func(t *testing.T, sizes []int, errs []error, err error, bufs [][]byte) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		for i := range keys {
			if errs[i] != nil || sizes[i] != blockSize || !bytes.Equal(bufs[i], payload(uint64(i), blockSize)) {
				t.Fatalf("key %d: %d %v", i, sizes[i], errs[i])
			}
		}
	}
	for _, tc := range []struct {
		name        string
		tier        func(t *testing.T) ctxstore.Tier
		fallback    bool
		failsPerKey bool
	}{
		{"not colocated", func(t *testing.T) ctxstore.Tier { return farTier{stack(t, 8, false)} }, false, true},
		{"not colocated with DirectFallback", func(t *testing.T) ctxstore.Tier { return farTier{stack(t, 8, false)} }, true, false},
		{"tier without descriptors", func(t *testing.T) ctxstore.Tier { return blocktest.New() }, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, c := startDirect(t, native.DefaultConfig(), tc.tier(t), Options{Conns: 1, DirectFallback: tc.fallback})
			for i, k := range keys {
				if err := c.Put(ctx, k, payload(uint64(i), blockSize)); err != nil {
					t.Fatal(err)
				}
			}
			bufs := newBufs()
			sizes, errs, err := c.ReadDirectRun(ctx, keys, bufs, 2)
			if tc.failsPerKey {
				if err != nil {
					t.Fatal(err)
				}
				for i := range keys {
					var nc *NotColocatedError
					if !errors.As(errs[i], &nc) {
						t.Fatalf("key %d: %v, want *NotColocatedError", i, errs[i])
					}
				}
			} else {
				check(t, sizes, errs, err, bufs)
				// A second run reads the same through GET.
				bufs = newBufs()
				sizes, errs, err = c.ReadDirectRun(ctx, keys, bufs, 2)
				check(t, sizes, errs, err, bufs)
				if s := c.DirectStats(); s.Direct != 0 || s.Fallbacks != 2*n {
					t.Fatalf("stats %+v", s)
				}
			}
			waitLeases(t, srv, 0)
		})
	}
}
