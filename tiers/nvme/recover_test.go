package nvme

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/descriptor"
)

func TestReopenKeepsBlocksDeletesAndPins(t *testing.T) {
	cfg := testConfig(t.TempDir())
	tr := open(t, cfg)
	ctx := context.Background()
	for i := range uint64(40) { // spans several segments
		put(t, tr, key(i), payload(i, 50000), block.PutOptions{})
	}
	if err := tr.Delete(ctx, key(39)); err != nil { // the newest block: right below the head
		t.Fatal(err)
	}
	if err := tr.Delete(ctx, key(5)); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Hour)
	if err := tr.Pin(ctx, key(7), until); err != nil {
		t.Fatal(err)
	}
	before := tr.Stats()
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	tr = open(t, cfg)
	defer tr.Close()
	rep := tr.Recovery()
	if rep.Dropped != 0 || rep.Reindexed != 0 || rep.Entries != 38 {
		t.Fatalf("clean reopen repaired something: %+v", rep)
	}
	after := tr.Stats()
	if after.Blocks != before.Blocks || after.ResidentBytes != before.ResidentBytes || after.UsedBytes != before.UsedBytes {
		t.Fatalf("stats before close %+v, after reopen %+v", before, after)
	}
	for i := range uint64(40) {
		if i == 5 || i == 39 {
			if tr.Contains(key(i)) {
				t.Fatalf("deleted block %d came back", i)
			}
			continue
		}
		mustGet(t, tr, key(i), payload(i, 50000))
	}
	if info, _ := tr.Stat(ctx, key(7)); !info.PinnedUntil.Equal(time.Unix(0, until.UnixNano())) {
		t.Fatalf("pin lost: %+v", info)
	}
	// Appends continue after reopen.
	put(t, tr, key(100), payload(100, 3000), block.PutOptions{})
	mustGet(t, tr, key(100), payload(100, 3000))
}

// writeUnindexed writes an extent for k as a put would, but stops before the
// index commit, as a crash between the two would.
func writeUnindexed(t *testing.T, tr *Tier, k block.Key, data []byte) reservation {
	t.Helper()
	tr.wmu.Lock()
	r, err := tr.reserve(context.Background(), descriptor.ExtentLen(int64(len(data))), false)
	tr.wmu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	h := header{Key: k, Sum: block.Checksum(data), Length: int64(len(data)), Gen: r.gen, Created: time.Now().UnixNano()}
	if err := tr.writeExtent(r, &h, data); err != nil {
		t.Fatal(err)
	}
	tr.finish(r)
	return r
}

func TestRecoveryReindexesTailAndCutsTornExtent(t *testing.T) {
	cfg := testConfig(t.TempDir())
	tr := open(t, cfg)
	put(t, tr, key(1), payload(1, 30000), block.PutOptions{})
	writeUnindexed(t, tr, key(2), payload(2, 30000))
	r := writeUnindexed(t, tr, key(3), payload(3, 30000))
	if tr.Contains(key(2)) {
		t.Fatal("unindexed extent visible")
	}
	path := r.seg.path
	tr.Close()
	// Tear the last extent: keep its header page and half of its payload.
	if err := os.Truncate(path, r.off+HeaderSize+12288); err != nil {
		t.Fatal(err)
	}
	tr = open(t, cfg)
	rep := tr.Recovery()
	if rep.Reindexed != 1 || rep.Truncated != HeaderSize+12288 || rep.Dropped != 0 {
		t.Fatalf("recovery %+v", rep)
	}
	mustGet(t, tr, key(1), payload(1, 30000))
	mustGet(t, tr, key(2), payload(2, 30000))
	if tr.Contains(key(3)) {
		t.Fatal("torn extent indexed")
	}
	// The tier appends over the torn tail, and a second reopen agrees.
	put(t, tr, key(4), payload(4, 30000), block.PutOptions{})
	tr.Close()
	tr = open(t, cfg)
	defer tr.Close()
	if rep := tr.Recovery(); rep.Reindexed != 0 || rep.Dropped != 0 || rep.Truncated != 0 || rep.Entries != 3 {
		t.Fatalf("second recovery %+v", rep)
	}
	for _, i := range []uint64{1, 2, 4} {
		mustGet(t, tr, key(i), payload(i, 30000))
	}
}

