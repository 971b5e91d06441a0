package ctxstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

func TestSyncedCatalogRetriesAMissAfterSync(t *testing.T) {
	inner, err := OpenFileCatalog("")
	if err != nil {
		t.Fatal(err)
	}
	ns := block.DefaultNamespaceConfig()
	ns.Name = "late"
	syncs := 0
	cases := []struct {
		name     string
		sync     func(context.Context) error
		lookup   string
		wantErr  error
		wantSync int
	}{
		// The sync brings the namespace in (as a replicated catalog would).
		{"appears after sync", func(ctx context.Context) error { return inner.CreateNamespace(ctx, ns) }, "late", nil, 1},
		{"known: no sync", func(context.Context) error { t.Fatal("synced a known namespace"); return nil }, "default", nil, 0},
		{"still unknown", func(context.Context) error { return nil }, "never", block.ErrUnknownNamespace, 1},
		{"sync fails: the miss stands", func(context.Context) error { return block.ErrUnavailable }, "never2", block.ErrUnknownNamespace, 1},
		{"invalid name: no sync", func(context.Context) error { t.Fatal("synced an invalid name"); return nil }, "Bad Name!", block.ErrUnknownNamespace, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			syncs = 0
			c := SyncedCatalog(inner, func(ctx context.Context) error { syncs++; return tc.sync(ctx) }, time.Second)
			_, err := c.Namespace(tc.lookup)
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if syncs != tc.wantSync {
				t.Fatalf("%d syncs, want %d", syncs, tc.wantSync)
			}
		})
	}
}
