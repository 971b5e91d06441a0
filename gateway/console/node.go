package console

import (
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TierView is one tier of a node, read from the node's /metrics registry
// (the ctxtier_tier_* families with their tier label).
type TierView struct {
	Tier string `json:"tier"`
	// UsedBytes is ctxtier_tier_allocated_bytes (resident_bytes when a
	// tier does not export allocation).
	UsedBytes     float64 `json:"used_bytes"`
	CapacityBytes float64 `json:"capacity_bytes"`
	Blocks        float64 `json:"blocks"`
	Hits          float64 `json:"hits"`
	Misses        float64 `json:"misses"`
	// HitRatio is Hits/(Hits+Misses) since the node started; -1 when the
	// tier has served no read.
	HitRatio    float64 `json:"hit_ratio"`
	Evictions   float64 `json:"evictions"`
	Corruptions float64 `json:"corruptions"`
	Puts        float64 `json:"puts"`
}

// StreamView is one KV-event stream (a worker of a namespace) as the
// ingest's per-worker series report it.
type StreamView struct {
	Namespace string  `json:"namespace"`
	Worker    string  `json:"worker"`
	Gaps      float64 `json:"gaps"`
	Missed    float64 `json:"missed_batches"`
	Healed    float64 `json:"healed"`
	Restarts  float64 `json:"restarts"`
	// LagSeconds is ctxtier_kvevent_lag_seconds: when the newest batch
	// was applied minus the engine's timestamp on it (absent: no batch
	// of the stream carried one).
	LagSeconds *float64 `json:"lag_seconds,omitempty"`
	// LastApplied is ctxtier_kvevent_last_applied_timestamp_seconds: when
	// the newest batch or dump was applied, Unix seconds (0: none yet).
	LastApplied float64 `json:"last_applied"`
}

// NodeView is one node's own numbers: its tiers, traffic, repair and
// KV-event counters. Every field is a value of the node's /metrics.
type NodeView struct {
	NodeID       string       `json:"node_id"`
	Tiers        []TierView   `json:"tiers"`
	Demotions    float64      `json:"demotions"`
	Promotions   float64      `json:"promotions"`
	Requests     float64      `json:"requests"`
	BytesIn      float64      `json:"bytes_in"`
	BytesOut     float64      `json:"bytes_out"`
	RepairQueued float64      `json:"repair_pending"`
	Repaired     float64      `json:"repaired_shards"`
	RepairBytes  float64      `json:"repaired_bytes"`
	Events       float64      `json:"kv_events"`
	Dumps        float64      `json:"kv_dumps"`
	Streams      []StreamView `json:"streams"`
}

// families indexes gathered metric families by name.
type families map[string]*dto.MetricFamily

func gather(g prometheus.Gatherer) (families, error) {
	mfs, err := g.Gather()
	if err != nil && len(mfs) == 0 {
		return nil, fmt.Errorf("gathering metrics: %w", err)
	}
	out := make(families, len(mfs))
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out, nil
}

// value reads a counter, gauge or untyped sample.
func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// sum adds every sample of a family whose labels match want.
func (f families) sum(name string, want map[string]string) float64 {
	var total float64
	mf := f[name]
	if mf == nil {
		return 0
	}
next:
	for _, m := range mf.GetMetric() {
		for k, v := range want {
			if label(m, k) != v {
				continue next
			}
		}
		total += value(m)
	}
	return total
}

// byLabel returns each value of label l in a family with its sample.
func (f families) byLabel(name, l string) map[string]float64 {
	out := map[string]float64{}
	if mf := f[name]; mf != nil {
		for _, m := range mf.GetMetric() {
			out[label(m, l)] += value(m)
		}
	}
	return out
}

// tierOrder sorts tiers top to bottom.
var tierOrder = map[string]int{"dram": 0, "nvme": 1, "s3": 2}

// nodeView builds a NodeView from gathered families.
func nodeView(id string, f families) NodeView {
	v := NodeView{NodeID: id, Tiers: []TierView{}, Streams: []StreamView{}}
	names := map[string]bool{}
	for _, fam := range []string{"ctxtier_tier_capacity_bytes", "ctxtier_tier_blocks", "ctxtier_tier_hits_total"} {
		for t := range f.byLabel(fam, "tier") {
			if t != "" {
				names[t] = true
			}
		}
	}
	for t := range names {
		w := map[string]string{"tier": t}
		tv := TierView{
			Tier:          t,
			UsedBytes:     f.sum("ctxtier_tier_allocated_bytes", w),
			CapacityBytes: f.sum("ctxtier_tier_capacity_bytes", w),
			Blocks:        f.sum("ctxtier_tier_blocks", w),
			Hits:          f.sum("ctxtier_tier_hits_total", w),
			Misses:        f.sum("ctxtier_tier_misses_total", w),
			Evictions:     f.sum("ctxtier_tier_evictions_total", w),
			Corruptions:   f.sum("ctxtier_tier_corruptions_total", w),
			Puts:          f.sum("ctxtier_tier_puts_total", w),
			HitRatio:      -1,
		}
		if !hasTier(f, "ctxtier_tier_allocated_bytes", t) {
			tv.UsedBytes = f.sum("ctxtier_tier_resident_bytes", w)
		}
		if reads := tv.Hits + tv.Misses; reads > 0 {
			tv.HitRatio = tv.Hits / reads
		}
		v.Tiers = append(v.Tiers, tv)
	}
	slices.SortFunc(v.Tiers, func(a, b TierView) int {
		oa, okA := tierOrder[a.Tier]
		ob, okB := tierOrder[b.Tier]
		if !okA {
			oa = len(tierOrder)
		}
		if !okB {
			ob = len(tierOrder)
		}
		if oa != ob {
			return oa - ob
		}
		return strings.Compare(a.Tier, b.Tier)
	})
	v.Demotions = f.sum("ctxtier_tiers_demotions_total", nil)
	v.Promotions = f.sum("ctxtier_tiers_promotions_total", nil)
	v.Requests = f.sum("ctxtier_requests_total", nil)
	v.BytesIn = f.sum("ctxtier_payload_bytes_total", map[string]string{"dir": "in"})
	v.BytesOut = f.sum("ctxtier_payload_bytes_total", map[string]string{"dir": "out"})
	v.RepairQueued = f.sum("ctxtier_repair_shards_pending", nil)
	v.Repaired = f.sum("ctxtier_repair_shards_repaired_total", nil)
	v.RepairBytes = f.sum("ctxtier_repair_bytes_total", nil)
	v.Events = f.sum("ctxtier_kvevent_events_total", nil)
	v.Dumps = f.sum("ctxtier_kvevent_dumps_total", nil)
	type sk struct{ ns, w string }
	streams := map[sk]*StreamView{}
	for fam, set := range map[string]func(*StreamView, float64){
		"ctxtier_kvevent_sequence_gaps_total":            func(s *StreamView, x float64) { s.Gaps += x },
		"ctxtier_kvevent_missed_batches_total":           func(s *StreamView, x float64) { s.Missed += x },
		"ctxtier_kvevent_gaps_healed_total":              func(s *StreamView, x float64) { s.Healed += x },
		"ctxtier_kvevent_worker_restarts_total":          func(s *StreamView, x float64) { s.Restarts += x },
		"ctxtier_kvevent_lag_seconds":                    func(s *StreamView, x float64) { s.LagSeconds = &x },
		"ctxtier_kvevent_last_applied_timestamp_seconds": func(s *StreamView, x float64) { s.LastApplied = x },
	} {
		mf := f[fam]
		if mf == nil {
			continue
		}
		for _, m := range mf.GetMetric() {
			k := sk{label(m, "namespace"), label(m, "worker")}
			s := streams[k]
			if s == nil {
				s = &StreamView{Namespace: k.ns, Worker: k.w}
				streams[k] = s
			}
			set(s, value(m))
		}
	}
	for _, s := range streams {
		v.Streams = append(v.Streams, *s)
	}
	slices.SortFunc(v.Streams, func(a, b StreamView) int {
		if a.Namespace != b.Namespace {
			return strings.Compare(a.Namespace, b.Namespace)
		}
		return strings.Compare(a.Worker, b.Worker)
	})
	return v
}

func hasTier(f families, name, tier string) bool {
	_, ok := f.byLabel(name, "tier")[tier]
	return ok
}
