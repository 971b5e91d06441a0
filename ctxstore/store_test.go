package ctxstore

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/tiers/dram"
)

func newStore(t testing.TB) *Store {
	t.Helper()
	cat, err := OpenFileCatalog(filepath.Join(t.TempDir(), "namespaces.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := dram.DefaultConfig()
	cfg.Capacity = 8 << 20
	cfg.MaxBlockSize = 4 << 20
	tier, err := dram.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tier.Close() })
	s, err := New(DefaultConfig(), cat, tier, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStoreBadInputChangesNothing(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	small := []byte("kv block bytes")
	k := block.NewKey("default", 42)
	if err := s.Put(ctx, k, small, block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	tooBig := make([]byte, 65<<20)
	cases := []struct {
		name string
		key  block.Key
		data []byte
		opts block.PutOptions
		want error
	}{
		{"unknown namespace", block.NewKey("nope", 1), small, block.PutOptions{}, block.ErrUnknownNamespace},
		{"checksum mismatch", block.NewKey("default", 2), small, block.PutOptions{Sum: block.Checksum(small) ^ 1, HasSum: true}, block.ErrChecksum},
		{"conflicting re-put", k, []byte("other bytes"), block.PutOptions{}, block.ErrConflict},
		{"empty block", block.NewKey("default", 3), nil, block.PutOptions{}, block.ErrInvalidArgument},
		{"over namespace max", block.NewKey("default", 4), tooBig, block.PutOptions{}, block.ErrTooLarge},
		{"bad priority", block.NewKey("default", 5), small, block.PutOptions{Priority: 99, HasPriority: true}, block.ErrInvalidArgument},
		{"undefined reuse hint", block.NewKey("default", 6), small, block.PutOptions{Reuse: block.MaxReuse + 1}, block.ErrInvalidArgument},
		{"retain on reuse never", block.NewKey("default", 7), small, block.PutOptions{Reuse: block.ReuseNever, Retain: time.Second}, block.ErrInvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.Put(ctx, tc.key, tc.data, tc.opts); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if tc.key != k {
				if ok, _ := s.Exists(ctx, tc.key, ReadOptions{}); ok {
					t.Fatal("a rejected put stored something")
				}
			}
			ref, err := s.Get(ctx, k)
			if err != nil || string(ref.Data) != string(small) {
				t.Fatalf("original block damaged: %v", err)
			}
			ref.Release()
		})
	}
	if err := s.Put(ctx, k, small, block.PutOptions{Sum: block.Checksum(small), HasSum: true}); err != nil {
		t.Fatalf("idempotent re-put with checksum: %v", err)
	}
}

func TestStoreLookupStopsAtFirstMiss(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	keys := make([]block.Key, 6)
	for i := range keys {
		keys[i] = block.NewKey("default", uint64(100+i))
	}
	for _, i := range []int{0, 1, 2, 4, 5} { // 3 is missing
		if err := s.Put(ctx, keys[i], []byte{byte(i), 1, 2}, block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name string
		keys []block.Key
		want int
	}{
		{"empty", nil, 0},
		{"all present", keys[:3], 3},
		{"gap at 3", keys, 3},
		{"miss first", keys[3:], 0},
		{"present after gap", keys[4:], 2},
	}
	for _, tc := range cases {
		n, err := s.Lookup(ctx, tc.keys, ReadOptions{})
		if err != nil || n != tc.want {
			t.Errorf("%s: Lookup = %d, %v; want %d", tc.name, n, err, tc.want)
		}
	}
	if _, err := s.Lookup(ctx, []block.Key{keys[0], block.NewKey("ghost", 1)}, ReadOptions{}); !errors.Is(err, block.ErrUnknownNamespace) {
		t.Errorf("unknown namespace in lookup: %v", err)
	}
}

func TestStoreNamespacesAndTTL(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	ns := block.Namespace{Name: "tenant-a", Model: "llama-3-8b", BlockTokens: 16, HashScheme: block.SchemeVLLM, TTLSeconds: 60}
	if err := s.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateNamespace(ctx, ns); err != nil {
		t.Fatalf("identical create must be idempotent: %v", err)
	}
	other := ns
	other.BlockTokens = 32
	if err := s.CreateNamespace(ctx, other); !errors.Is(err, block.ErrNamespaceExists) {
		t.Fatalf("conflicting create: %v", err)
	}
	now := time.Now()
	s.now = func() time.Time { return now }
	k := block.NewKey("tenant-a", 7)
	if err := s.Put(ctx, k, []byte("x"), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	info, err := s.Stat(ctx, k, ReadOptions{})
	if err != nil || info.Size != 1 || info.Tier != block.TierDRAM {
		t.Fatalf("stat: %+v %v", info, err)
	}
	if got := len(s.Namespaces()); got != 2 {
		t.Fatalf("namespaces: %d", got)
	}
	// Keys of one namespace are invisible from another.
	if ok, _ := s.Exists(ctx, block.NewKey("default", 7), ReadOptions{}); ok {
		t.Fatal("namespaces share keys")
	}
}

func TestStoreBatchAndPin(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	items := []PutItem{
		{Key: block.NewKey("default", 1), Data: []byte("a")},
		{Key: block.NewKey("nope", 2), Data: []byte("b")},
		{Key: block.NewKey("default", 3), Data: []byte("c")},
	}
	errs := s.PutBatch(ctx, items)
	if errs[0] != nil || !errors.Is(errs[1], block.ErrUnknownNamespace) || errs[2] != nil {
		t.Fatalf("batch put: %v", errs)
	}
	refs, gerrs := s.GetBatch(ctx, []block.Key{items[0].Key, block.NewKey("default", 9)}, ReadOptions{})
	if gerrs[0] != nil || string(refs[0].Data) != "a" || !errors.Is(gerrs[1], block.ErrNotFound) || refs[1] != nil {
		t.Fatalf("batch get: %v", gerrs)
	}
	refs[0].Release()
	if err := s.Pin(ctx, items[0].Key, 0); !errors.Is(err, block.ErrInvalidArgument) {
		t.Fatalf("zero pin: %v", err)
	}
	if errs := s.PinBatch(ctx, []block.Key{items[0].Key}, 1000*time.Hour); errs[0] != nil {
		t.Fatal(errs[0])
	}
	info, _ := s.Stat(ctx, items[0].Key, ReadOptions{})
	if d := time.Until(info.PinnedUntil); d > 24*time.Hour+time.Minute || d < 23*time.Hour {
		t.Fatalf("pin not capped at 24h: %v", d)
	}
	if errs := s.DeleteBatch(ctx, []block.Key{items[0].Key, items[0].Key}); errs[0] != nil || !errors.Is(errs[1], block.ErrNotFound) {
		t.Fatalf("batch delete: %v", errs)
	}
}

func TestCatalogPersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ns.json")
	c, err := OpenFileCatalog(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CreateNamespace(context.Background(), block.Namespace{Name: "persisted"}); err != nil {
		t.Fatal(err)
	}
	c2, err := OpenFileCatalog(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Namespace("persisted"); err != nil {
		t.Fatal(err)
	}
	if err := c2.DeleteNamespace(context.Background(), block.DefaultNamespace); !errors.Is(err, block.ErrInvalidArgument) {
		t.Fatalf("deleting default: %v", err)
	}
}

func TestStoreListAndDeleteNamespace(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	if err := s.CreateNamespace(ctx, block.Namespace{Name: "lst"}); err != nil {
		t.Fatal(err)
	}
	for _, h := range []uint64{0x30, 0x10, 0x20, 0x1f} {
		if err := s.Put(ctx, block.NewKey("lst", h), []byte{1}, block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(ctx, block.NewKey("lst", 0x10).WithPart(2), []byte{2}, block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	names := func(infos []block.Info) string {
		var out []string
		for _, i := range infos {
			out = append(out, i.Key.ObjectName()[14:])
		}
		return strings.Join(out, ",")
	}
	cases := []struct {
		prefix, after string
		limit         int
		want          string
	}{
		{"", "", 0, "10,10.2,1f,20,30"},
		{"", "", 2, "10,10.2"},
		{"", "0000000000000010.2", 2, "1f,20"},
		{"000000000000001", "", 0, "10,10.2,1f"},
	}
	for _, tc := range cases {
		got, err := s.List(ctx, "lst", tc.prefix, tc.after, tc.limit, ReadOptions{})
		if err != nil || names(got) != tc.want {
			t.Errorf("List(%q,%q,%d) = %s, %v; want %s", tc.prefix, tc.after, tc.limit, names(got), err, tc.want)
		}
	}
	if err := s.DeleteNamespace(ctx, "lst"); !errors.Is(err, block.ErrNamespaceNotEmpty) {
		t.Fatalf("delete non-empty: %v", err)
	}
	infos, _ := s.List(ctx, "lst", "", "", 0, ReadOptions{})
	for _, i := range infos {
		if err := s.Delete(ctx, i.Key); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteNamespace(ctx, "lst"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Namespace("lst"); !errors.Is(err, block.ErrUnknownNamespace) {
		t.Fatalf("namespace still there: %v", err)
	}
}

// TestStoreReadsRefuseTheEmptyNamespace: a key without a namespace is
// refused by every read, whatever options it comes with: the zero
// ReadOptions carry an empty Namespace, which must not pass for the key's.
func TestStoreReadsRefuseTheEmptyNamespace(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	k := block.NewKey("", 1)
	reads := []struct {
		name string
		call func() error
	}{
		{"get", func() error { _, err := s.Get(ctx, k); return err }},
		{"read", func() error { _, err := s.Read(ctx, k, ReadOptions{}); return err }},
		{"stat", func() error { _, err := s.Stat(ctx, k, ReadOptions{}); return err }},
		{"exists", func() error { _, err := s.Exists(ctx, k, ReadOptions{}); return err }},
		{"list", func() error { _, err := s.List(ctx, "", "", "", 10, ReadOptions{}); return err }},
		{"lookup", func() error { _, err := s.Lookup(ctx, []block.Key{k}, ReadOptions{}); return err }},
	}
	for _, r := range reads {
		t.Run(r.name, func(t *testing.T) {
			if err := r.call(); !errors.Is(err, block.ErrUnknownNamespace) && !errors.Is(err, block.ErrInvalidArgument) {
				t.Fatalf("err = %v, want unknown namespace or invalid argument", err)
			}
		})
	}
}
