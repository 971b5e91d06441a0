package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/client"
	"github.com/ctxtier/ctxtier/tiers/s3/s3test"
)

// TestS3TierProcess runs a real ctxd over DRAM, NVMe and S3 (a real
// versitygw): it puts eight times what DRAM and NVMe hold together, so most
// blocks end in S3, and reads every block back with the right bytes. It
// then stops ctxd, throws its NVMe directory away (a lost disk) and its S3
// index with it, restarts, and reads every block that had reached S3 again:
// the node rebuilds its S3 index from the bucket and restores from there.
func TestS3TierProcess(t *testing.T) {
	gw := s3test.Start(t)
	dataDir := t.TempDir()
	nvmeDir := filepath.Join(t.TempDir(), "nvme")
	args := []string{"--data-dir", dataDir, "--node-id", "s3proc",
		"--dram-capacity", "8MiB", "--max-block-size", "2MiB",
		"--nvme-dir", nvmeDir, "--nvme-capacity", "16MiB", "--nvme-segment-size", "4MiB",
		"--s3-endpoint", gw.Addr, "--s3-bucket", "ctxd-proc", "--s3-prefix", "pod",
		"--s3-access-key", s3test.Access, "--s3-secret-key", s3test.Secret}
	const n, size = 192, 1 << 20 // 192 MiB through 24 MiB of DRAM + NVMe
	p := startCtxd(t, args...)
	ctx := withTimeout(t, 3*time.Minute)
	c, err := client.Dial(ctx, p.Native, client.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := c.Put(ctx, block.NewKey("default", uint64(i)), blockBytes(i, size)); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	const hits, uploads = `ctxtier_tier_hits_total{tier="s3"}`, `ctxtier_tier_s3_uploads_total{tier="s3"}`
	// Solo packs (1 MiB blocks) are uploaded as soon as they are demoted.
	waitFor(t, 30*time.Second, "S3 uploads to settle", func() bool {
		return metricValue(t, p.HTTP, `ctxtier_tier_s3_pending_packs{tier="s3"}`) == 0 &&
			metricValue(t, p.HTTP, `ctxtier_tier_s3_buffered_bytes{tier="s3"}`) == 0
	})
	inS3 := metricValue(t, p.HTTP, `ctxtier_tier_blocks{tier="s3"}`)
	if up := metricValue(t, p.HTTP, uploads); up < n/2 || inS3 < n/2 {
		t.Fatalf("%v packs uploaded, %v blocks in S3; want most of %d", up, inS3, n)
	}
	check := func(c *client.Client, when string, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			got, err := c.Get(ctx, block.NewKey("default", uint64(i)))
			if err != nil {
				t.Fatalf("%s: block %d: %v", when, i, err)
			}
			if !bytes.Equal(got, blockBytes(i, size)) {
				t.Fatalf("%s: block %d: wrong bytes", when, i)
			}
		}
	}
	// The oldest blocks were demoted first: the first half is in S3 only.
	check(c, "running", 0, n)
	if h := metricValue(t, p.HTTP, hits); h < n/4 {
		t.Fatalf("only %v gets were served by S3", h)
	}
	c.Close()
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}

	// The disk is lost: NVMe and the S3 tier's local index go.
	if err := os.RemoveAll(nvmeDir); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dataDir, "s3-index")); err != nil {
		t.Fatal(err)
	}
	p2 := startCtxd(t, args...)
	waitFor(t, 60*time.Second, "the S3 index rebuild", func() bool {
		return metricValue(t, p2.HTTP, `ctxtier_tier_s3_index_rebuilding{tier="s3"}`) == 0
	})
	if got := metricValue(t, p2.HTTP, `ctxtier_tier_blocks{tier="s3"}`); got < inS3 {
		t.Fatalf("rebuilt an S3 index of %v blocks, want at least %v", got, inS3)
	}
	c2, err := client.Dial(ctx, p2.Native, client.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	before := metricValue(t, p2.HTTP, hits)
	check(c2, "after losing NVMe", 0, n/4)
	if h := metricValue(t, p2.HTTP, hits) - before; h < n/4 {
		t.Fatalf("after the restart S3 served %v of %d gets", h, n/4)
	}
}
