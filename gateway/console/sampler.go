package console

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TierSample is one tier's numbers at one instant. Counters are totals
// since the node started; the page charts their differences as rates.
type TierSample struct {
	Tier          string  `json:"tier"`
	UsedBytes     float64 `json:"used_bytes"`
	CapacityBytes float64 `json:"capacity_bytes"`
	Hits          float64 `json:"hits"`
	Misses        float64 `json:"misses"`
	Evictions     float64 `json:"evictions"`
	Corruptions   float64 `json:"corruptions"`
}

// Sample is one point of the charts.
type Sample struct {
	// UnixMilli is when it was taken.
	UnixMilli  int64        `json:"t"`
	Tiers      []TierSample `json:"tiers"`
	Demotions  float64      `json:"demotions"`
	Promotions float64      `json:"promotions"`
	Requests   float64      `json:"requests"`
	BytesIn    float64      `json:"bytes_in"`
	BytesOut   float64      `json:"bytes_out"`
	Pending    float64      `json:"repair_pending"`
}

// Series is the reply of GET /ui/api/series: the ring, oldest first.
type Series struct {
	NodeID     string   `json:"node_id"`
	IntervalMS int64    `json:"interval_ms"`
	Samples    []Sample `json:"samples"`
}

// Sampler keeps the last Config.Window of samples of a node's registry in
// a ring of fixed size: its memory is bounded whatever the uptime.
type Sampler struct {
	g        prometheus.Gatherer
	interval time.Duration
	log      *slog.Logger

	mu   sync.Mutex
	ring []Sample
	next int // where the next sample goes
	n    int // samples held, up to len(ring)
}

// NewSampler returns a sampler of g; cfg must be valid.
func NewSampler(cfg Config, g prometheus.Gatherer, log *slog.Logger) *Sampler {
	if log == nil {
		log = slog.Default()
	}
	return &Sampler{g: g, interval: cfg.SampleInterval, log: log, ring: make([]Sample, cfg.samples())}
}

// Run samples every interval until ctx ends.
func (s *Sampler) Run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	s.Sample(time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.Sample(now)
		}
	}
}

// Sample gathers the registry once and records it as taken at now.
func (s *Sampler) Sample(now time.Time) {
	f, err := gather(s.g)
	if err != nil {
		s.log.Warn("console sample", "err", err)
		return
	}
	s.Add(sampleOf(now, nodeView("", f)))
}

func sampleOf(now time.Time, v NodeView) Sample {
	sm := Sample{UnixMilli: now.UnixMilli(), Tiers: make([]TierSample, len(v.Tiers)),
		Demotions: v.Demotions, Promotions: v.Promotions, Requests: v.Requests,
		BytesIn: v.BytesIn, BytesOut: v.BytesOut, Pending: v.RepairQueued}
	for i, t := range v.Tiers {
		sm.Tiers[i] = TierSample{Tier: t.Tier, UsedBytes: t.UsedBytes, CapacityBytes: t.CapacityBytes,
			Hits: t.Hits, Misses: t.Misses, Evictions: t.Evictions, Corruptions: t.Corruptions}
	}
	return sm
}

// Add records one sample, overwriting the oldest when the ring is full.
func (s *Sampler) Add(sm Sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ring[s.next] = sm
	s.next = (s.next + 1) % len(s.ring)
	s.n = min(s.n+1, len(s.ring))
}

// Samples returns the samples held, oldest first.
func (s *Sampler) Samples() []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Sample, 0, s.n)
	start := (s.next - s.n + len(s.ring)) % len(s.ring)
	for i := range s.n {
		out = append(out, s.ring[(start+i)%len(s.ring)])
	}
	return out
}

// Interval is the sampling period.
func (s *Sampler) Interval() time.Duration { return s.interval }
