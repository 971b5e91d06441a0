package dram

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/internal/metrictable"
)

// Collector exports the tier's counters to Prometheus as
// ctxtier_tier_*{tier="dram"}. Counters are kept as atomics on the hot path
// and only read at scrape time.
type Collector struct {
	*metrictable.Collector[Stats]
}

// NewCollector returns a collector for t; register it on a registry.
func NewCollector(t *Tier) *Collector {
	return &Collector{metrictable.New("ctxtier_tier_", prometheus.Labels{"tier": "dram"}, t.Stats, metrics)}
}

// metrics is what the collector exports of a Stats.
var metrics = []metrictable.Metric[Stats]{
	metrictable.Gauge("capacity_bytes", "Tier capacity in bytes.", func(s Stats) float64 { return float64(s.Capacity) }),
	metrictable.Gauge("resident_bytes", "Payload bytes of the blocks the tier holds.", func(s Stats) float64 { return float64(s.ResidentBytes) }),
	metrictable.Gauge("allocated_bytes", "Bytes of allocated arena pages.", func(s Stats) float64 { return float64(s.AllocatedB) }),
	metrictable.Gauge("blocks", "Blocks the tier holds.", func(s Stats) float64 { return float64(s.Blocks) }),
	metrictable.Counter("hits_total", "Reads served from the tier.", func(s Stats) float64 { return float64(s.Hits) }),
	metrictable.Counter("misses_total", "Reads that found no (valid) block.", func(s Stats) float64 { return float64(s.Misses) }),
	metrictable.Counter("puts_total", "Blocks stored.", func(s Stats) float64 { return float64(s.Puts) }),
	metrictable.Counter("evictions_total", "Blocks evicted from the tier to make room.", func(s Stats) float64 { return float64(s.Evictions) }),
	metrictable.Counter("evicted_bytes_total", "Payload bytes evicted from the tier to make room.", func(s Stats) float64 { return float64(s.EvictedBytes) }),
	metrictable.Counter("expirations_total", "Blocks dropped because their TTL passed.", func(s Stats) float64 { return float64(s.Expirations) }),
	metrictable.Counter("corruptions_total", "Blocks that failed checksum verification and were dropped.", func(s Stats) float64 { return float64(s.Corruptions) }),
	metrictable.Counter("no_space_total", "Puts refused because nothing evictable was left.", func(s Stats) float64 { return float64(s.NoSpace) }),
	metrictable.Gauge("policy_window_leads", "1 while the replacement policy's victims come from Window (--dram-policy window, or duel while its Window shadow leads), else 0.", func(s Stats) float64 { return b2f(s.WindowLeads) }),
	metrictable.Counter("policy_switches_total", "Changes of lead between the duel policy's Window and LRU (0 under other policies).", func(s Stats) float64 { return float64(s.PolicySwitches) }),
	metrictable.Counter("reader_verified_total", "Reads handed out without the tier's at-rest check, to a reader that verifies the bytes end to end.", func(s Stats) float64 { return float64(s.ReaderVerified) }),
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
