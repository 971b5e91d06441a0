package dram

import "github.com/prometheus/client_golang/prometheus"

// Collector exports the tier's counters to Prometheus. Counters are kept as
// atomics on the hot path and only read at scrape time.
type Collector struct {
	t     *Tier
	descs map[string]*prometheus.Desc
}

// NewCollector returns a collector for t; register it on a registry.
func NewCollector(t *Tier) *Collector {
	l := prometheus.Labels{"tier": "dram"}
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("ctxtier_tier_"+name, help, nil, l)
	}
	return &Collector{t: t, descs: map[string]*prometheus.Desc{
		"capacity":  d("capacity_bytes", "Tier capacity in bytes."),
		"resident":  d("resident_bytes", "Payload bytes of the blocks the tier holds."),
		"allocated": d("allocated_bytes", "Bytes of allocated arena pages."),
		"blocks":    d("blocks", "Blocks the tier holds."),
		"hits":      d("hits_total", "Reads served from the tier."),
		"misses":    d("misses_total", "Reads that found no (valid) block."),
		"puts":      d("puts_total", "Blocks stored."),
		"evictions": d("evictions_total", "Blocks evicted from the tier to make room."),
		"evbytes":   d("evicted_bytes_total", "Payload bytes evicted from the tier to make room."),
		"expired":   d("expirations_total", "Blocks dropped because their TTL passed."),
		"corrupt":   d("corruptions_total", "Blocks that failed checksum verification and were dropped."),
		"nospace":   d("no_space_total", "Puts refused because nothing evictable was left."),
		"readerver": d("reader_verified_total", "Reads handed out without the tier's at-rest check, to a reader that verifies the bytes end to end."),
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
	s := c.t.Stats()
	g := func(k string, v float64) { ch <- prometheus.MustNewConstMetric(c.descs[k], prometheus.GaugeValue, v) }
	n := func(k string, v uint64) {
		ch <- prometheus.MustNewConstMetric(c.descs[k], prometheus.CounterValue, float64(v))
	}
	g("capacity", float64(s.Capacity))
	g("resident", float64(s.ResidentBytes))
	g("allocated", float64(s.AllocatedB))
	g("blocks", float64(s.Blocks))
	n("hits", s.Hits)
	n("misses", s.Misses)
	n("puts", s.Puts)
	n("evictions", s.Evictions)
	n("evbytes", s.EvictedBytes)
	n("expired", s.Expirations)
	n("corrupt", s.Corruptions)
	n("nospace", s.NoSpace)
	n("readerver", s.ReaderVerified)
}
