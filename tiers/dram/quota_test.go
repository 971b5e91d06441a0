package dram

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// quotaTier is a tier whose namespace quotas are read from a map the test
// may change, with hooks recording every demoted and evicted key.
type quotaTier struct {
	*Tier
	mu      sync.Mutex
	quotas  map[string]int64
	demoted []block.Key
	evicted []block.Key
}

func newQuotaTier(t *testing.T, capacity int64, quotas map[string]int64, writeBack bool) *quotaTier {
	t.Helper()
	q := &quotaTier{quotas: quotas}
	cfg := DefaultConfig()
	cfg.Capacity = capacity
	cfg.Quota = func(ns string) int64 {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.quotas[ns]
	}
	if writeBack {
		cfg.Demote = func(_ context.Context, k block.Key, _ []byte, _ uint32, _ block.Info) {
			q.mu.Lock()
			q.demoted = append(q.demoted, k)
			q.mu.Unlock()
		}
	}
	cfg.Evicted = func(k block.Key) {
		q.mu.Lock()
		q.evicted = append(q.evicted, k)
		q.mu.Unlock()
	}
	tr, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	q.Tier = tr
	return q
}

func nsKey(ns string, i int) block.Key { return block.NewKey(ns, uint64(i)) }

// TestQuotaEvictsOnlyOwnBlocks: a namespace flooding puts past its quota
// evicts (demotes) its own least recently used blocks, never another
// namespace's; a block larger than the quota, or a put when every block of
// the namespace is pinned, is ErrQuotaExceeded and changes nothing.
func TestQuotaEvictsOnlyOwnBlocks(t *testing.T) {
	const bs = 4096
	tests := []struct {
		name       string
		writeBack  bool
		quota      int64 // tenant-a's quota
		aPuts      int
		aSize      int
		pinA       bool
		wantErrAt  int // index of the first tenant-a put that fails, -1 for none
		wantAKept  []int
		wantAGone  []int
		wantBBytes int64
	}{
		{name: "write-back flood", writeBack: true, quota: 4 * bs, aPuts: 20, aSize: bs, wantErrAt: -1,
			wantAKept: []int{16, 17, 18, 19}, wantAGone: []int{0, 1, 2, 15}, wantBBytes: 10 * bs},
		{name: "dram only flood", quota: 3 * bs, aPuts: 9, aSize: bs, wantErrAt: -1,
			wantAKept: []int{6, 7, 8}, wantAGone: []int{0, 5}, wantBBytes: 10 * bs},
		{name: "unaligned sizes", writeBack: true, quota: 10000, aPuts: 10, aSize: 3000, wantErrAt: -1,
			wantAKept: []int{7, 8, 9}, wantAGone: []int{0, 6}, wantBBytes: 10 * bs},
		{name: "block above quota", writeBack: true, quota: bs - 1, aPuts: 1, aSize: bs, wantErrAt: 0, wantBBytes: 10 * bs},
		{name: "everything of a pinned", writeBack: true, quota: 2 * bs, aPuts: 3, aSize: bs, pinA: true, wantErrAt: 2,
			wantAKept: []int{0, 1}, wantBBytes: 10 * bs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newQuotaTier(t, 1<<20, map[string]int64{"tenant-a": tt.quota}, tt.writeBack)
			ctx := context.Background()
			for i := range 10 {
				if err := put(t, q.Tier, nsKey("tenant-b", i), payload(uint64(100+i), bs), block.PutOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			for i := range tt.aPuts {
				opts := block.PutOptions{}
				if tt.pinA {
					opts.PinTTL = time.Hour
				}
				err := put(t, q.Tier, nsKey("tenant-a", i), payload(uint64(i), tt.aSize), opts)
				switch {
				case i == tt.wantErrAt:
					if !errors.Is(err, block.ErrQuotaExceeded) {
						t.Fatalf("put %d: %v, want ErrQuotaExceeded", i, err)
					}
				case err != nil:
					t.Fatalf("put %d: %v", i, err)
				}
				if got := q.NamespaceBytes()["tenant-a"]; got > tt.quota {
					t.Fatalf("after put %d tenant-a holds %d bytes, quota %d", i, got, tt.quota)
				}
			}
			for i := range 10 {
				ref, err := q.Get(ctx, nsKey("tenant-b", i), block.GetOptions{})
				if err != nil {
					t.Fatalf("tenant-b block %d lost: %v", i, err)
				}
				ref.Release()
			}
			for _, i := range tt.wantAKept {
				if !q.Contains(nsKey("tenant-a", i)) {
					t.Fatalf("tenant-a block %d evicted; the most recent ones must stay", i)
				}
			}
			for _, i := range tt.wantAGone {
				if q.Contains(nsKey("tenant-a", i)) {
					t.Fatalf("tenant-a block %d still resident over the quota", i)
				}
			}
			nb := q.NamespaceBytes()
			if nb["tenant-b"] != tt.wantBBytes {
				t.Fatalf("tenant-b accounted %d bytes, want %d", nb["tenant-b"], tt.wantBBytes)
			}
			q.mu.Lock()
			defer q.mu.Unlock()
			for _, k := range append(q.demoted, q.evicted...) {
				if k.Namespace != "tenant-a" {
					t.Fatalf("%s was evicted for tenant-a's quota", k)
				}
			}
			st := q.Stats()
			if wantEv := uint64(len(q.evicted)); st.QuotaEvictions != wantEv {
				t.Fatalf("QuotaEvictions %d, want %d (every eviction here is a quota's)", st.QuotaEvictions, wantEv)
			}
			if tt.writeBack && len(q.demoted) != len(q.evicted) {
				t.Fatalf("%d demoted, %d evicted: every write-back eviction must be offered to the lower tier", len(q.demoted), len(q.evicted))
			}
			if tt.wantErrAt >= 0 && st.QuotaRefused == 0 {
				t.Fatal("a refused put was not counted")
			}
		})
	}
}

// TestQuotaLRUAndChanges: the victim is the namespace's least recently
// used block (a read refreshes it); lowering a quota takes effect at the
// namespace's next put; deletes and quota-free namespaces are accounted.
func TestQuotaLRUAndChanges(t *testing.T) {
	const bs = 4096
	q := newQuotaTier(t, 1<<20, map[string]int64{"a": 4 * bs}, true)
	ctx := context.Background()
	for i := range 4 {
		if err := put(t, q.Tier, nsKey("a", i), payload(uint64(i), bs), block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ref, err := q.Get(ctx, nsKey("a", 0), block.GetOptions{}) // a/0 becomes the most recent
	if err != nil {
		t.Fatal(err)
	}
	ref.Release()
	if err := put(t, q.Tier, nsKey("a", 4), payload(4, bs), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		key  int
		want bool
	}{{0, true}, {1, false}, {2, true}, {3, true}, {4, true}}
	for _, s := range steps {
		if got := q.Contains(nsKey("a", s.key)); got != s.want {
			t.Fatalf("a/%d resident=%v, want %v", s.key, got, s.want)
		}
	}
	// Lower the quota to two blocks: the next put evicts down to it.
	q.mu.Lock()
	q.quotas["a"] = 2 * bs
	q.mu.Unlock()
	if err := put(t, q.Tier, nsKey("a", 5), payload(5, bs), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := q.NamespaceBytes()["a"]; got != 2*bs {
		t.Fatalf("after lowering the quota a holds %d bytes, want %d", got, 2*bs)
	}
	// A namespace without a quota is accounted too; deletes uncharge.
	if err := put(t, q.Tier, nsKey("free", 1), payload(9, 100), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := q.NamespaceBytes()["free"]; got != 100 {
		t.Fatalf("free holds %d bytes, want 100", got)
	}
	if err := q.Delete(ctx, nsKey("free", 1)); err != nil {
		t.Fatal(err)
	}
	if _, ok := q.NamespaceBytes()["free"]; ok {
		t.Fatal("an emptied namespace keeps an account")
	}
}

// TestQuotaConcurrentPuts: many goroutines putting into one namespace never
// take it over its quota (reservations count), and the accounts always
// equal the bytes of the resident blocks.
func TestQuotaConcurrentPuts(t *testing.T) {
	const bs, quota = 4096, 8 * 4096
	q := newQuotaTier(t, 4<<20, map[string]int64{"a": quota}, true)
	var wg sync.WaitGroup
	var over, refused atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				k := nsKey("a", g*1000+i)
				err := q.Put(context.Background(), k, payload(uint64(g*1000+i), bs), block.Checksum(payload(uint64(g*1000+i), bs)), block.PutOptions{})
				if errors.Is(err, block.ErrQuotaExceeded) {
					refused.Add(1) // every block of a was being demoted at that moment
				} else if err != nil {
					t.Error(err)
					return
				}
				if q.NamespaceBytes()["a"] > quota {
					over.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if over.Load() > 0 {
		t.Fatalf("namespace a went over its quota %d times", over.Load())
	}
	infos, err := q.List(context.Background(), "a", "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, in := range infos {
		sum += in.Size
	}
	if got := q.NamespaceBytes()["a"]; got != sum || sum > quota || sum == 0 {
		t.Fatalf("account %d bytes, resident %d bytes, quota %d", got, sum, quota)
	}
	t.Logf("%d puts refused while all of a's blocks were being demoted", refused.Load())
}

// TestQuotaFromResolvedNamespace: a put whose options carry the namespace
// the store resolved for it (PutOptions.Namespace) takes the quota from
// there and does not look the namespace up again; a put without it, or
// with another namespace's, asks Config.Quota.
func TestQuotaFromResolvedNamespace(t *testing.T) {
	var asked atomic.Int64
	cfg := DefaultConfig()
	cfg.Capacity = 64 * PageSize
	cfg.Quota = func(ns string) int64 { asked.Add(1); return 0 }
	tr, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	ctx := context.Background()
	resolved := block.PutOptions{Namespace: block.Namespace{Name: "q", Quota: block.Quota{DRAM: 2 * PageSize}}}
	data := make([]byte, PageSize)
	for i := range 3 {
		data[0] = byte(i)
		err := tr.Put(ctx, nsKey("q", i), data, block.Checksum(data), resolved)
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Fatalf("Config.Quota asked %d times for puts that carried their namespace", n)
	}
	// The resolved quota (2 pages) held: the third put evicted the first.
	if got := tr.NamespaceBytes()["q"]; got != 2*PageSize {
		t.Fatalf("namespace q holds %d bytes, want its resolved quota %d", got, 2*PageSize)
	}
	other := block.PutOptions{Namespace: block.Namespace{Name: "other"}}
	for i, opts := range []block.PutOptions{{}, other} {
		data[0] = byte(10 + i)
		if err := tr.Put(ctx, nsKey("q", 10+i), data, block.Checksum(data), opts); err != nil {
			t.Fatal(err)
		}
		if n := asked.Load(); n != int64(i+1) {
			t.Fatalf("put %d without q's options: Config.Quota asked %d times, want %d", i, n, i+1)
		}
	}
}
