package nvme

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TestRescanSkipsABadExtent: with the index gone, recovery rescans every
// segment. A damaged extent in the middle of a segment (its payload, or
// its header) is skipped, and every extent after it is still found; the
// file is not cut.
func TestRescanSkipsABadExtent(t *testing.T) {
	const n, size = 12, 30000 // about 8 extents per 1 MiB segment
	tests := []struct {
		name   string
		damage func(e entry) int64 // returns the offset in the segment to flip
	}{
		{"bad payload", func(e entry) int64 { return e.off + HeaderSize + 100 }},
		{"bad header", func(e entry) int64 { return e.off + 10 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			tr := open(t, cfg)
			for i := range uint64(n) {
				put(t, tr, key(i), payload(i, size), block.PutOptions{})
			}
			bad := key(3)
			e, ok, err := tr.lookup(bad)
			if err != nil || !ok {
				t.Fatalf("lookup: %v %v", ok, err)
			}
			path := tr.segs[e.seg].path
			var after int // extents after the bad one in its segment
			for i := range uint64(n) {
				if o, _, _ := tr.lookup(key(i)); o.seg == e.seg && o.off > e.off {
					after++
				}
			}
			if after == 0 {
				t.Fatal("test needs extents after the damaged one in its segment")
			}
			if err := tr.Close(); err != nil {
				t.Fatal(err)
			}
			before, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			flip(t, path, tc.damage(e))
			if err := os.RemoveAll(filepath.Join(cfg.Dir, "index")); err != nil {
				t.Fatal(err)
			}
			tr = open(t, cfg)
			defer tr.Close()
			rep := tr.Recovery()
			if rep.Skipped != 1 || rep.SkippedBytes != e.extent() || rep.Truncated != 0 || rep.Reindexed != n-1 {
				t.Fatalf("recovery %+v; want 1 extent (%d bytes) skipped, nothing cut, %d reindexed", rep, e.extent(), n-1)
			}
			if st, err := os.Stat(path); err != nil || st.Size() != before.Size() {
				t.Fatalf("segment size %v (err %v), was %d", st.Size(), err, before.Size())
			}
			if tr.Contains(bad) {
				t.Fatal("the damaged extent was indexed")
			}
			for i := range uint64(n) {
				if key(i) != bad {
					mustGet(t, tr, key(i), payload(i, size))
				}
			}
		})
	}
}

// TestCorruptIndexIsRebuilt: an index that badger cannot open is moved
// aside and rebuilt from the segments; every block comes back.
func TestCorruptIndexIsRebuilt(t *testing.T) {
	cfg := testConfig(t.TempDir())
	tr := open(t, cfg)
	const n = 10
	for i := range uint64(n) {
		put(t, tr, key(i), payload(i, 20000), block.PutOptions{})
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	idx := filepath.Join(cfg.Dir, "index")
	files, err := os.ReadDir(idx)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		// Garbage over every index file, the MANIFEST included.
		if err := os.WriteFile(filepath.Join(idx, f.Name()), []byte("this is not a badger file"), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	tr = open(t, cfg)
	defer tr.Close()
	rep := tr.Recovery()
	if !rep.IndexRebuilt || rep.Reindexed != n {
		t.Fatalf("recovery %+v; want the index rebuilt with %d blocks", rep, n)
	}
	for i := range uint64(n) {
		mustGet(t, tr, key(i), payload(i, 20000))
	}
	aside, _ := filepath.Glob(idx + ".corrupt-*")
	if len(aside) != 1 {
		t.Fatalf("the corrupt index should be kept aside once, found %v", aside)
	}
}
