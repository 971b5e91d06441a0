package console

import (
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
)

// Traffic is one namespace's traffic on this node: the totals of its
// ctxtier_namespace_* counters, or rates per second computed from two
// readings of them.
type Traffic struct {
	Gets         float64 `json:"gets"`
	Hits         float64 `json:"hits"`
	Misses       float64 `json:"misses"`
	Puts         float64 `json:"puts"`
	ReadBytes    float64 `json:"read_bytes"`
	WrittenBytes float64 `json:"written_bytes"`
}

// TrafficSource is the per-namespace traffic counters of this node's
// client-facing store (*ctxstore.Traffic), the counters ctxd's /metrics
// serves as ctxtier_namespace_*. The console reads them directly rather
// than gathering 6 series per namespace through Prometheus.
type TrafficSource interface {
	Snapshot() []ctxstore.TrafficCount
}

// trafficOf reads every namespace's totals.
func trafficOf(src TrafficSource) map[string]Traffic {
	if src == nil {
		return nil
	}
	snap := src.Snapshot()
	out := make(map[string]Traffic, len(snap))
	for _, c := range snap {
		out[c.Namespace] = trafficOfCount(c)
	}
	return out
}

// rateOf is (cur-prev)/dt per field; a counter that went down (a namespace
// deleted and made again) counts from zero.
func rateOf(cur, prev Traffic, dt time.Duration) Traffic {
	s := dt.Seconds()
	d := func(c, p float64) float64 {
		if p > c {
			p = 0
		}
		return (c - p) / s
	}
	return Traffic{Gets: d(cur.Gets, prev.Gets), Hits: d(cur.Hits, prev.Hits), Misses: d(cur.Misses, prev.Misses),
		Puts: d(cur.Puts, prev.Puts), ReadBytes: d(cur.ReadBytes, prev.ReadBytes), WrittenBytes: d(cur.WrittenBytes, prev.WrittenBytes)}
}

// rates turns successive readings of the totals into rates over windows of
// at least a fixed length: a reading less than window after the base
// reuses the last rates; a later one computes new rates against the base
// and becomes the base. Not safe for concurrent use (the overview's
// builder owns it).
type rates struct {
	window time.Duration
	baseAt time.Time
	base   map[string]Traffic
	// last are the rates of the last full window, over lastDT.
	last   map[string]Traffic
	lastDT time.Duration
}

// observe records the totals read at now and returns the current rates
// and the window they cover (0 until two readings are window apart).
func (r *rates) observe(now time.Time, totals map[string]Traffic) (map[string]Traffic, time.Duration) {
	if r.base == nil {
		r.base, r.baseAt = totals, now
		return nil, 0
	}
	if dt := now.Sub(r.baseAt); dt >= r.window {
		out := make(map[string]Traffic, len(totals))
		for ns, cur := range totals {
			out[ns] = rateOf(cur, r.base[ns], dt)
		}
		r.last, r.lastDT, r.base, r.baseAt = out, dt, totals, now
	}
	return r.last, r.lastDT
}
