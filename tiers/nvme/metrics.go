package nvme

import "github.com/prometheus/client_golang/prometheus"

// Collector exports the tier's counters and latency histograms to
// Prometheus. Counters are atomics on the hot path, read only at scrape time.
type Collector struct {
	t     *Tier
	descs map[string]*prometheus.Desc
}

// NewCollector returns a collector for t; register it on a registry.
func NewCollector(t *Tier) *Collector {
	l := prometheus.Labels{"tier": "nvme"}
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("ctxtier_tier_"+name, help, nil, l)
	}
	return &Collector{t: t, descs: map[string]*prometheus.Desc{
		"capacity":  d("capacity_bytes", "Tier capacity in bytes."),
		"used":      d("used_bytes", "Bytes of segment files on disk."),
		"live":      d("live_bytes", "Extent bytes of indexed blocks."),
		"resident":  d("resident_bytes", "Payload bytes of the blocks the tier holds."),
		"blocks":    d("blocks", "Blocks the tier holds."),
		"segments":  d("segments", "Segment files."),
		"direct":    d("direct_io", "1 when segment files use O_DIRECT, 0 for the buffered fallback."),
		"hits":      d("hits_total", "Reads served from the tier."),
		"misses":    d("misses_total", "Reads that found no (valid) block."),
		"puts":      d("puts_total", "Blocks stored."),
		"evictions": d("evictions_total", "Blocks evicted from the tier to make room."),
		"evbytes":   d("evicted_bytes_total", "Payload bytes evicted from the tier to make room."),
		"demotions": d("demotions_total", "Evicted blocks handed to the next tier down."),
		"reloc":     d("relocations_total", "Hot or pinned blocks re-appended by segment reclamation."),
		"relocb":    d("relocated_bytes_total", "Payload bytes re-appended by segment reclamation."),
		"reclaimed": d("segments_reclaimed_total", "Segments reclaimed."),
		"expired":   d("expirations_total", "Blocks dropped because their TTL passed."),
		"corrupt":   d("corruptions_total", "Blocks that failed checksum verification and were dropped."),
		"nospace":   d("no_space_total", "Puts refused because nothing evictable was left."),
		"idxfull":   d("index_writes_refused_total", "Index writes refused because the filesystem was below half the free-space floor."),
		"rbytes":    d("read_bytes_total", "Bytes the tier read from its medium."),
		"wbytes":    d("write_bytes_total", "Bytes written to segment files."),
		"leases":    d("descriptor_leases_total", "Direct-read descriptor leases granted."),
		"rebuilt":   d("index_rebuilt", "1 when this start found the index corrupt and rebuilt it from the segment files, else 0."),
		"skipped":   d("recovery_skipped_extents", "Extents this start's recovery scan skipped because they did not verify (it went on at the next valid one)."),
		"reindexed": d("recovery_reindexed_extents", "Extents this start's recovery scan found in the segment files and indexed."),
	}}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
	c.t.readLat.Describe(ch)
	c.t.writeLat.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.t.Stats()
	g := func(k string, v float64) { ch <- prometheus.MustNewConstMetric(c.descs[k], prometheus.GaugeValue, v) }
	n := func(k string, v uint64) {
		ch <- prometheus.MustNewConstMetric(c.descs[k], prometheus.CounterValue, float64(v))
	}
	direct := 0.0
	if s.DirectIO {
		direct = 1
	}
	g("capacity", float64(s.Capacity))
	g("used", float64(s.UsedBytes))
	g("live", float64(s.LiveBytes))
	g("resident", float64(s.ResidentBytes))
	g("blocks", float64(s.Blocks))
	g("segments", float64(s.Segments))
	g("direct", direct)
	n("hits", s.Hits)
	n("misses", s.Misses)
	n("puts", s.Puts)
	n("evictions", s.Evictions)
	n("evbytes", s.EvictedBytes)
	n("demotions", s.Demotions)
	n("reloc", s.Relocations)
	n("relocb", s.RelocatedBytes)
	n("reclaimed", s.Reclaimed)
	n("expired", s.Expirations)
	n("corrupt", s.Corruptions)
	n("nospace", s.NoSpace)
	n("idxfull", s.IndexRefused)
	n("rbytes", s.ReadBytes)
	n("wbytes", s.WriteBytes)
	n("leases", s.Leases)
	rec := c.t.Recovery()
	rebuilt := 0.0
	if rec.IndexRebuilt {
		rebuilt = 1
	}
	g("rebuilt", rebuilt)
	g("skipped", float64(rec.Skipped))
	g("reindexed", float64(rec.Reindexed))
	c.t.readLat.Collect(ch)
	c.t.writeLat.Collect(ch)
}
