package validation

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// MetricKind says which series names a metric family exposes.
type MetricKind int

// Kinds of metric families.
const (
	Counter   MetricKind = iota // name
	Gauge                       // name
	Histogram                   // name_bucket, name_sum, name_count
	Summary                     // name{quantile}, name_sum, name_count
)

// Metrics are the metric families ctxd exports (or will, where marked), by
// name. A dashboard or alert may use only these.
var Metrics = map[string]MetricKind{
	// gateway/metrics: every request on every protocol.
	"ctxtier_requests_total":           Counter,
	"ctxtier_block_ops_total":          Counter,
	"ctxtier_payload_bytes_total":      Counter,
	"ctxtier_request_duration_seconds": Histogram,
	"ctxtier_open_connections":         Gauge,
	// Per tier (tier="dram"|"nvme"|"s3").
	"ctxtier_tier_capacity_bytes":      Gauge,
	"ctxtier_tier_resident_bytes":      Gauge,
	"ctxtier_tier_allocated_bytes":     Gauge,
	"ctxtier_tier_blocks":              Gauge,
	"ctxtier_tier_hits_total":          Counter,
	"ctxtier_tier_misses_total":        Counter,
	"ctxtier_tier_puts_total":          Counter,
	"ctxtier_tier_evictions_total":     Counter,
	"ctxtier_tier_evicted_bytes_total": Counter,
	"ctxtier_tier_expirations_total":   Counter,
	"ctxtier_tier_corruptions_total":   Counter,
	"ctxtier_tier_no_space_total":      Counter,
	// Raft (package raft): ctxtier's own, per node_id...
	"ctxtier_raft_is_leader":               Gauge,
	"ctxtier_raft_proposed_ops_total":      Counter,
	"ctxtier_raft_apply_errors_total":      Counter,
	"ctxtier_raft_index_ops_applied_total": Counter,
	"ctxtier_raft_batch_ops":               Histogram,
	"ctxtier_raft_auth_refused_total":      Counter,
	// ...and hashicorp/raft's go-metrics, exported under the ctxtier_
	// prefix (timers are summaries in milliseconds, counters have no
	// _total suffix).
	"ctxtier_raft_state_leader":       Counter,
	"ctxtier_raft_state_candidate":    Counter,
	"ctxtier_raft_apply":              Counter,
	"ctxtier_raft_commitTime":         Summary,
	"ctxtier_raft_leader_lastContact": Summary,
	"ctxtier_raft_fsm_apply":          Summary,
	// KV-event ingest (gateway/kvevent), per (namespace, worker).
	"ctxtier_kvevent_lag_seconds":                    Gauge,
	"ctxtier_kvevent_last_applied_timestamp_seconds": Gauge,
	// Shard repair (coming with the cluster store).
	"ctxtier_repair_shards_pending":        Gauge,
	"ctxtier_repair_shards_repaired_total": Counter,
	"ctxtier_repair_bytes_repaired_total":  Counter,
}

// KnownSeries reports whether name is a series of a family in Metrics.
func KnownSeries(name string) bool {
	if _, ok := Metrics[name]; ok {
		return true
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suf)
		if !ok {
			continue
		}
		k, ok := Metrics[base]
		if ok && (k == Histogram || suf != "_bucket" && k == Summary) {
			return true
		}
	}
	return false
}

// Dashboard is the part of a Grafana dashboard the checks read.
type Dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []Panel `json:"panels"`
	Templating    struct {
		List []TemplateVar `json:"list"`
	} `json:"templating"`
}

// Panel is a dashboard panel (rows hold collapsed panels in Panels).
type Panel struct {
	ID      int      `json:"id"`
	Type    string   `json:"type"`
	Title   string   `json:"title"`
	GridPos GridPos  `json:"gridPos"`
	Targets []Target `json:"targets"`
	Panels  []Panel  `json:"panels"`
}

// GridPos places a panel on the 24-column grid.
type GridPos struct {
	X, Y, W, H int
}

// Target is one query of a panel.
type Target struct {
	RefID string `json:"refId"`
	Expr  string `json:"expr"`
}

// TemplateVar is a dashboard variable.
type TemplateVar struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Query any    `json:"query"`
}

// LoadDashboard parses a dashboard JSON file.
func LoadDashboard(path string) (*Dashboard, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &d, nil
}

// allPanels flattens rows.
func (d *Dashboard) allPanels() []Panel {
	var out []Panel
	var walk func([]Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// Exprs returns every PromQL expression of the dashboard, with where it is.
func (d *Dashboard) Exprs() map[string]string {
	out := map[string]string{}
	for _, p := range d.allPanels() {
		for _, t := range p.Targets {
			out[fmt.Sprintf("panel %q query %s", p.Title, t.RefID)] = t.Expr
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		out[fmt.Sprintf("variable %s", v.Name)] = labelValuesMetric(q)
	}
	return out
}

var labelValues = regexp.MustCompile(`^\s*label_values\(\s*(.*?)\s*,\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$`)

// labelValuesMetric turns Grafana's label_values(SELECTOR, label) into
// SELECTOR, which is PromQL.
func labelValuesMetric(q string) string {
	if m := labelValues.FindStringSubmatch(q); m != nil {
		return m[1]
	}
	return q
}

// CheckDashboard: a uid and title; unique panel ids; panels within the
// 24-column grid and not overlapping; every query panel has queries; every
// query parses lexically and selects only known metrics.
func CheckDashboard(d *Dashboard) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if d.UID == "" || d.Title == "" {
		bad("dashboard needs a uid and a title")
	}
	ids := map[int]string{}
	var placed []Panel
	for _, p := range d.allPanels() {
		if other, dup := ids[p.ID]; dup {
			bad("panel %q: id %d also used by %q", p.Title, p.ID, other)
		}
		ids[p.ID] = p.Title
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			bad("panel %q: gridPos %+v outside the 24-column grid", p.Title, g)
		}
		for _, q := range placed {
			h := q.GridPos
			if g.X < h.X+h.W && h.X < g.X+g.W && g.Y < h.Y+h.H && h.Y < g.Y+g.H {
				bad("panel %q overlaps panel %q", p.Title, q.Title)
			}
		}
		placed = append(placed, p)
		if p.Type != "row" && p.Type != "text" && len(p.Targets) == 0 {
			bad("panel %q has no queries", p.Title)
		}
	}
	exprs := d.Exprs()
	for _, where := range sortedKeys(exprs) {
		names, err := MetricNames(exprs[where])
		if err != nil {
			bad("%s: %v", where, err)
			continue
		}
		if len(names) == 0 {
			bad("%s: selects no metric: %q", where, exprs[where])
		}
		for _, n := range names {
			if !KnownSeries(n) {
				bad("%s: unknown metric %s", where, n)
			}
		}
	}
	return errs
}
