package tiers

import "github.com/prometheus/client_golang/prometheus"

// Collector exports the manager's promotion and demotion counters.
type Collector struct {
	m     *Manager
	descs [10]*prometheus.Desc
}

// NewCollector returns a collector for m.
func NewCollector(m *Manager) *Collector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("ctxtier_tiers_"+name, help, nil, nil)
	}
	return &Collector{m: m, descs: [10]*prometheus.Desc{
		d("promotions_total", "Lower-tier hits copied into DRAM."),
		d("promotions_skipped_total", "Lower-tier hits the promotion admission declined."),
		d("demotions_total", "Blocks evicted from DRAM and written to the lower tier."),
		d("demotions_skipped_total", "Blocks evicted from DRAM that the demotion admission declined (dropped)."),
		d("demotion_errors_total", "Demotions that failed (the block was dropped)."),
		d("demoted_bytes_total", "Bytes written to the lower tier by demotion."),
		d("lower_hits_total", "Reads that missed DRAM and hit the lower tier."),
		d("lower_misses_total", "Reads that missed every tier."),
		d("shared_reads_total", "Reads that missed DRAM and were served by another read's concurrent lower-tier read and promotion."),
		d("quota_trimmed_bytes_total", "Bytes evicted in the background to bring namespaces down to quotas that were lowered."),
	}}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.m.Stats()
	for i, v := range []uint64{s.Promotions, s.PromoteSkipped, s.Demotions, s.DemoteSkipped, s.DemoteErrors, s.DemotedBytes, s.LowerHits, s.LowerMisses, s.SharedReads, s.QuotaTrimmedBytes} {
		ch <- prometheus.MustNewConstMetric(c.descs[i], prometheus.CounterValue, float64(v))
	}
}
