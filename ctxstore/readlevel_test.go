package ctxstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/blocktest"
	"github.com/ctxtier/ctxtier/tiers/dram"
)

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
	tier := &blocktest.Syncing{Storage: d}
	s, err := New(DefaultConfig(), cat, tier, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	keys := []block.Key{block.NewKey("default", 1), block.NewKey("default", 2), block.NewKey("default", 3)}
	for _, k := range keys {
		if err := s.Put(bg, k, []byte("block"), block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lin := ReadOptions{Level: ReadLinearizable}
	ns, err := s.Namespace("default")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		read  func() error
		syncs int64
	}{
		{"put", func() error { return s.Put(bg, keys[0], []byte("block"), block.PutOptions{}) }, 0},
		{"get is local", func() error { r, err := s.Get(bg, keys[0]); r.Release(); return err }, 0},
		{"explicit local", func() error { _, err := s.Exists(bg, keys[0], ReadOptions{Level: ReadLocal}); return err }, 0},
		{"read", func() error { r, err := s.Read(bg, keys[0], lin); r.Release(); return err }, 1},
		{"local read, namespace resolved", func() error {
			r, err := s.Read(bg, keys[0], ReadOptions{Namespace: ns})
			r.Release()
			return err
		}, 0},
		{"linearizable read, namespace resolved", func() error {
			r, err := s.Read(bg, keys[0], ReadOptions{Level: ReadLinearizable, Namespace: ns})
			r.Release()
			return err
		}, 1},
		{"stat", func() error { _, err := s.Stat(bg, keys[0], lin); return err }, 1},
		{"local stat", func() error { _, err := s.Stat(bg, keys[0], ReadOptions{}); return err }, 0},
		{"exists", func() error { _, err := s.Exists(bg, keys[0], lin); return err }, 1},
		{"lookup of 3", func() error { _, err := s.Lookup(bg, keys, lin); return err }, 1},
		{"local lookup of 3", func() error { _, err := s.Lookup(bg, keys, ReadOptions{}); return err }, 0},
		{"list", func() error { _, err := s.List(bg, "default", "", "", 0, lin); return err }, 1},
		{"get batch of 3", func() error {
			refs, errs := s.GetBatch(bg, keys, lin)
			for i, r := range refs {
				if errs[i] != nil {
					return errs[i]
				}
				r.Release()
			}
			return nil
		}, 1},
		{"exists batch of 3", func() error { _, errs := s.ExistsBatch(bg, keys, lin); return errors.Join(errs...) }, 1},
		{"linearize", func() error {
			opts, err := s.Linearize(bg, lin)
			if err == nil && opts.Level != ReadLocal {
				return fmt.Errorf("linearized options read at %v", opts.Level)
			}
			return err
		}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tier.Syncs()
			if err := tc.read(); err != nil {
				t.Fatal(err)
			}
			if got := tier.Syncs() - before; got != tc.syncs {
				t.Fatalf("%d syncs, want %d", got, tc.syncs)
			}
		})
	}
	tier.Err = block.ErrUnavailable
	if _, err := s.Lookup(bg, keys, lin); !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("failed sync: lookup %v", err)
	}
	if _, errs := s.ExistsBatch(bg, keys, lin); !errors.Is(errs[2], block.ErrUnavailable) {
		t.Fatalf("failed sync: exists batch %v", errs)
	}
	if _, err := s.Read(bg, keys[0], ReadOptions{Level: ReadLinearizable, Namespace: ns}); !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("failed sync: read %v", err)
	}
	if _, err := s.Stat(bg, keys[0], lin); !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("failed sync: stat %v", err)
	}
	if _, err := s.Exists(bg, keys[0], ReadOptions{}); err != nil {
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
