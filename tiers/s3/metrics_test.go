package s3

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TestCollectorScrape scrapes the collector after two puts uploaded as one
// pack, a hit and a miss, and compares the whole exposition (every name,
// help string, type, label and value) with what ctxd has always exported.
func TestCollectorScrape(t *testing.T) {
	tr := openTest(t, testConfig(t.TempDir()), newMemStore())
	ctx := context.Background()
	for i := range 2 {
		d := blockData(i, 1000)
		if err := tr.Put(ctx, key(i), d, block.Checksum(d), block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mustGet(t, tr, 0, 1000)
	if _, err := tr.Get(ctx, key(9), block.GetOptions{}); !errors.Is(err, block.ErrNotFound) {
		t.Fatalf("get of an absent block: %v", err)
	}
	if err := testutil.CollectAndCompare(NewCollector(tr), strings.NewReader(wantScrape)); err != nil {
		t.Fatal(err)
	}
}

// wantScrape is the exposition after that: one pack of 2118 bytes (two
// blocks and the pack's framing) uploaded, 1000 bytes read.
const wantScrape = `
# HELP ctxtier_tier_blocks Blocks the tier holds.
# TYPE ctxtier_tier_blocks gauge
ctxtier_tier_blocks{tier="s3"} 2
# HELP ctxtier_tier_corruptions_total Blocks that failed checksum verification and were dropped.
# TYPE ctxtier_tier_corruptions_total counter
ctxtier_tier_corruptions_total{tier="s3"} 0
# HELP ctxtier_tier_expirations_total Blocks dropped because their TTL passed.
# TYPE ctxtier_tier_expirations_total counter
ctxtier_tier_expirations_total{tier="s3"} 0
# HELP ctxtier_tier_hits_total Reads served from the tier.
# TYPE ctxtier_tier_hits_total counter
ctxtier_tier_hits_total{tier="s3"} 1
# HELP ctxtier_tier_misses_total Reads that found no (valid) block.
# TYPE ctxtier_tier_misses_total counter
ctxtier_tier_misses_total{tier="s3"} 1
# HELP ctxtier_tier_read_bytes_total Bytes the tier read from its medium.
# TYPE ctxtier_tier_read_bytes_total counter
ctxtier_tier_read_bytes_total{tier="s3"} 1000
# HELP ctxtier_tier_s3_breaker_open 1 while the circuit breaker refuses gets.
# TYPE ctxtier_tier_s3_breaker_open gauge
ctxtier_tier_s3_breaker_open{tier="s3"} 0
# HELP ctxtier_tier_s3_buffered_bytes Bytes waiting in the upload buffer.
# TYPE ctxtier_tier_s3_buffered_bytes gauge
ctxtier_tier_s3_buffered_bytes{tier="s3"} 0
# HELP ctxtier_tier_s3_compactions_total Mostly-dead packs compacted.
# TYPE ctxtier_tier_s3_compactions_total counter
ctxtier_tier_s3_compactions_total{tier="s3"} 0
# HELP ctxtier_tier_s3_demoted_total Blocks accepted into the upload buffer.
# TYPE ctxtier_tier_s3_demoted_total counter
ctxtier_tier_s3_demoted_total{tier="s3"} 2
# HELP ctxtier_tier_s3_dropped_total Blocks dropped because the upload buffer was full.
# TYPE ctxtier_tier_s3_dropped_total counter
ctxtier_tier_s3_dropped_total{tier="s3"} 0
# HELP ctxtier_tier_s3_fast_fails_total Gets refused at once by the open circuit breaker.
# TYPE ctxtier_tier_s3_fast_fails_total counter
ctxtier_tier_s3_fast_fails_total{tier="s3"} 0
# HELP ctxtier_tier_s3_index_rebuilding 1 while the index is being rebuilt from the bucket (gets of unknown blocks answer Unavailable).
# TYPE ctxtier_tier_s3_index_rebuilding gauge
ctxtier_tier_s3_index_rebuilding{tier="s3"} 0
# HELP ctxtier_tier_s3_packs Packs (S3 objects) indexed.
# TYPE ctxtier_tier_s3_packs gauge
ctxtier_tier_s3_packs{tier="s3"} 1
# HELP ctxtier_tier_s3_packs_deleted_total Packs deleted (nothing live left).
# TYPE ctxtier_tier_s3_packs_deleted_total counter
ctxtier_tier_s3_packs_deleted_total{tier="s3"} 0
# HELP ctxtier_tier_s3_pending_packs Sealed packs waiting for upload.
# TYPE ctxtier_tier_s3_pending_packs gauge
ctxtier_tier_s3_pending_packs{tier="s3"} 0
# HELP ctxtier_tier_s3_policy_skipped_total Blocks of namespaces that do not reach S3.
# TYPE ctxtier_tier_s3_policy_skipped_total counter
ctxtier_tier_s3_policy_skipped_total{tier="s3"} 0
# HELP ctxtier_tier_s3_unavailable_total Gets that failed because S3 did not answer.
# TYPE ctxtier_tier_s3_unavailable_total counter
ctxtier_tier_s3_unavailable_total{tier="s3"} 0
# HELP ctxtier_tier_s3_upload_errors_total Failed pack uploads (retried).
# TYPE ctxtier_tier_s3_upload_errors_total counter
ctxtier_tier_s3_upload_errors_total{tier="s3"} 0
# HELP ctxtier_tier_s3_uploaded_bytes_total Bytes uploaded.
# TYPE ctxtier_tier_s3_uploaded_bytes_total counter
ctxtier_tier_s3_uploaded_bytes_total{tier="s3"} 2118
# HELP ctxtier_tier_s3_uploads_total Packs uploaded.
# TYPE ctxtier_tier_s3_uploads_total counter
ctxtier_tier_s3_uploads_total{tier="s3"} 1
`
