package client

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/blocktest"
	"github.com/ctxtier/ctxtier/gateway/httpapi"
	"github.com/ctxtier/ctxtier/gateway/native"
	"github.com/ctxtier/ctxtier/gateway/native/nativetest"
)

// syncTier counts the store's read syncs (ctxstore.ReadSyncer), as a
// cluster backend would serve them.
type syncTier struct {
	*blocktest.Tier
	syncs atomic.Int64
	fail  atomic.Bool
}

func (s *syncTier) SyncRead(context.Context) error {
	s.syncs.Add(1)
	if s.fail.Load() {
		return block.ErrUnavailable
	}
	return nil
}

// TestWithLinearizable checks that both clients carry the read level to the
// server (one sync per read request; none for writes or plain reads).
func TestWithLinearizable(t *testing.T) {
	tier := &syncTier{Tier: blocktest.New()}
	srv, err := nativetest.StartWithTier(t, native.DefaultConfig(), tier)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := Dial(context.Background(), srv.Addr, Options{Conns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	hs := httptest.NewServer(httpapi.New(httpapi.DefaultConfig(), srv.Store, nil, slog.New(slog.DiscardHandler)).Handler())
	defer hs.Close()
	hcfg := HTTPDefaultConfig()
	hcfg.BaseURL = hs.URL
	hc, err := NewHTTP(hcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()

	bg, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lin := WithLinearizable(bg)
	keys := []block.Key{block.NewKey("default", 1), block.NewKey("default", 2)}
	for _, k := range keys {
		if err := nc.Put(lin, k, []byte("block bytes")); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name  string
		ctx   context.Context
		call  func(ctx context.Context) error
		syncs int64
	}{
		{"native get, local", bg, func(ctx context.Context) error { _, err := nc.Get(ctx, keys[0]); return err }, 0},
		{"native get", lin, func(ctx context.Context) error { _, err := nc.Get(ctx, keys[0]); return err }, 1},
		{"native get batch", lin, func(ctx context.Context) error { _, _, err := nc.GetBatch(ctx, keys); return err }, 1},
		{"native exists batch", lin, func(ctx context.Context) error { _, _, err := nc.ExistsBatch(ctx, keys); return err }, 1},
		{"native lookup", lin, func(ctx context.Context) error { _, err := nc.Lookup(ctx, keys); return err }, 1},
		{"native pin ignores it", lin, func(ctx context.Context) error { return nc.Pin(ctx, keys[0], time.Minute) }, 0},
		{"http get, local", bg, func(ctx context.Context) error { _, err := hc.Get(ctx, keys[0]); return err }, 0},
		{"http get", lin, func(ctx context.Context) error { _, err := hc.Get(ctx, keys[0]); return err }, 1},
		{"http get into", lin, func(ctx context.Context) error { _, err := hc.GetInto(ctx, keys[0], make([]byte, 64)); return err }, 1},
		{"http stat", lin, func(ctx context.Context) error { _, err := hc.Stat(ctx, keys[0]); return err }, 1},
		{"http lookup", lin, func(ctx context.Context) error { _, err := hc.Lookup(ctx, keys); return err }, 1},
		{"http exists batch", lin, func(ctx context.Context) error { _, err := hc.ExistsBatch(ctx, keys); return err }, 1},
		{"http get batch", lin, func(ctx context.Context) error { _, _, err := hc.GetBatch(ctx, keys); return err }, 1},
		{"http put ignores it", lin, func(ctx context.Context) error {
			return hc.Put(ctx, keys[0], []byte("block bytes"), block.PutOptions{})
		}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tier.syncs.Load()
			if err := tc.call(tc.ctx); err != nil {
				t.Fatal(err)
			}
			if got := tier.syncs.Load() - before; got != tc.syncs {
				t.Fatalf("%d syncs, want %d", got, tc.syncs)
			}
		})
	}
	// A failed sync fails the read (Unavailable), on both protocols.
	tier.fail.Store(true)
	if _, err := nc.Get(lin, keys[0]); !errors.Is(err, block.ErrUnavailable) {
		t.Errorf("native get with a failing sync: %v", err)
	}
	if _, err := hc.Get(lin, keys[0]); !errors.Is(err, block.ErrUnavailable) {
		t.Errorf("http get with a failing sync: %v", err)
	}
	if _, err := nc.Get(bg, keys[0]); err != nil {
		t.Errorf("a local read does not sync: %v", err)
	}
}
