package nvme

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TestCollectorScrape scrapes the collector after two puts, a hit and a
// miss, and compares the whole exposition but the latency histograms (every
// name, help string, type, label and value) with what ctxd has always
// exported. The bytes on the medium depend on whether the filesystem takes
// O_DIRECT, so those values come from Stats; the histograms' names, help,
// type and observation counts are checked apart.
func TestCollectorScrape(t *testing.T) {
	tr := open(t, testConfig(t.TempDir()))
	defer tr.Close()
	for i := range 2 {
		put(t, tr, key(uint64(i+1)), payload(uint64(i+1), 1000), block.PutOptions{})
	}
	mustGet(t, tr, key(1), payload(1, 1000))
	if _, err := tr.Get(context.Background(), key(9), block.GetOptions{}); !errors.Is(err, block.ErrNotFound) {
		t.Fatalf("get of an absent block: %v", err)
	}
	s := tr.Stats()
	direct := 0
	if s.DirectIO {
		direct = 1
	}
	want := fmt.Sprintf(wantScrape, direct, s.LiveBytes, s.ReadBytes, s.UsedBytes, s.WriteBytes)
	c := NewCollector(tr)
	var names []string
	for l := range strings.Lines(want) {
		if name, ok := strings.CutPrefix(l, "# TYPE "); ok {
			names = append(names, strings.Fields(name)[0])
		}
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(fams) != len(names)+2 {
		t.Errorf("%d metric families, want %d and the two histograms", len(fams), len(names))
	}
	hists := map[string]struct {
		help  string
		count uint64
	}{
		"ctxtier_tier_read_seconds":  {"Latency of reads from the tier.", 1},
		"ctxtier_tier_write_seconds": {"Latency of writes to the tier.", 2},
	}
	for _, f := range fams {
		h, ok := hists[f.GetName()]
		if !ok {
			continue
		}
		delete(hists, f.GetName())
		m := f.GetMetric()
		if f.GetType().String() != "HISTOGRAM" || f.GetHelp() != h.help || len(m) != 1 {
			t.Errorf("%s: type %s help %q, %d series", f.GetName(), f.GetType(), f.GetHelp(), len(m))
			continue
		}
		if l := m[0].GetLabel(); len(l) != 1 || l[0].GetName() != "tier" || l[0].GetValue() != "nvme" {
			t.Errorf("%s: labels %v", f.GetName(), l)
		}
		if got := m[0].GetHistogram().GetSampleCount(); got != h.count {
			t.Errorf("%s: %d observations, want %d", f.GetName(), got, h.count)
		}
	}
	for name := range hists {
		t.Errorf("histogram %s not collected", name)
	}
}

// wantScrape is the exposition after that, with the medium's byte counts
// and the O_DIRECT flag as verbs (in name order: direct_io, live_bytes,
// read_bytes_total, used_bytes, write_bytes_total).
const wantScrape = `
# HELP ctxtier_tier_blocks Blocks the tier holds.
# TYPE ctxtier_tier_blocks gauge
ctxtier_tier_blocks{tier="nvme"} 2
# HELP ctxtier_tier_capacity_bytes Tier capacity in bytes.
# TYPE ctxtier_tier_capacity_bytes gauge
ctxtier_tier_capacity_bytes{tier="nvme"} 8.388608e+06
# HELP ctxtier_tier_corruptions_total Blocks that failed checksum verification and were dropped.
# TYPE ctxtier_tier_corruptions_total counter
ctxtier_tier_corruptions_total{tier="nvme"} 0
# HELP ctxtier_tier_demotions_total Evicted blocks handed to the next tier down.
# TYPE ctxtier_tier_demotions_total counter
ctxtier_tier_demotions_total{tier="nvme"} 0
# HELP ctxtier_tier_descriptor_leases_total Direct-read descriptor leases granted.
# TYPE ctxtier_tier_descriptor_leases_total counter
ctxtier_tier_descriptor_leases_total{tier="nvme"} 0
# HELP ctxtier_tier_direct_io 1 when segment files use O_DIRECT, 0 for the buffered fallback.
# TYPE ctxtier_tier_direct_io gauge
ctxtier_tier_direct_io{tier="nvme"} %d
# HELP ctxtier_tier_evicted_bytes_total Payload bytes evicted from the tier to make room.
# TYPE ctxtier_tier_evicted_bytes_total counter
ctxtier_tier_evicted_bytes_total{tier="nvme"} 0
# HELP ctxtier_tier_evictions_total Blocks evicted from the tier to make room.
# TYPE ctxtier_tier_evictions_total counter
ctxtier_tier_evictions_total{tier="nvme"} 0
# HELP ctxtier_tier_expirations_total Blocks dropped because their TTL passed.
# TYPE ctxtier_tier_expirations_total counter
ctxtier_tier_expirations_total{tier="nvme"} 0
# HELP ctxtier_tier_hits_total Reads served from the tier.
# TYPE ctxtier_tier_hits_total counter
ctxtier_tier_hits_total{tier="nvme"} 1
# HELP ctxtier_tier_index_rebuilt 1 when this start found the index corrupt and rebuilt it from the segment files, else 0.
# TYPE ctxtier_tier_index_rebuilt gauge
ctxtier_tier_index_rebuilt{tier="nvme"} 0
# HELP ctxtier_tier_index_writes_refused_total Index writes refused because the filesystem was below half the free-space floor.
# TYPE ctxtier_tier_index_writes_refused_total counter
ctxtier_tier_index_writes_refused_total{tier="nvme"} 0
# HELP ctxtier_tier_live_bytes Extent bytes of indexed blocks.
# TYPE ctxtier_tier_live_bytes gauge
ctxtier_tier_live_bytes{tier="nvme"} %d
# HELP ctxtier_tier_misses_total Reads that found no (valid) block.
# TYPE ctxtier_tier_misses_total counter
ctxtier_tier_misses_total{tier="nvme"} 1
# HELP ctxtier_tier_no_space_total Puts refused because nothing evictable was left.
# TYPE ctxtier_tier_no_space_total counter
ctxtier_tier_no_space_total{tier="nvme"} 0
# HELP ctxtier_tier_puts_total Blocks stored.
# TYPE ctxtier_tier_puts_total counter
ctxtier_tier_puts_total{tier="nvme"} 2
# HELP ctxtier_tier_read_bytes_total Bytes the tier read from its medium.
# TYPE ctxtier_tier_read_bytes_total counter
ctxtier_tier_read_bytes_total{tier="nvme"} %d
# HELP ctxtier_tier_recovery_reindexed_extents Extents this start's recovery scan found in the segment files and indexed.
# TYPE ctxtier_tier_recovery_reindexed_extents gauge
ctxtier_tier_recovery_reindexed_extents{tier="nvme"} 0
# HELP ctxtier_tier_recovery_skipped_extents Extents this start's recovery scan skipped because they did not verify (it went on at the next valid one).
# TYPE ctxtier_tier_recovery_skipped_extents gauge
ctxtier_tier_recovery_skipped_extents{tier="nvme"} 0
# HELP ctxtier_tier_relocated_bytes_total Payload bytes re-appended by segment reclamation.
# TYPE ctxtier_tier_relocated_bytes_total counter
ctxtier_tier_relocated_bytes_total{tier="nvme"} 0
# HELP ctxtier_tier_relocations_total Hot or pinned blocks re-appended by segment reclamation.
# TYPE ctxtier_tier_relocations_total counter
ctxtier_tier_relocations_total{tier="nvme"} 0
# HELP ctxtier_tier_resident_bytes Payload bytes of the blocks the tier holds.
# TYPE ctxtier_tier_resident_bytes gauge
ctxtier_tier_resident_bytes{tier="nvme"} 2000
# HELP ctxtier_tier_segments Segment files.
# TYPE ctxtier_tier_segments gauge
ctxtier_tier_segments{tier="nvme"} 1
# HELP ctxtier_tier_segments_reclaimed_total Segments reclaimed.
# TYPE ctxtier_tier_segments_reclaimed_total counter
ctxtier_tier_segments_reclaimed_total{tier="nvme"} 0
# HELP ctxtier_tier_used_bytes Bytes of segment files on disk.
# TYPE ctxtier_tier_used_bytes gauge
ctxtier_tier_used_bytes{tier="nvme"} %d
# HELP ctxtier_tier_write_bytes_total Bytes written to segment files.
# TYPE ctxtier_tier_write_bytes_total counter
ctxtier_tier_write_bytes_total{tier="nvme"} %d
`
