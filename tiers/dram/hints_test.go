package dram

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/tiers/policy"
)

// TestPutHintsReachPolicy: with the hint-aware default policy, the agent
// hints of a put order the DRAM tier's evictions: reuse-never blocks go
// first, retained blocks outlive unhinted ones until their window lapses
// windowTier is a DRAM tier of capacity bytes under the default Window
// policy (which honours hints), on a clock the test moves through *now.
func windowTier(t *testing.T, capacity int) (*Tier, *time.Time) {
	t.Helper()
	f, err := policy.Lookup("window")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Capacity = int64(capacity)
	cfg.Policy = f
	tr, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	now := time.Unix(1000, 0)
	tr.now = func() time.Time { return now }
	return tr, &now
}

// (on the tier's clock).
func TestPutHintsReachPolicy(t *testing.T) {
	const size = PageSize
	for _, tc := range []struct {
		name    string
		opts    block.PutOptions // of block 0; blocks 1 and 2 are unhinted
		advance time.Duration    // clock moves before block 3 forces an eviction
		evicted int              // the block that must be gone
	}{
		{"unhinted: oldest goes", block.PutOptions{}, 0, 0},
		{"reuse never goes first even when newest", block.PutOptions{Reuse: block.ReuseNever}, 0, 0},
		{"retained block stays", block.PutOptions{Reuse: block.ReuseSession, Retain: time.Minute}, 30 * time.Second, 1},
		{"lapsed retain window", block.PutOptions{Reuse: block.ReuseSession, Retain: time.Minute}, 2 * time.Minute, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, now := windowTier(t, 3*size)
			order := []int{0, 1, 2}
			if tc.opts.Reuse == block.ReuseNever {
				order = []int{1, 2, 0} // the hinted block is the newest
			}
			for _, i := range order {
				opts := block.PutOptions{}
				if i == 0 {
					opts = tc.opts
				}
				if err := put(t, tr, key(i), payload(uint64(i), size), opts); err != nil {
					t.Fatal(err)
				}
			}
			*now = now.Add(tc.advance)
			if err := put(t, tr, key(3), payload(3, size), block.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			for i := range 4 {
				ref, err := tr.Get(context.Background(), key(i), block.GetOptions{})
				if i == tc.evicted {
					if !errors.Is(err, block.ErrNotFound) {
						t.Fatalf("block %d should have been evicted: %v", i, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("block %d: %v", i, err)
				}
				if string(ref.Data) != string(payload(uint64(i), size)) {
					t.Fatalf("block %d: wrong bytes", i)
				}
				ref.Release()
			}
		})
	}
}

// TestReuseNeverNotDemoted: a block put with reuse=never is dropped at
// eviction, never handed to the lower tier; other blocks are demoted.
func TestReuseNeverNotDemoted(t *testing.T) {
	const bs = PageSize
	cfg := DefaultConfig()
	cfg.Capacity = 2 * bs
	var demoted []block.Key
	cfg.Demote = func(_ context.Context, k block.Key, _ []byte, _ uint32, _ block.Info) { demoted = append(demoted, k) }
	tr, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	for i, o := range []block.PutOptions{{Reuse: block.ReuseNever}, {}, {}, {}} {
		if err := put(t, tr, key(i), payload(uint64(i), bs), o); err != nil {
			t.Fatal(err)
		}
	}
	// Four blocks through a two-block tier: 0 (never) and 1 evicted; only 1 demoted.
	if len(demoted) != 1 || demoted[0] != key(1) {
		t.Fatalf("demoted %v, want only %v", demoted, key(1))
	}
	if tr.Contains(key(0)) || tr.Contains(key(1)) {
		t.Fatal("an evicted block is still resident")
	}
}
