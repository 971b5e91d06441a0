package ctxstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// batchTier is a unit-test tier that records each PutBatch call and fails
// the keys it is told to.
type batchTier struct {
	Tier
	calls [][]TierPut
	fail  map[block.Key]error
}

func (b *batchTier) PutBatch(ctx context.Context, items []TierPut) []error {
	b.calls = append(b.calls, items)
	errs := make([]error, len(items))
	for i, it := range items {
		errs[i] = b.fail[it.Key]
	}
	return errs
}

// TestPutBatchGoesDownAsOne: the valid items of a batch reach a
// BatchPutter in one call, verified and with their checksums; bad items get
// their own error and are not passed down; one-item batches and tiers that
// are not BatchPutters go item by item.
func TestPutBatchGoesDownAsOne(t *testing.T) {
	ctx := context.Background()
	good := func(h uint64) PutItem {
		return PutItem{Key: block.NewKey("default", h), Data: []byte(fmt.Sprint("block ", h))}
	}
	badSum := good(3)
	badSum.Opts = block.PutOptions{Sum: 1, HasSum: true}
	conflicted := good(5)
	cases := []struct {
		name      string
		items     []PutItem
		wantCalls int
		wantDown  int
		wantErrs  []error
	}{
		{"all valid", []PutItem{good(1), good(2)}, 1, 2, []error{nil, nil}},
		{"bad items stay up", []PutItem{good(1), {Key: block.NewKey("nope", 2), Data: []byte("x")}, badSum, {Key: block.NewKey("default", 4)}},
			1, 1, []error{nil, block.ErrUnknownNamespace, block.ErrChecksum, block.ErrInvalidArgument}},
		{"tier errors come back per item", []PutItem{good(1), conflicted}, 1, 2, []error{nil, block.ErrConflict}},
		{"nothing valid: no call", []PutItem{badSum, badSum}, 0, 0, []error{block.ErrChecksum, block.ErrChecksum}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cat, err := OpenFileCatalog(filepath.Join(t.TempDir(), "namespaces.json"))
			if err != nil {
				t.Fatal(err)
			}
			bt := &batchTier{fail: map[block.Key]error{conflicted.Key: block.ErrConflict}}
			s, err := New(DefaultConfig(), cat, bt, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			errs := s.PutBatch(ctx, tc.items)
			for i, want := range tc.wantErrs {
				if !errors.Is(errs[i], want) || (want == nil) != (errs[i] == nil) {
					t.Errorf("item %d: %v, want %v", i, errs[i], want)
				}
			}
			if len(bt.calls) != tc.wantCalls {
				t.Fatalf("%d PutBatch calls, want %d", len(bt.calls), tc.wantCalls)
			}
			if tc.wantCalls > 0 {
				if len(bt.calls[0]) != tc.wantDown {
					t.Fatalf("%d items went down, want %d", len(bt.calls[0]), tc.wantDown)
				}
				for _, p := range bt.calls[0] {
					if p.Sum != block.Checksum(p.Data) || !p.Opts.HasSum || p.Opts.Sum != p.Sum {
						t.Fatalf("%s went down with sum %08x (opts %08x), bytes have %08x", p.Key, p.Sum, p.Opts.Sum, block.Checksum(p.Data))
					}
				}
			}
		})
	}
}

// TestPutBatchWithoutBatchPutter: a plain tier gets the items one by one,
// with the same per-item answers.
func TestPutBatchWithoutBatchPutter(t *testing.T) {
	s := newStore(t) // over a DRAM tier
	k := block.NewKey("default", 1)
	errs := s.PutBatch(context.Background(), []PutItem{{Key: k, Data: []byte("a")}, {Key: k, Data: []byte("b")}})
	if errs[0] != nil || !errors.Is(errs[1], block.ErrConflict) {
		t.Fatalf("errors %v, want nil then conflict", errs)
	}
}
