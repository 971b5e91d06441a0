package tiers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/blocktest"
	"github.com/ctxtier/ctxtier/tiers/dram"
)

// newMemLower returns an in-memory stand-in for the NVMe tier.
func newMemLower() *blocktest.Tier { return blocktest.New(blocktest.WithMedium(block.TierNVMe)) }

// putBelow stores block i in the lower tier alone.
func putBelow(t *testing.T, low block.Storage, i int) {
	t.Helper()
	d := data(i)
	if err := low.Put(context.Background(), k(i), d, block.Checksum(d), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

const bs = 8 << 10

func data(i int) []byte {
	b := make([]byte, bs)
	for j := range b {
		b[j] = byte(i*31 + j)
	}
	return b
}

func k(i int) block.Key { return block.NewKey("default", uint64(i)) }

func newManager(t *testing.T, lower Lower, blocks int) *Manager {
	t.Helper()
	dc := dram.DefaultConfig()
	dc.Capacity = int64(blocks) * bs
	m, err := New(DefaultConfig(), dc, lower, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func put(t *testing.T, m *Manager, i int, opts block.PutOptions) error {
	t.Helper()
	d := data(i)
	return m.Put(context.Background(), k(i), d, block.Checksum(d), opts)
}

func TestWriteBackDemotesAndPromotes(t *testing.T) {
	low := newMemLower()
	m := newManager(t, low, 4)
	ctx := context.Background()
	for i := range 10 {
		if err := put(t, m, i, block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Six evicted blocks went down; all ten are visible and readable.
	if st := m.Stats(); st.Demotions != 6 || low.Len() != 6 {
		t.Fatalf("demotions %d, lower holds %d", st.Demotions, low.Len())
	}
	for i := range 10 {
		if !m.Contains(k(i)) {
			t.Fatalf("block %d lost", i)
		}
		ref, err := m.Get(ctx, k(i), block.GetOptions{})
		if err != nil {
			t.Fatalf("get %d: %v", i, err)
		}
		if string(ref.Data) != string(data(i)) {
			t.Fatalf("block %d: wrong bytes", i)
		}
		ref.Release()
	}
	st := m.Stats()
	if st.LowerHits == 0 || st.Promotions == 0 {
		t.Fatalf("no lower-tier hits or promotions: %+v", st)
	}
	// A promoted block is clean: evicting it again writes nothing new.
	puts := low.Counts().Puts
	for i := 100; i < 104; i++ {
		if err := put(t, m, i, block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := low.Counts().Puts - puts; n > 4 {
		t.Fatalf("clean promoted blocks were rewritten: %d lower puts for 4 new blocks", n)
	}
}

func TestWriteThroughAndConflictAcrossTiers(t *testing.T) {
	low := newMemLower()
	m := newManager(t, low, 4)
	ctx := context.Background()
	if err := put(t, m, 1, block.PutOptions{WriteThrough: true}); err != nil {
		t.Fatal(err)
	}
	if !low.Contains(k(1)) {
		t.Fatal("write-through put did not reach the lower tier before acking")
	}
	// A block that lives only below: a different-bytes put is a conflict, an
	// identical put is idempotent.
	putBelow(t, low, 7)
	other := data(8)
	if err := m.Put(ctx, k(7), other, block.Checksum(other), block.PutOptions{}); !errors.Is(err, block.ErrConflict) {
		t.Fatalf("conflict with a lower-tier block: got %v", err)
	}
	if err := put(t, m, 7, block.PutOptions{}); err != nil {
		t.Fatalf("idempotent re-put of a lower-tier block: %v", err)
	}
	// Write-through failure fails the put and stores nothing.
	low.FailPuts(block.ErrUnavailable)
	if err := put(t, m, 9, block.PutOptions{WriteThrough: true}); !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("got %v", err)
	}
	if m.Contains(k(9)) {
		t.Fatal("failed write-through left the block in DRAM")
	}
}

func TestDeleteAndListAcrossTiers(t *testing.T) {
	low := newMemLower()
	m := newManager(t, low, 2)
	ctx := context.Background()
	for i := range 5 {
		if err := put(t, m, i, block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	infos, err := m.List(ctx, "default", "", "", 0)
	if err != nil || len(infos) != 5 {
		t.Fatalf("list: %d, %v", len(infos), err)
	}
	for i := 1; i < len(infos); i++ {
		if infos[i-1].Key.ObjectName() >= infos[i].Key.ObjectName() {
			t.Fatal("list not in order")
		}
	}
	if got, _ := m.List(ctx, "default", "", "", 3); len(got) != 3 {
		t.Fatalf("limit: %d", len(got))
	}
	for i := range 5 {
		if err := m.Delete(ctx, k(i)); err != nil {
			t.Fatalf("delete %d: %v", i, err)
		}
		if m.Contains(k(i)) {
			t.Fatalf("block %d still present", i)
		}
	}
	if err := m.Delete(ctx, k(0)); !errors.Is(err, block.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

func TestDemoteAdmissionFilters(t *testing.T) {
	low := newMemLower()
	dc := dram.DefaultConfig()
	dc.Capacity = 2 * bs
	cfg := DefaultConfig()
	cfg.DemoteAdmission = denyAll{}
	m, err := New(cfg, dc, low, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for i := range 5 {
		if err := put(t, m, i, block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if st := m.Stats(); st.DemoteSkipped != 3 || low.Len() != 0 {
		t.Fatalf("admission ignored: %+v, lower %d", st, low.Len())
	}
}

// TestOnDropReportsBlocksThatLeaveTheNode: every eviction that loses a block
// is reported exactly once, and deletes and demotions are not.
func TestOnDropReportsBlocksThatLeaveTheNode(t *testing.T) {
	type rec struct {
		mu   sync.Mutex
		keys []block.Key
	}
	newM := func(lower Lower, admit bool) (*Manager, *rec) {
		r := &rec{}
		cfg := DefaultConfig()
		cfg.OnDrop = func(k block.Key) { r.mu.Lock(); r.keys = append(r.keys, k); r.mu.Unlock() }
		if !admit {
			cfg.DemoteAdmission = denyAll{}
		}
		dc := dram.DefaultConfig()
		dc.Capacity = 4 * bs
		m, err := New(cfg, dc, lower, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m, r
	}
	tests := []struct {
		name      string
		lower     Lower
		admit     bool
		wantDrops int
	}{
		{"dram only", nil, true, 6},
		{"write-back keeps everything", newMemLower(), true, 0},
		{"admission refuses", newMemLower(), false, 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, r := newM(tc.lower, tc.admit)
			for i := range 10 {
				if err := put(t, m, i, block.PutOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if err := m.Delete(context.Background(), k(9)); err != nil {
				t.Fatal(err)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			if len(r.keys) != tc.wantDrops || m.Stats().Drops != uint64(tc.wantDrops) {
				t.Fatalf("drops %v (stats %d), want %d", r.keys, m.Stats().Drops, tc.wantDrops)
			}
			for _, key := range r.keys {
				if m.Contains(key) {
					t.Fatalf("reported %v as dropped but it is still here", key)
				}
			}
		})
	}
	t.Run("lower eviction", func(t *testing.T) {
		low := newMemLower()
		m, r := newM(low, true)
		if err := put(t, m, 1, block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		m.LowerEvicted(k(1), nil, 0) // DRAM still holds it: not gone
		m.LowerEvicted(k(2), nil, 0) // only the lower tier had it
		if len(r.keys) != 1 || r.keys[0] != k(2) {
			t.Fatalf("drops %v", r.keys)
		}
	})
}

type denyAll struct{}

func (denyAll) Record(uint64)     {}
func (denyAll) Admit(uint64) bool { return false }

// evict removes k from the lower tier the way the NVMe tier's reclaim does:
// out of its index first, then the manager hears of it through LowerEvicted.
func evict(l *blocktest.Tier, m *Manager, k block.Key) {
	d := l.Data(k)
	if d != nil && l.Delete(context.Background(), k) == nil {
		m.LowerEvicted(k, d, block.Checksum(d))
	}
}

// TestOnDropExactlyWhenNoTierHoldsTheBlock: the cluster index names this
// node as a holder until OnDrop says otherwise, so a drop must be reported
// once the block is in no tier, whichever tier let it go last, and never
// while a tier still holds it. In particular a clean DRAM copy (written
// through, promoted, or re-put) whose lower-tier copy was evicted is the
// node's last copy: evicting it is a drop.
func TestOnDropExactlyWhenNoTierHoldsTheBlock(t *testing.T) {
	type op struct {
		do string // "put", "putwt" (write-through), "get", "lowerEvict", "fill" (evicts all of DRAM)
		i  int
	}
	tests := []struct {
		name  string
		ops   []op
		drops []int // the keys reported, in order
	}{
		{"write-through, lower evicts, then dram evicts the clean copy",
			[]op{{"putwt", 1}, {"lowerEvict", 1}, {"fill", 0}}, []int{1}},
		{"write-back promoted copy, lower evicts, then dram evicts",
			[]op{{"put", 1}, {"fill", 0}, {"get", 1}, {"lowerEvict", 1}, {"fill", 0}}, []int{1}},
		{"re-put of a block already below, lower evicts, then dram evicts",
			[]op{{"put", 1}, {"fill", 0}, {"put", 1}, {"lowerEvict", 1}, {"fill", 0}}, []int{1}},
		{"dram evicts the clean copy first, then the lower tier",
			[]op{{"putwt", 1}, {"fill", 0}, {"lowerEvict", 1}}, []int{1}},
		{"clean copy evicted while the lower tier keeps it",
			[]op{{"putwt", 1}, {"fill", 0}}, nil},
		{"dirty dram copy outlives a stale lower copy and is demoted again",
			[]op{{"put", 1}, {"lowerEvict", 1}, {"fill", 0}}, nil},
		{"lower evicts a block dram never had",
			[]op{{"put", 1}, {"fill", 0}, {"lowerEvict", 1}}, []int{1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			low := newMemLower()
			var mu sync.Mutex
			var dropped []block.Key
			cfg := DefaultConfig()
			cfg.OnDrop = func(k block.Key) { mu.Lock(); dropped = append(dropped, k); mu.Unlock() }
			dc := dram.DefaultConfig()
			dc.Capacity = 4 * bs
			m, err := New(cfg, dc, low, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			touched := map[block.Key]bool{}
			next := 100 // filler keys
			for _, o := range tc.ops {
				switch o.do {
				case "put", "putwt":
					touched[k(o.i)] = true
					if err := put(t, m, o.i, block.PutOptions{WriteThrough: o.do == "putwt"}); err != nil {
						t.Fatal(err)
					}
				case "get":
					ref, err := m.Get(ctx, k(o.i), block.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					ref.Release()
				case "lowerEvict":
					evict(low, m, k(o.i))
				case "fill":
					for range 4 { // write-through fillers: DRAM evicts them clean, never drops them
						if err := put(t, m, next, block.PutOptions{WriteThrough: true}); err != nil {
							t.Fatal(err)
						}
						touched[k(next)] = true
						next++
					}
				}
				// The invariant after every step: a key is reported iff no
				// tier holds it, and at most once.
				mu.Lock()
				seen := map[block.Key]int{}
				for _, d := range dropped {
					seen[d]++
				}
				mu.Unlock()
				for key := range touched {
					if held := m.Contains(key); held == (seen[key] > 0) || seen[key] > 1 {
						t.Fatalf("after %s %d: %v held=%v, reported %d times", o.do, o.i, key, held, seen[key])
					}
				}
			}
			var want []block.Key
			for _, i := range tc.drops {
				want = append(want, k(i))
			}
			mu.Lock()
			defer mu.Unlock()
			if fmt.Sprint(dropped) != fmt.Sprint(want) || m.Stats().Drops != uint64(len(want)) {
				t.Fatalf("drops %v (stats %d), want %v", dropped, m.Stats().Drops, want)
			}
		})
	}
}
