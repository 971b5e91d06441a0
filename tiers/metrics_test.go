package tiers

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TestCollectorScrape scrapes the manager's collector after ten puts into
// room for four (six demotions) and a read of a demoted block (a lower hit
// and a promotion, which demotes a seventh), and compares the whole exposition (every
// name, help string, type and value) with what ctxd has always exported,
// the values being the manager's Stats at the time.
func TestCollectorScrape(t *testing.T) {
	m := newManager(t, newMemLower(), 4)
	for i := range 10 {
		if err := put(t, m, i, block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ref, err := m.Get(context.Background(), k(0), block.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref.Release()
	s := m.Stats()
	if s.Demotions != 7 || s.DemotedBytes != 7*bs || s.LowerHits != 1 || s.Promotions != 1 {
		t.Fatalf("stats %+v, want 7 demotions of %d bytes, a lower hit and a promotion", s, bs)
	}
	want := fmt.Sprintf(wantScrape, s.DemotedBytes, s.DemoteErrors, s.Demotions, s.DemoteSkipped, s.LowerHits,
		s.LowerMisses, s.Promotions, s.DirectPromotions, s.PromoteSkipped, s.QuotaTrimmedBytes, s.SharedReads)
	if err := testutil.CollectAndCompare(NewCollector(m), strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

// wantScrape is the manager's exposition, its values as verbs in name order.
const wantScrape = `
# HELP ctxtier_tiers_demoted_bytes_total Bytes written to the lower tier by demotion.
# TYPE ctxtier_tiers_demoted_bytes_total counter
ctxtier_tiers_demoted_bytes_total %d
# HELP ctxtier_tiers_demotion_errors_total Demotions that failed (the block was dropped).
# TYPE ctxtier_tiers_demotion_errors_total counter
ctxtier_tiers_demotion_errors_total %d
# HELP ctxtier_tiers_demotions_total Blocks evicted from DRAM and written to the lower tier.
# TYPE ctxtier_tiers_demotions_total counter
ctxtier_tiers_demotions_total %d
# HELP ctxtier_tiers_demotions_skipped_total Blocks evicted from DRAM that the demotion admission declined (dropped).
# TYPE ctxtier_tiers_demotions_skipped_total counter
ctxtier_tiers_demotions_skipped_total %d
# HELP ctxtier_tiers_lower_hits_total Reads that missed DRAM and hit the lower tier.
# TYPE ctxtier_tiers_lower_hits_total counter
ctxtier_tiers_lower_hits_total %d
# HELP ctxtier_tiers_lower_misses_total Reads that missed every tier.
# TYPE ctxtier_tiers_lower_misses_total counter
ctxtier_tiers_lower_misses_total %d
# HELP ctxtier_tiers_promotions_total Lower-tier hits copied into DRAM.
# TYPE ctxtier_tiers_promotions_total counter
ctxtier_tiers_promotions_total %d
# HELP ctxtier_tiers_promotions_direct_total Promotions read from the lower tier straight into DRAM pages (no staging copy).
# TYPE ctxtier_tiers_promotions_direct_total counter
ctxtier_tiers_promotions_direct_total %d
# HELP ctxtier_tiers_promotions_skipped_total Lower-tier hits the promotion admission declined.
# TYPE ctxtier_tiers_promotions_skipped_total counter
ctxtier_tiers_promotions_skipped_total %d
# HELP ctxtier_tiers_quota_trimmed_bytes_total Bytes evicted in the background to bring namespaces down to quotas that were lowered.
# TYPE ctxtier_tiers_quota_trimmed_bytes_total counter
ctxtier_tiers_quota_trimmed_bytes_total %d
# HELP ctxtier_tiers_shared_reads_total Reads that missed DRAM and were served by another read's concurrent lower-tier read and promotion.
# TYPE ctxtier_tiers_shared_reads_total counter
ctxtier_tiers_shared_reads_total %d
`
