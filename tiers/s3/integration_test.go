package s3

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/tiers"
	"github.com/ctxtier/ctxtier/tiers/dram"
	"github.com/ctxtier/ctxtier/tiers/nvme"
)

// TestVersityDemoteEvictRestore runs the whole stack: DRAM over a chain of
// NVMe then S3 (versitygw). Puts overflow DRAM into NVMe and NVMe into S3,
// in packs of hundreds of blocks uploaded with multipart; every block is
// then read back through the manager with its checksum checked, most of
// them restored from S3 and promoted.
func TestVersityDemoteEvictRestore(t *testing.T) {
	v := startVersity(t)
	ctx := context.Background()
	s3t := v.open(t, v.config(t, "e2e"))

	ncfg := nvme.DefaultConfig()
	ncfg.Dir = t.TempDir()
	ncfg.SegmentSize = 1 << 20
	ncfg.Capacity = 4 << 20
	ncfg.MaxBlockSize = 64 << 10
	ncfg.OnEvict = s3t.Demote
	nv, err := nvme.New(ncfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer nv.Close()
	chain, err := tiers.NewChain(true, nv, s3t)
	if err != nil {
		t.Fatal(err)
	}
	dcfg := dram.DefaultConfig()
	dcfg.Capacity = 1 << 20
	dcfg.MaxBlockSize = 64 << 10
	m, err := tiers.New(tiers.DefaultConfig(), dcfg, chain, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	const n, size = 600, 32 << 10 // 19 MiB: 5x NVMe, 19x DRAM
	for i := 0; i < n; i++ {
		d := blockData(i, size)
		if err := m.Put(ctx, key(i), d, block.Checksum(d), block.PutOptions{}); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	if err := s3t.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st := s3t.Stats()
	if st.Blocks < 256 || st.Uploads < 1 || st.Dropped != 0 {
		t.Fatalf("too little reached S3: %+v", st)
	}
	// The first pack holds PackBlocks (256) blocks of 32 KiB: 8 MiB, above
	// the 5 MiB part size, so it went up in parts.
	if l, ok := s3t.Locate(key(0)); !ok || l.Length != size {
		t.Fatalf("block 0 not located in S3: %+v %v", l, ok)
	}
	s3only := 0
	for i := 0; i < n; i++ {
		if !nv.Contains(key(i)) && !m.DRAM().Contains(key(i)) {
			s3only++
		}
	}
	if s3only < 256 {
		t.Fatalf("only %d blocks were evicted from both DRAM and NVMe", s3only)
	}
	fromS3 := 0
	for i := 0; i < n; i++ {
		ref, err := m.Get(ctx, key(i), block.GetOptions{})
		if err != nil {
			t.Fatalf("get %d: %v", i, err)
		}
		want := blockData(i, size)
		if !bytes.Equal(ref.Data, want) || ref.Sum != block.Checksum(want) {
			t.Fatalf("get %d: wrong bytes", i)
		}
		if ref.Tier == block.TierS3 {
			fromS3++
		}
		ref.Release()
	}
	if fromS3 < 200 {
		t.Fatalf("only %d gets came from S3", fromS3)
	}
	if ms := m.Stats(); ms.Promotions < uint64(fromS3) {
		t.Fatalf("S3 hits not promoted: %+v", ms)
	}
	t.Logf("S3: %d packs, %d blocks; %d gets restored from S3; s3 stats %+v", st.Packs, st.Blocks, fromS3, s3t.Stats())
}

// TestVersityRangedReadsOutageAndRecovery reads single blocks out of packs
// with ranged GETs, then stops the server: gets fail fast with
// ErrUnavailable, demotion keeps buffering, and when the server returns the
// buffered packs upload and reads work again.
func TestVersityRangedReadsOutageAndRecovery(t *testing.T) {
	v := startVersity(t)
	ctx := context.Background()
	tr := v.open(t, v.config(t, "ranged"))
	const n = 300
	var total int64
	for i := 0; i < n; i++ {
		d := blockData(i, fmtSize(i))
		total += int64(len(d))
		tr.Demote(key(i), d, block.Checksum(d))
	}
	if err := tr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(objects(t, tr)); got != 2 { // 256 + 44 blocks
		t.Fatalf("%d packs, want 2", got)
	}
	var read int64
	for _, i := range []int{0, 1, 128, 255, 256, 299} {
		mustGet(t, tr, i, fmtSize(i))
		read += int64(fmtSize(i))
	}
	if s := tr.Stats(); s.ReadBytes != uint64(read) {
		t.Fatalf("read %d bytes from S3 for %d bytes of blocks: not ranged", s.ReadBytes, read)
	}

	v.stop()
	// A get with the server down fails (bounded by GetTimeout; the 30 s
	// here only catches a hang, the time is logged).
	start := time.Now()
	_, err := tr.Get(ctx, key(5), block.GetOptions{})
	if !errors.Is(err, block.ErrUnavailable) || time.Since(start) > 30*time.Second {
		t.Fatalf("get with the server down: %v after %v", err, time.Since(start))
	}
	t.Logf("get with the server down failed after %v", time.Since(start))
	tr.Get(ctx, key(6), block.GetOptions{})
	// Then the breaker is open: the next get is refused without asking S3
	// (counted as a fast fail, not as an S3 failure).
	before := tr.Stats()
	start = time.Now()
	_, err = tr.Get(ctx, key(7), block.GetOptions{})
	took := time.Since(start)
	after := tr.Stats()
	if !errors.Is(err, block.ErrUnavailable) || !strings.Contains(err.Error(), "circuit open") {
		t.Fatalf("breaker open: want circuit open, got %v", err)
	}
	if after.FastFails != before.FastFails+1 || after.Unavailable != before.Unavailable || !after.BreakerOpen {
		t.Fatalf("breaker open: the get reached S3 (fast fails %d->%d, unavailable %d->%d, open %v)",
			before.FastFails, after.FastFails, before.Unavailable, after.Unavailable, after.BreakerOpen)
	}
	t.Logf("open breaker refused a get in %v", took)
	for i := n; i < n+20; i++ {
		d := blockData(i, 4000)
		tr.Demote(key(i), d, block.Checksum(d))
	}
	if err := tr.Flush(ctx); !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("flush with the server down: %v", err)
	}
	mustGet(t, tr, n+3, 4000) // buffered: still served

	v.start()
	// The uploader retries on its own (backoff 50..200 ms).
	waitFor(t, "the buffered pack to upload", func() bool { return tr.Stats().BufferedBytes == 0 })
	time.Sleep(350 * time.Millisecond) // breaker cooldown
	mustGet(t, tr, 5, fmtSize(5))
	mustGet(t, tr, n+3, 4000)
	if s := tr.Stats(); s.Blocks != n+20 || s.BreakerOpen || s.UploadErrors == 0 {
		t.Fatalf("after recovery: %+v", s)
	}
}

// TestVersityExpiryCompactionRebuild compacts a mostly-deleted pack, rebuilds
// the index on a fresh node from the bucket, and deletes expired packs.
func TestVersityExpiryCompactionRebuild(t *testing.T) {
	v := startVersity(t)
	ctx := context.Background()
	cfg := v.config(t, "maint")
	cfg.Policy = func(string) Policy { return Policy{Enabled: true, TTL: time.Hour} }
	tr := v.open(t, cfg)
	for i := 0; i < 256; i++ {
		d := blockData(i, 2000)
		tr.Demote(key(i), d, block.Checksum(d))
	}
	if err := tr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		if err := tr.Delete(ctx, key(i)); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := tr.Maintain(ctx)
	if err != nil || rep.Compacted != 1 || rep.Repacked != 56 {
		t.Fatalf("compaction: %+v %v", rep, err)
	}
	rep, err = tr.Maintain(ctx)
	if err != nil || rep.PacksDeleted != 1 || len(objects(t, tr)) != 1 {
		t.Fatalf("old pack not deleted: %+v %v %v", rep, err, objects(t, tr))
	}
	for i := 200; i < 256; i++ {
		mustGet(t, tr, i, 2000)
	}

	// A fresh node (no local index) finds the blocks in the bucket.
	fresh := cfg
	fresh.Dir = t.TempDir()
	tr2 := v.open(t, fresh)
	waitFor(t, "the index rebuild", tr2.Rebuilt)
	if s := tr2.Stats(); s.Blocks != 56 {
		t.Fatalf("rebuilt %d blocks, want 56", s.Blocks)
	}
	mustGet(t, tr2, 230, 2000)

	// Past the TTL everything expires and the packs are deleted.
	tr.setClock(func() time.Time { return time.Now().Add(2 * time.Hour) })
	rep, err = tr.Maintain(ctx)
	if err != nil || rep.Expired != 56 || rep.PacksDeleted != 1 || len(objects(t, tr)) != 0 {
		t.Fatalf("expiry: %+v %v %v", rep, err, objects(t, tr))
	}
}

// TestVersitySoloPacks: against the real server, blocks at or above
// SoloSize get objects of their own and are read back with whole-object
// GETs (minio-go reading the block and draining the index and trailer),
// mixed with ranged reads of packed blocks; a solo pack rebuilds like any
// other.
func TestVersitySoloPacks(t *testing.T) {
	v := startVersity(t)
	ctx := context.Background()
	cfg := v.config(t, "solo")
	cfg.SoloSize = 256 << 10
	s3t := v.open(t, cfg)
	sizes := []int{300 << 10, 4000, 256 << 10, 9000, 1 << 20}
	for i, n := range sizes {
		d := blockData(i, n)
		s3t.Demote(key(i), d, block.Checksum(d))
	}
	if err := s3t.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if s := s3t.Stats(); s.Uploads != 4 || s.Blocks != int64(len(sizes)) {
		t.Fatalf("want 3 solo packs and 1 shared: %+v", s)
	}
	for round := 0; round < 2; round++ { // twice: pooled connections stay usable
		for i, n := range sizes {
			mustGet(t, s3t, i, n)
		}
	}
	if s := s3t.Stats(); s.Corruptions != 0 || s.Unavailable != 0 || s.BufferHits != 0 {
		t.Fatalf("stats: %+v", s)
	}
	// A fresh index rebuilt from the bucket finds the solo packs too.
	cfg.Dir = t.TempDir()
	again := v.open(t, cfg)
	waitFor(t, "the index rebuild", again.Rebuilt)
	if s := again.Stats(); s.Blocks != int64(len(sizes)) || s.Packs != 4 {
		t.Fatalf("rebuilt: %+v", s)
	}
	for i, n := range sizes {
		mustGet(t, again, i, n)
	}
}
