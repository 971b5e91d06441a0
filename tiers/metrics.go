package tiers

import "github.com/ctxtier/ctxtier/internal/metrictable"

// Collector exports the manager's promotion and demotion counters as
// ctxtier_tiers_*.
type Collector struct {
	*metrictable.Collector[Stats]
}

// NewCollector returns a collector for m.
func NewCollector(m *Manager) *Collector {
	return &Collector{metrictable.New("ctxtier_tiers_", nil, m.Stats, metrics)}
}

// metrics is what the collector exports of a Stats.
var metrics = []metrictable.Metric[Stats]{
	metrictable.Counter("promotions_total", "Lower-tier hits copied into DRAM.", func(s Stats) float64 { return float64(s.Promotions) }),
	metrictable.Counter("promotions_direct_total", "Promotions read from the lower tier straight into DRAM pages (no staging copy).", func(s Stats) float64 { return float64(s.DirectPromotions) }),
	metrictable.Counter("promotions_skipped_total", "Lower-tier hits the promotion admission declined.", func(s Stats) float64 { return float64(s.PromoteSkipped) }),
	metrictable.Counter("demotions_total", "Blocks evicted from DRAM and written to the lower tier.", func(s Stats) float64 { return float64(s.Demotions) }),
	metrictable.Counter("demotions_skipped_total", "Blocks evicted from DRAM that the demotion admission declined (dropped).", func(s Stats) float64 { return float64(s.DemoteSkipped) }),
	metrictable.Counter("demotion_errors_total", "Demotions that failed (the block was dropped).", func(s Stats) float64 { return float64(s.DemoteErrors) }),
	metrictable.Counter("demoted_bytes_total", "Bytes written to the lower tier by demotion.", func(s Stats) float64 { return float64(s.DemotedBytes) }),
	metrictable.Counter("lower_hits_total", "Reads that missed DRAM and hit the lower tier.", func(s Stats) float64 { return float64(s.LowerHits) }),
	metrictable.Counter("lower_misses_total", "Reads that missed every tier.", func(s Stats) float64 { return float64(s.LowerMisses) }),
	metrictable.Counter("shared_reads_total", "Reads that missed DRAM and were served by another read's concurrent lower-tier read and promotion.", func(s Stats) float64 { return float64(s.SharedReads) }),
	metrictable.Counter("quota_trimmed_bytes_total", "Bytes evicted in the background to bring namespaces down to quotas that were lowered.", func(s Stats) float64 { return float64(s.QuotaTrimmedBytes) }),
}
