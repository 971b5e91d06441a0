package console

import "time"

// Traffic is one namespace's traffic on this node: totals read from the
// ctxtier_namespace_* counters of the node's /metrics registry, or rates
// per second computed from two such readings.
type Traffic struct {
	Gets         float64 `json:"gets"`
	Hits         float64 `json:"hits"`
	Misses       float64 `json:"misses"`
	Puts         float64 `json:"puts"`
	ReadBytes    float64 `json:"read_bytes"`
	WrittenBytes float64 `json:"written_bytes"`
}

// The families ctxstore.TrafficCollector exports, by Traffic field.
const (
	famGets    = "ctxtier_namespace_gets_total"
	famHits    = "ctxtier_namespace_hits_total"
	famMisses  = "ctxtier_namespace_misses_total"
	famPuts    = "ctxtier_namespace_puts_total"
	famRead    = "ctxtier_namespace_read_bytes_total"
	famWritten = "ctxtier_namespace_written_bytes_total"
)

// trafficOf reads every namespace's totals from gathered families.
func trafficOf(f families) map[string]Traffic {
	out := map[string]Traffic{}
	set := func(name string, put func(*Traffic, float64)) {
		for ns, v := range f.byLabel(name, "namespace") {
			t := out[ns]
			put(&t, v)
			out[ns] = t
		}
	}
	set(famGets, func(t *Traffic, v float64) { t.Gets = v })
	set(famHits, func(t *Traffic, v float64) { t.Hits = v })
	set(famMisses, func(t *Traffic, v float64) { t.Misses = v })
	set(famPuts, func(t *Traffic, v float64) { t.Puts = v })
	set(famRead, func(t *Traffic, v float64) { t.ReadBytes = v })
	set(famWritten, func(t *Traffic, v float64) { t.WrittenBytes = v })
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
