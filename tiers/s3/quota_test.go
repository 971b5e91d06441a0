package s3

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// dropLog records the tier's OnDrop reports.
type dropLog struct {
	mu   sync.Mutex
	keys []block.Key
}

func (d *dropLog) add(k block.Key) { d.mu.Lock(); d.keys = append(d.keys, k); d.mu.Unlock() }

func (d *dropLog) list() []block.Key {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.keys)
}

func nsKey(ns string, i int) block.Key { return block.NewKey(ns, uint64(i)+1) }

// quotaTier opens a tier on the real S3 server with the given S3 quotas.
func quotaTier(t *testing.T, v *versity, cfg Config, quotas map[string]int64) (*Tier, *dropLog) {
	t.Helper()
	drops := &dropLog{}
	cfg.Quota = func(ns string) int64 { return quotas[ns] }
	cfg.OnDrop = drops.add
	tr := v.open(t, cfg)
	waitFor(t, "index rebuilt", tr.Rebuilt)
	return tr, drops
}

func putNS(t *testing.T, tr *Tier, ns string, i, size int, opts block.PutOptions) error {
	t.Helper()
	d := blockData(i, size)
	return tr.Put(context.Background(), nsKey(ns, i), d, block.Checksum(d), opts)
}

func readNS(t *testing.T, tr *Tier, ns string, i, size int) error {
	t.Helper()
	ref, err := tr.Get(context.Background(), nsKey(ns, i), block.GetOptions{})
	if err != nil {
		return err
	}
	defer ref.Release()
	if !bytes.Equal(ref.Data, blockData(i, size)) {
		t.Fatalf("%s/%d: wrong bytes", ns, i)
	}
	return nil
}

