package nvme

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/internal/metrictable"
)

// Collector exports the tier's counters and latency histograms to
// Prometheus as ctxtier_tier_*{tier="nvme"}. Counters are atomics on the hot
// path, read only at scrape time.
type Collector struct {
	*metrictable.Collector[scrape]
}

// scrape is what one scrape reads: the counters and this start's recovery.
type scrape struct {
	Stats
	rec Recovery
}

// NewCollector returns a collector for t; register it on a registry.
func NewCollector(t *Tier) *Collector {
	snapshot := func() scrape { return scrape{Stats: t.Stats(), rec: t.Recovery()} }
	return &Collector{metrictable.New("ctxtier_tier_", prometheus.Labels{"tier": "nvme"}, snapshot, metrics, t.readLat, t.writeLat)}
}

// metrics is what the collector exports of a scrape, before the histograms.
var metrics = []metrictable.Metric[scrape]{
	metrictable.Gauge("capacity_bytes", "Tier capacity in bytes.", func(s scrape) float64 { return float64(s.Capacity) }),
	metrictable.Gauge("used_bytes", "Bytes of segment files on disk.", func(s scrape) float64 { return float64(s.UsedBytes) }),
	metrictable.Gauge("live_bytes", "Extent bytes of indexed blocks.", func(s scrape) float64 { return float64(s.LiveBytes) }),
	metrictable.Gauge("resident_bytes", "Payload bytes of the blocks the tier holds.", func(s scrape) float64 { return float64(s.ResidentBytes) }),
	metrictable.Gauge("blocks", "Blocks the tier holds.", func(s scrape) float64 { return float64(s.Blocks) }),
	metrictable.Gauge("segments", "Segment files.", func(s scrape) float64 { return float64(s.Segments) }),
	metrictable.Gauge("direct_io", "1 when segment files use O_DIRECT, 0 for the buffered fallback.", func(s scrape) float64 { return metrictable.Flag(s.DirectIO) }),
	metrictable.Counter("hits_total", "Reads served from the tier.", func(s scrape) float64 { return float64(s.Hits) }),
	metrictable.Counter("misses_total", "Reads that found no (valid) block.", func(s scrape) float64 { return float64(s.Misses) }),
	metrictable.Counter("puts_total", "Blocks stored.", func(s scrape) float64 { return float64(s.Puts) }),
	metrictable.Counter("evictions_total", "Blocks evicted from the tier to make room.", func(s scrape) float64 { return float64(s.Evictions) }),
	metrictable.Counter("evicted_bytes_total", "Payload bytes evicted from the tier to make room.", func(s scrape) float64 { return float64(s.EvictedBytes) }),
	metrictable.Counter("demotions_total", "Evicted blocks handed to the next tier down.", func(s scrape) float64 { return float64(s.Demotions) }),
	metrictable.Counter("relocations_total", "Hot or pinned blocks re-appended by segment reclamation.", func(s scrape) float64 { return float64(s.Relocations) }),
	metrictable.Counter("relocated_bytes_total", "Payload bytes re-appended by segment reclamation.", func(s scrape) float64 { return float64(s.RelocatedBytes) }),
	metrictable.Counter("segments_reclaimed_total", "Segments reclaimed.", func(s scrape) float64 { return float64(s.Reclaimed) }),
	metrictable.Counter("expirations_total", "Blocks dropped because their TTL passed.", func(s scrape) float64 { return float64(s.Expirations) }),
	metrictable.Counter("corruptions_total", "Blocks that failed checksum verification and were dropped.", func(s scrape) float64 { return float64(s.Corruptions) }),
	metrictable.Counter("no_space_total", "Puts refused because nothing evictable was left.", func(s scrape) float64 { return float64(s.NoSpace) }),
	metrictable.Counter("index_writes_refused_total", "Index writes refused because the filesystem was below half the free-space floor.", func(s scrape) float64 { return float64(s.IndexRefused) }),
	metrictable.Counter("read_bytes_total", "Bytes the tier read from its medium.", func(s scrape) float64 { return float64(s.ReadBytes) }),
	metrictable.Counter("write_bytes_total", "Bytes written to segment files.", func(s scrape) float64 { return float64(s.WriteBytes) }),
	metrictable.Counter("descriptor_leases_total", "Direct-read descriptor leases granted.", func(s scrape) float64 { return float64(s.Leases) }),
	metrictable.Gauge("index_rebuilt", "1 when this start found the index corrupt and rebuilt it from the segment files, else 0.", func(s scrape) float64 { return metrictable.Flag(s.rec.IndexRebuilt) }),
	metrictable.Gauge("recovery_skipped_extents", "Extents this start's recovery scan skipped because they did not verify (it went on at the next valid one).", func(s scrape) float64 { return float64(s.rec.Skipped) }),
	metrictable.Gauge("recovery_reindexed_extents", "Extents this start's recovery scan found in the segment files and indexed.", func(s scrape) float64 { return float64(s.rec.Reindexed) }),
}
