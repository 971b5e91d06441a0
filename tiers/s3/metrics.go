package s3

import "github.com/prometheus/client_golang/prometheus"

// Collector exports the tier's counters to Prometheus (read at scrape time).
type Collector struct {
	t     *Tier
	descs map[string]*prometheus.Desc
}

// NewCollector returns a collector for t; register it on a registry.
func NewCollector(t *Tier) *Collector {
	l := prometheus.Labels{"tier": "s3"}
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("ctxtier_tier_"+name, help, nil, l)
	}
	return &Collector{t: t, descs: map[string]*prometheus.Desc{
		"blocks":     d("blocks", "Blocks the tier holds."),
		"packs":      d("s3_packs", "Packs (S3 objects) indexed."),
		"buffered":   d("s3_buffered_bytes", "Bytes waiting in the upload buffer."),
		"pending":    d("s3_pending_packs", "Sealed packs waiting for upload."),
		"breaker":    d("s3_breaker_open", "1 while the circuit breaker refuses gets."),
		"rebuilding": d("s3_index_rebuilding", "1 while the index is being rebuilt from the bucket (gets of unknown blocks answer Unavailable)."),
		"demoted":    d("s3_demoted_total", "Blocks accepted into the upload buffer."),
		"dropped":    d("s3_dropped_total", "Blocks dropped because the upload buffer was full."),
		"skipped":    d("s3_policy_skipped_total", "Blocks of namespaces that do not reach S3."),
		"uploads":    d("s3_uploads_total", "Packs uploaded."),
		"upbytes":    d("s3_uploaded_bytes_total", "Bytes uploaded."),
		"uperrors":   d("s3_upload_errors_total", "Failed pack uploads (retried)."),
		"hits":       d("hits_total", "Reads served from the tier."),
		"misses":     d("misses_total", "Reads that found no (valid) block."),
		"rbytes":     d("read_bytes_total", "Bytes the tier read from its medium."),
		"unavail":    d("s3_unavailable_total", "Gets that failed because S3 did not answer."),
		"fastfail":   d("s3_fast_fails_total", "Gets refused at once by the open circuit breaker."),
		"corrupt":    d("corruptions_total", "Blocks that failed checksum verification and were dropped."),
		"expired":    d("expirations_total", "Blocks dropped because their TTL passed."),
		"deleted":    d("s3_packs_deleted_total", "Packs deleted (nothing live left)."),
		"compaction": d("s3_compactions_total", "Mostly-dead packs compacted."),
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
	open := 0.0
	if s.BreakerOpen {
		open = 1
	}
	g("blocks", float64(s.Blocks))
	g("packs", float64(s.Packs))
	g("buffered", float64(s.BufferedBytes))
	g("pending", float64(s.PendingPacks))
	g("breaker", open)
	rebuilding := 0.0
	if s.Rebuilding {
		rebuilding = 1
	}
	g("rebuilding", rebuilding)
	n("demoted", s.Demoted)
	n("dropped", s.Dropped)
	n("skipped", s.SkippedPolicy)
	n("uploads", s.Uploads)
	n("upbytes", s.UploadedBytes)
	n("uperrors", s.UploadErrors)
	n("hits", s.Hits)
	n("misses", s.Misses)
	n("rbytes", s.ReadBytes)
	n("unavail", s.Unavailable)
	n("fastfail", s.FastFails)
	n("corrupt", s.Corruptions)
	n("expired", s.Expirations)
	n("deleted", s.PacksDeleted)
	n("compaction", s.Compactions)
}
