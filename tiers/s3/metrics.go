package s3

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/internal/metrictable"
)

// Collector exports the tier's counters to Prometheus as
// ctxtier_tier_*{tier="s3"} (read at scrape time).
type Collector struct {
	*metrictable.Collector[Stats]
}

// NewCollector returns a collector for t; register it on a registry.
func NewCollector(t *Tier) *Collector {
	return &Collector{metrictable.New("ctxtier_tier_", prometheus.Labels{"tier": "s3"}, t.Stats, metrics)}
}

// metrics is what the collector exports of a Stats.
var metrics = []metrictable.Metric[Stats]{
	metrictable.Gauge("blocks", "Blocks the tier holds.", func(s Stats) float64 { return float64(s.Blocks) }),
	metrictable.Gauge("s3_packs", "Packs (S3 objects) indexed.", func(s Stats) float64 { return float64(s.Packs) }),
	metrictable.Gauge("s3_buffered_bytes", "Bytes waiting in the upload buffer.", func(s Stats) float64 { return float64(s.BufferedBytes) }),
	metrictable.Gauge("s3_pending_packs", "Sealed packs waiting for upload.", func(s Stats) float64 { return float64(s.PendingPacks) }),
	metrictable.Gauge("s3_breaker_open", "1 while the circuit breaker refuses gets.", func(s Stats) float64 { return metrictable.Flag(s.BreakerOpen) }),
	metrictable.Gauge("s3_index_rebuilding", "1 while the index is being rebuilt from the bucket (gets of unknown blocks answer Unavailable).", func(s Stats) float64 { return metrictable.Flag(s.Rebuilding) }),
	metrictable.Counter("s3_demoted_total", "Blocks accepted into the upload buffer.", func(s Stats) float64 { return float64(s.Demoted) }),
	metrictable.Counter("s3_dropped_total", "Blocks dropped because the upload buffer was full.", func(s Stats) float64 { return float64(s.Dropped) }),
	metrictable.Counter("s3_policy_skipped_total", "Blocks of namespaces that do not reach S3.", func(s Stats) float64 { return float64(s.SkippedPolicy) }),
	metrictable.Counter("s3_uploads_total", "Packs uploaded.", func(s Stats) float64 { return float64(s.Uploads) }),
	metrictable.Counter("s3_uploaded_bytes_total", "Bytes uploaded.", func(s Stats) float64 { return float64(s.UploadedBytes) }),
	metrictable.Counter("s3_upload_errors_total", "Failed pack uploads (retried).", func(s Stats) float64 { return float64(s.UploadErrors) }),
	metrictable.Counter("hits_total", "Reads served from the tier.", func(s Stats) float64 { return float64(s.Hits) }),
	metrictable.Counter("misses_total", "Reads that found no (valid) block.", func(s Stats) float64 { return float64(s.Misses) }),
	metrictable.Counter("read_bytes_total", "Bytes the tier read from its medium.", func(s Stats) float64 { return float64(s.ReadBytes) }),
	metrictable.Counter("s3_unavailable_total", "Gets that failed because S3 did not answer.", func(s Stats) float64 { return float64(s.Unavailable) }),
	metrictable.Counter("s3_fast_fails_total", "Gets refused at once by the open circuit breaker.", func(s Stats) float64 { return float64(s.FastFails) }),
	metrictable.Counter("corruptions_total", "Blocks that failed checksum verification and were dropped.", func(s Stats) float64 { return float64(s.Corruptions) }),
	metrictable.Counter("expirations_total", "Blocks dropped because their TTL passed.", func(s Stats) float64 { return float64(s.Expirations) }),
	metrictable.Counter("s3_packs_deleted_total", "Packs deleted (nothing live left).", func(s Stats) float64 { return float64(s.PacksDeleted) }),
	metrictable.Counter("s3_compactions_total", "Mostly-dead packs compacted.", func(s Stats) float64 { return float64(s.Compactions) }),
}
