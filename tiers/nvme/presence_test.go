package nvme

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// presenceKeys are keys that differ only in part, shard or namespace, so a
// filter that hashed the wrong fields would confuse them.
func presenceKeys(n int) []block.Key {
	var ks []block.Key
	for i := range uint64(n) {
		k := key(i)
		switch i % 4 {
		case 1:
			k = k.WithPart(uint16(i))
		case 2:
			k = k.WithShard(int(i % 5))
		case 3:
			k.Namespace = "other"
		}
		ks = append(ks, k)
	}
	return ks
}

// TestPresenceFilterNeverHidesAKey: with the filter off, at one slot (every
// key collides), a few slots and the default size, every indexed key is
// found after puts, deletes, a reopen (checkIndex) and an index rebuild
// (scanTail), and every deleted key is a miss; with slots to spare,
// lookups of absent keys are answered without an index read.
func TestPresenceFilterNeverHidesAKey(t *testing.T) {
	tests := []struct {
		name  string
		slots int
		// skipsAll: every miss of a fresh tier is answered by the filter.
		skipsAll bool
	}{
		{"off", 0, false},
		{"one slot", 1, false},
		{"eight slots", 8, false},
		{"default", DefaultConfig().PresenceSlots, true},
	}
	const n, size = 24, 20000
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cfg := testConfig(t.TempDir())
			cfg.PresenceSlots = tc.slots
			tr := open(t, cfg)
			ks := presenceKeys(n)
			for _, k := range ks {
				if _, err := tr.Stat(ctx, k); !errors.Is(err, block.ErrNotFound) {
					t.Fatalf("fresh tier: stat %s: %v", k, err)
				}
			}
			if got := tr.Stats().PresenceSkips; tc.skipsAll && got != uint64(n) {
				t.Fatalf("%d misses of a fresh tier, %d answered by the filter", n, got)
			} else if tc.slots == 0 && got != 0 {
				t.Fatalf("filter off, yet %d skips", got)
			}
			for i, k := range ks {
				put(t, tr, k, payload(uint64(i), size), block.PutOptions{})
				if !tr.Contains(k) {
					t.Fatalf("%s missing right after its put", k)
				}
			}
			deleted := func(i int) bool { return i%3 == 0 }
			for i, k := range ks {
				if deleted(i) {
					if err := tr.Delete(ctx, k); err != nil {
						t.Fatal(err)
					}
				}
			}
			check := func(stage string, wantDeleted bool) {
				t.Helper()
				for i, k := range ks {
					_, err := tr.Stat(ctx, k)
					switch {
					case !deleted(i) && err != nil:
						t.Fatalf("%s: indexed %s: %v", stage, k, err)
					case deleted(i) && wantDeleted && !errors.Is(err, block.ErrNotFound):
						t.Fatalf("%s: deleted %s: %v", stage, k, err)
					}
					if !deleted(i) {
						mustGet(t, tr, k, payload(uint64(i), size))
					}
				}
			}
			check("after deletes", true)
			if err := tr.Close(); err != nil {
				t.Fatal(err)
			}
			tr = open(t, cfg)
			check("after reopen", true)
			if err := tr.Close(); err != nil {
				t.Fatal(err)
			}
			// Without the index, recovery indexes every extent again
			// (scanTail): deleted extents may come back, indexed ones must.
			if err := os.RemoveAll(filepath.Join(cfg.Dir, "index")); err != nil {
				t.Fatal(err)
			}
			tr = open(t, cfg)
			defer tr.Close()
			if tr.Recovery().Reindexed == 0 {
				t.Fatal("no extent reindexed after the index was removed")
			}
			check("after rebuild", false)
		})
	}
}

// TestPresenceFilterUnderChurn: writers sharing two filter slots put,
// check, delete and check their own keys concurrently; a put that returned
// is always visible, a delete that returned always a miss.
func TestPresenceFilterUnderChurn(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.PresenceSlots = 2
	tr := open(t, cfg)
	defer tr.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range uint64(4) {
		wg.Go(func() {
			for r := range uint64(40) {
				k := key(w<<32 | r%6)
				d := payload(w*1000+r, 3000)
				if err := tr.Put(ctx, k, d, block.Checksum(d), block.PutOptions{}); err != nil {
					errs <- err
					return
				}
				if !tr.Contains(k) {
					errs <- fmt.Errorf("writer %d: %s missing after its put", w, k)
					return
				}
				if err := tr.Delete(ctx, k); err != nil {
					errs <- err
					return
				}
				if _, err := tr.Stat(ctx, k); !errors.Is(err, block.ErrNotFound) {
					errs <- fmt.Errorf("writer %d: %s after its delete: %v", w, k, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestPresenceSlotsValidate(t *testing.T) {
	tests := []struct {
		slots int
		ok    bool
	}{{0, true}, {1, true}, {1 << 21, true}, {1 << 28, true}, {3, false}, {-1, false}, {1 << 29, false}}
	for _, tc := range tests {
		cfg := testConfig(t.TempDir())
		cfg.PresenceSlots = tc.slots
		if err := cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("PresenceSlots %d: Validate = %v, want ok %v", tc.slots, err, tc.ok)
		}
	}
}
