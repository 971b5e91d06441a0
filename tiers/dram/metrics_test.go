package dram

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TestCollectorScrape scrapes the collector after two puts, a hit and a
// miss and compares the whole exposition (every name, help string, type,
// label and value) with what ctxd has always exported.
func TestCollectorScrape(t *testing.T) {
	tr := newTier(t, 1<<20)
	ctx := context.Background()
	for i := range 2 {
		if err := put(t, tr, block.NewKey("default", uint64(i+1)), payload(uint64(i), 1000), block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ref, err := tr.Get(ctx, block.NewKey("default", 1), block.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref.Release()
	if _, err := tr.Get(ctx, block.NewKey("default", 9), block.GetOptions{}); !errors.Is(err, block.ErrNotFound) {
		t.Fatalf("get of an absent block: %v", err)
	}
	if err := testutil.CollectAndCompare(NewCollector(tr), strings.NewReader(wantScrape)); err != nil {
		t.Fatal(err)
	}
}

// wantScrape is the exposition after two puts of 1000 bytes, a hit and a
// miss: two 4 KiB arena pages allocated.
const wantScrape = `
# HELP ctxtier_tier_allocated_bytes Bytes of allocated arena pages.
# TYPE ctxtier_tier_allocated_bytes gauge
ctxtier_tier_allocated_bytes{tier="dram"} 8192
# HELP ctxtier_tier_blocks Blocks the tier holds.
# TYPE ctxtier_tier_blocks gauge
ctxtier_tier_blocks{tier="dram"} 2
# HELP ctxtier_tier_capacity_bytes Tier capacity in bytes.
# TYPE ctxtier_tier_capacity_bytes gauge
ctxtier_tier_capacity_bytes{tier="dram"} 1.048576e+06
# HELP ctxtier_tier_corruptions_total Blocks that failed checksum verification and were dropped.
# TYPE ctxtier_tier_corruptions_total counter
ctxtier_tier_corruptions_total{tier="dram"} 0
# HELP ctxtier_tier_evicted_bytes_total Payload bytes evicted from the tier to make room.
# TYPE ctxtier_tier_evicted_bytes_total counter
ctxtier_tier_evicted_bytes_total{tier="dram"} 0
# HELP ctxtier_tier_evictions_total Blocks evicted from the tier to make room.
# TYPE ctxtier_tier_evictions_total counter
ctxtier_tier_evictions_total{tier="dram"} 0
# HELP ctxtier_tier_expirations_total Blocks dropped because their TTL passed.
# TYPE ctxtier_tier_expirations_total counter
ctxtier_tier_expirations_total{tier="dram"} 0
# HELP ctxtier_tier_hits_total Reads served from the tier.
# TYPE ctxtier_tier_hits_total counter
ctxtier_tier_hits_total{tier="dram"} 1
# HELP ctxtier_tier_misses_total Reads that found no (valid) block.
# TYPE ctxtier_tier_misses_total counter
ctxtier_tier_misses_total{tier="dram"} 1
# HELP ctxtier_tier_no_space_total Puts refused because nothing evictable was left.
# TYPE ctxtier_tier_no_space_total counter
ctxtier_tier_no_space_total{tier="dram"} 0
# HELP ctxtier_tier_policy_switches_total Changes of lead between the duel policy's Window and LRU (0 under other policies).
# TYPE ctxtier_tier_policy_switches_total counter
ctxtier_tier_policy_switches_total{tier="dram"} 0
# HELP ctxtier_tier_policy_window_leads 1 while the replacement policy's victims come from Window (--dram-policy window, or duel while its Window shadow leads), else 0.
# TYPE ctxtier_tier_policy_window_leads gauge
ctxtier_tier_policy_window_leads{tier="dram"} 0
# HELP ctxtier_tier_puts_total Blocks stored.
# TYPE ctxtier_tier_puts_total counter
ctxtier_tier_puts_total{tier="dram"} 2
# HELP ctxtier_tier_reader_verified_total Reads handed out without the tier's at-rest check, to a reader that verifies the bytes end to end.
# TYPE ctxtier_tier_reader_verified_total counter
ctxtier_tier_reader_verified_total{tier="dram"} 0
# HELP ctxtier_tier_resident_bytes Payload bytes of the blocks the tier holds.
# TYPE ctxtier_tier_resident_bytes gauge
ctxtier_tier_resident_bytes{tier="dram"} 2000
`
