package ctxstore

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/tiers/dram"
)

// syncingTier counts SyncRead calls over a DRAM tier.
type syncingTier struct {
	*dram.Tier
	syncs atomic.Int32
	err   error
}

func (t *syncingTier) SyncRead(context.Context) error {
	t.syncs.Add(1)
	return t.err
}

func TestReadLevelSyncsOncePerCall(t *testing.T) {
	cat, err := OpenFileCatalog(filepath.Join(t.TempDir(), "namespaces.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := dram.DefaultConfig()
	cfg.Capacity = 1 << 20
	d, err := dram.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	tier := &syncingTier{Tier: d}
	s, err := New(DefaultConfig(), cat, tier, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	keys := []block.Key{block.NewKey("default", 1), block.NewKey("default", 2), block.NewKey("default", 3)}
	for _, k := range keys {
		if err := s.Put(WithReadLevel(bg, ReadLinearizable), k, []byte("block"), block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lin := WithReadLevel(bg, ReadLinearizable)
	ns, err := s.Namespace("default")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		ctx   context.Context
		read  func(ctx context.Context) error
		syncs int32
	}{
		{"put ignores the level", lin, func(ctx context.Context) error { return s.Put(ctx, keys[0], []byte("block"), block.PutOptions{}) }, 0},
		{"local get", bg, func(ctx context.Context) error { _, err := s.Get(ctx, keys[0]); return err }, 0},
		{"explicit local", WithReadLevel(bg, ReadLocal), func(ctx context.Context) error { _, err := s.Exists(ctx, keys[0]); return err }, 0},
		{"get", lin, func(ctx context.Context) error { r, err := s.Get(ctx, keys[0]); r.Release(); return err }, 1},
		{"local read, namespace resolved", bg, func(ctx context.Context) error {
			r, err := s.Read(ctx, keys[0], ReadOptions{Namespace: ns})
			r.Release()
			return err
		}, 0},
		{"linearizable read, namespace resolved", bg, func(ctx context.Context) error {
			r, err := s.Read(ctx, keys[0], ReadOptions{Level: ReadLinearizable, Namespace: ns})
			r.Release()
			return err
		}, 1},
		{"read ignores the context's level", lin, func(ctx context.Context) error {
			r, err := s.Read(ctx, keys[0], ReadOptions{})
			r.Release()
			return err
		}, 0},
		{"stat", lin, func(ctx context.Context) error { _, err := s.Stat(ctx, keys[0]); return err }, 1},
		{"exists", lin, func(ctx context.Context) error { _, err := s.Exists(ctx, keys[0]); return err }, 1},
		{"lookup of 3", bg, func(ctx context.Context) error {
			_, err := s.Lookup(ctx, keys, ReadOptions{Level: ReadLinearizable})
			return err
		}, 1},
		{"local lookup of 3", lin, func(ctx context.Context) error { _, err := s.Lookup(ctx, keys, ReadOptions{}); return err }, 0},
		{"list", lin, func(ctx context.Context) error { _, err := s.List(ctx, "default", "", "", 0); return err }, 1},
		{"get batch of 3", bg, func(ctx context.Context) error {
			refs, errs := s.GetBatch(ctx, keys, ReadOptions{Level: ReadLinearizable})
			for i, r := range refs {
				if errs[i] != nil {
					return errs[i]
				}
				r.Release()
			}
			return nil
		}, 1},
		{"exists batch of 3", lin, func(ctx context.Context) error { _, errs := s.ExistsBatch(ctx, keys); return errors.Join(errs...) }, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tier.syncs.Load()
			if err := tc.read(tc.ctx); err != nil {
				t.Fatal(err)
			}
			if got := tier.syncs.Load() - before; got != tc.syncs {
				t.Fatalf("%d syncs, want %d", got, tc.syncs)
			}
		})
	}
	tier.err = block.ErrUnavailable
	if _, err := s.Lookup(bg, keys, ReadOptions{Level: ReadLinearizable}); !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("failed sync: lookup %v", err)
	}
	if _, errs := s.ExistsBatch(lin, keys); !errors.Is(errs[2], block.ErrUnavailable) {
		t.Fatalf("failed sync: exists batch %v", errs)
	}
	if _, err := s.Read(bg, keys[0], ReadOptions{Level: ReadLinearizable, Namespace: ns}); !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("failed sync: read %v", err)
	}
	if _, err := s.Exists(bg, keys[0]); err != nil {
		t.Fatalf("a local read does not sync: %v", err)
	}
}

func TestParseReadLevel(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ReadLevel
		ok   bool
	}{{"", ReadLocal, true}, {"local", ReadLocal, true}, {"linearizable", ReadLinearizable, true}, {"Linearizable", 0, false}, {"strong", 0, false}} {
		got, err := ParseReadLevel(tc.in)
		if tc.ok != (err == nil) || tc.ok && got != tc.want {
			t.Errorf("ParseReadLevel(%q) = %v, %v", tc.in, got, err)
		}
		if !tc.ok && !errors.Is(err, block.ErrInvalidArgument) {
			t.Errorf("ParseReadLevel(%q): %v is not InvalidArgument", tc.in, err)
		}
		if tc.ok && tc.in != "" && got.String() != tc.in {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
}