// TestVersityS3Quota checks per-namespace accounting and the quota against
// versitygw: a flood keeps its namespace within the quota by forgetting its
// own least recently used blocks (each reported dropped), never another
// namespace's or a pinned one; what cannot fit is QuotaExceeded; the
// accounting survives a reopen and a rebuild from the bucket.
func TestVersityS3Quota(t *testing.T) {
	v := startVersity(t)
	ctx := context.Background()
	const size = 10 << 10
	cases := []struct {
		name   string
		quotas map[string]int64
		run    func(t *testing.T, tr *Tier, drops *dropLog)
	}{
		{"flood stays within quota, others untouched", map[string]int64{"a": 10 * size}, func(t *testing.T, tr *Tier, drops *dropLog) {
			for i := range 8 {
				if err := putNS(t, tr, "b", i, size, block.PutOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 40 {
				if err := putNS(t, tr, "a", i, size, block.PutOptions{}); err != nil {
					t.Fatalf("put a/%d: %v", i, err)
				}
				if i == 5 { // block 0 read again: most recently used
					if err := readNS(t, tr, "a", 0, size); err != nil {
						t.Fatal(err)
					}
				}
				if got := tr.NamespaceBytes()["a"]; got > 10*size {
					t.Fatalf("after put %d namespace a holds %d bytes, quota %d", i, got, 10*size)
				}
				if i%9 == 0 {
					if err := tr.Flush(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := tr.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			nb := tr.NamespaceBytes()
			if nb["a"] != 10*size || nb["b"] != 8*size {
				t.Fatalf("namespace bytes %v, want a=%d b=%d", nb, 10*size, 8*size)
			}
			for i := range 8 {
				if err := readNS(t, tr, "b", i, size); err != nil {
					t.Fatalf("b/%d: %v", i, err)
				}
			}
			for i := 30; i < 40; i++ {
				if err := readNS(t, tr, "a", i, size); err != nil {
					t.Fatalf("a/%d (recent): %v", i, err)
				}
			}
			if err := readNS(t, tr, "a", 1, size); !errors.Is(err, block.ErrNotFound) {
				t.Fatalf("a/1 (least recently used) should be gone: %v", err)
			}
			d := drops.list()
			if len(d) != 30 {
				t.Fatalf("%d drops reported, want 30", len(d))
			}
			for _, k := range d {
				if k.Namespace != "a" || tr.Contains(k) {
					t.Fatalf("drop %s: wrong namespace or still held", k)
				}
			}
			if st := tr.Stats(); st.QuotaEvictions != 30 || st.QuotaRefused != 0 {
				t.Fatalf("stats %+v", st)
			}
		}},
		{"a block larger than the quota is refused", map[string]int64{"a": size - 1}, func(t *testing.T, tr *Tier, drops *dropLog) {
			if err := putNS(t, tr, "a", 1, size, block.PutOptions{}); !errors.Is(err, block.ErrQuotaExceeded) {
				t.Fatalf("put: %v, want QuotaExceeded", err)
			}
			d := blockData(2, size)
			tr.Demote(nsKey("a", 2), d, block.Checksum(d))
			if tr.Contains(nsKey("a", 2)) || !slices.Equal(drops.list(), []block.Key{nsKey("a", 2)}) {
				t.Fatalf("refused demotion: held %v, drops %v", tr.Contains(nsKey("a", 2)), drops.list())
			}
			if got := tr.NamespaceBytes()["a"]; got != 0 {
				t.Fatalf("namespace a holds %d bytes", got)
			}
		}},
		{"pinned blocks are never evicted", map[string]int64{"a": 3 * size}, func(t *testing.T, tr *Tier, drops *dropLog) {
			for i := range 3 {
				if err := putNS(t, tr, "a", i, size, block.PutOptions{PinTTL: time.Hour}); err != nil {
					t.Fatal(err)
				}
			}
			if err := putNS(t, tr, "a", 3, size, block.PutOptions{}); !errors.Is(err, block.ErrQuotaExceeded) {
				t.Fatalf("put over pinned blocks: %v, want QuotaExceeded", err)
			}
			if err := tr.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if err := readNS(t, tr, "a", i, size); err != nil {
					t.Fatalf("pinned a/%d: %v", i, err)
				}
			}
			if len(drops.list()) != 0 || tr.Stats().QuotaRefused != 1 {
				t.Fatalf("drops %v, stats %+v", drops.list(), tr.Stats())
			}
		}},
		{"a lowered quota is reached by trimming at a bounded rate", nil, func(t *testing.T, tr *Tier, drops *dropLog) {
			for i := range 20 {
				if err := putNS(t, tr, "a", i, size, block.PutOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if err := tr.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			for _, want := range []int64{16 * size, 12 * size, 8 * size, 5 * size, 5 * size} {
				freed, err := tr.TrimNamespace(ctx, "a", 5*size, 4*size)
				if err != nil {
					t.Fatal(err)
				}
				if got := tr.NamespaceBytes()["a"]; got != want {
					t.Fatalf("after a trim (freed %d) namespace a holds %d, want %d", freed, got, want)
				}
			}
			for i := 15; i < 20; i++ {
				if err := readNS(t, tr, "a", i, size); err != nil {
					t.Fatalf("a/%d: %v", i, err)
				}
			}
			if len(drops.list()) != 15 {
				t.Fatalf("%d drops, want 15", len(drops.list()))
			}
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := v.config(t, "quota"+string(rune('a'+i)))
			tr, drops := quotaTier(t, v, cfg, tc.quotas)
			tc.run(t, tr, drops)
		})
	}
}

// TestVersityS3QuotaAccountingRebuilt checks that the per-namespace bytes
// are rebuilt with the index: from the journal on reopen, and from the
// bucket when the local index is lost.
func TestVersityS3QuotaAccountingRebuilt(t *testing.T) {
	v := startVersity(t)
	ctx := context.Background()
	cfg := v.config(t, "quotarebuild")
	tr, _ := quotaTier(t, v, cfg, map[string]int64{"a": 6 << 10})
	for i := range 10 {
		if err := putNS(t, tr, "a", i, 1<<10, block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := putNS(t, tr, "b", i, 2<<10, block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Delete(ctx, nsKey("b", 0)); err != nil {
		t.Fatal(err)
	}
	if err := tr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"a": 6 << 10, "b": 9 * 2 << 10}
	if got := tr.NamespaceBytes(); got["a"] != want["a"] || got["b"] != want["b"] {
		t.Fatalf("before close: %v, want %v", got, want)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		dir  string
	}{{"journal", cfg.Dir}, {"bucket", t.TempDir()}} {
		t.Run(c.name, func(t *testing.T) {
			rc := cfg
			rc.Dir = c.dir
			tr, _ := quotaTier(t, v, rc, nil)
			got := tr.NamespaceBytes()
			if c.name == "journal" && (got["a"] != want["a"] || got["b"] != want["b"]) {
				t.Fatalf("reopened from the journal: %v, want %v", got, want)
			}
			// From the bucket, forgotten blocks whose packs are still
			// there come back (deletes are local until compaction); the
			// count must match what the index holds.
			for _, ns := range []string{"a", "b"} {
				list, err := tr.List(ctx, ns, "", "", 0)
				if err != nil {
					t.Fatal(err)
				}
				var sum int64
				for _, in := range list {
					sum += in.Size
				}
				if sum != got[ns] || sum < want[ns] {
					t.Fatalf("reopened from the %s: namespace %s counts %d bytes, its blocks total %d (at least %d)", c.name, ns, got[ns], sum, want[ns])
				}
			}
		})
	}
}