func TestRecoveryDropsEntriesOutsideTheirSegment(t *testing.T) {
	cfg := testConfig(t.TempDir())
	tr := open(t, cfg)
	for i := range uint64(3) {
		put(t, tr, key(i), payload(i, 20000), block.PutOptions{})
	}
	d, release, err := tr.Descriptor(context.Background(), key(2))
	if err != nil {
		t.Fatal(err)
	}
	release()
	tr.Close()
	// Lose the last extent (as if the segment write never reached the disk).
	if err := os.Truncate(d.Path, d.Offset); err != nil {
		t.Fatal(err)
	}
	tr = open(t, cfg)
	defer tr.Close()
	if rep := tr.Recovery(); rep.Dropped != 1 || rep.Entries != 2 {
		t.Fatalf("recovery %+v", tr.Recovery())
	}
	if tr.Contains(key(2)) || tr.Stats().Blocks != 2 {
		t.Fatal("entry beyond its segment kept")
	}
	mustGet(t, tr, key(0), payload(0, 20000))
	mustGet(t, tr, key(1), payload(1, 20000))
}

func TestVerifyOnOpenDropsHeaderMismatch(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.VerifyOnOpen = true
	tr := open(t, cfg)
	for i := range uint64(3) {
		put(t, tr, key(i), payload(i, 20000), block.PutOptions{})
	}
	d, release, _ := tr.Descriptor(context.Background(), key(0))
	release()
	tr.Close()
	flip(t, d.Path, d.Offset+20) // the payload CRC field of the header
	tr = open(t, cfg)
	defer tr.Close()
	if rep := tr.Recovery(); rep.Dropped != 1 || rep.Entries != 2 {
		t.Fatalf("recovery %+v", rep)
	}
	if _, err := tr.Get(context.Background(), key(0), block.GetOptions{}); !errors.Is(err, block.ErrNotFound) {
		t.Fatal(err)
	}
}

func TestRecoveryRemovesOrphanSegments(t *testing.T) {
	cfg := testConfig(t.TempDir())
	tr := open(t, cfg)
	put(t, tr, key(1), payload(1, 20000), block.PutOptions{})
	tr.Close()
	// A segment created just before a crash, with nothing valid in it.
	orphan := filepath.Join(cfg.Dir, "segments", segName(99))
	if err := os.WriteFile(orphan, make([]byte, 8192), 0o640); err != nil {
		t.Fatal(err)
	}
	tr = open(t, cfg)
	defer tr.Close()
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Fatalf("orphan segment kept: %v (%+v)", err, tr.Recovery())
	}
	mustGet(t, tr, key(1), payload(1, 20000))
	put(t, tr, key(2), payload(2, 20000), block.PutOptions{})
	mustGet(t, tr, key(2), payload(2, 20000))
}

// TestShardKeysAreDistinctAndSurviveReopen: erasure shards of one block are
// separate entries (index key and extent header carry block.Key.Shard), and
// recovery from headers alone (VerifyOnOpen) keeps them apart.
func TestShardKeysAreDistinctAndSurviveReopen(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.VerifyOnOpen = true
	tr := open(t, cfg)
	whole := key(9).WithPart(2)
	keys := []block.Key{whole, whole.WithShard(0), whole.WithShard(1), whole.WithShard(126)}
	for i, k := range keys {
		put(t, tr, k, payload(uint64(i), 5000), block.PutOptions{})
	}
	check := func() {
		for i, k := range keys {
			mustGet(t, tr, k, payload(uint64(i), 5000))
		}
		infos, err := tr.List(context.Background(), "ns", "", "", 0)
		if err != nil || len(infos) != len(keys) {
			t.Fatalf("list %d entries, %v", len(infos), err)
		}
		seen := map[block.Key]bool{}
		for _, in := range infos {
			seen[in.Key] = true
		}
		for _, k := range keys {
			if !seen[k] {
				t.Fatalf("list lost %v: %+v", k, infos)
			}
		}
	}
	check()
	tr.Close()
	tr = open(t, cfg)
	defer tr.Close()
	if rep := tr.Recovery(); rep.Dropped != 0 || rep.Entries != len(keys) {
		t.Fatalf("recovery %+v", rep)
	}
	check()
}
