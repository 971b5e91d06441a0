package validation

import (
	"path/filepath"
	"testing"
)

func loadDashboard(t *testing.T) *Dashboard {
	t.Helper()
	d, err := LoadDashboard(filepath.Join(repoRoot(t), "deploy/grafana/ctxtier.json"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDashboard(t *testing.T) {
	d := loadDashboard(t)
	noErrors(t, CheckDashboard(d))
	// Each topic the dashboard is for has its metrics queried.
	used := map[string]bool{}
	for _, e := range d.Exprs() {
		names, _ := MetricNames(e)
		for _, n := range names {
			used[n] = true
		}
	}
	for topic, metrics := range map[string][]string{
		"hit ratio by tier": {"ctxtier_tier_hits_total", "ctxtier_tier_misses_total"},
		"bytes in and out":  {"ctxtier_payload_bytes_total"},
		"latency":           {"ctxtier_request_duration_seconds_bucket"},
		"evictions":         {"ctxtier_tier_evictions_total", "ctxtier_tier_evicted_bytes_total"},
		"raft health":       {"ctxtier_raft_is_leader", "ctxtier_raft_state_leader", "ctxtier_raft_commitTime", "ctxtier_raft_apply_errors_total"},
		"repair progress":   {"ctxtier_repair_shards_pending", "ctxtier_repair_shards_repaired_total", "ctxtier_repair_bytes_repaired_total"},
	} {
		for _, m := range metrics {
			if !used[m] {
				t.Errorf("%s: no query uses %s", topic, m)
			}
		}
	}
}

func TestDashboardChecksCatchMistakes(t *testing.T) {
	tests := []struct {
		name   string
		break_ func(*Dashboard)
		want   string
	}{
		{"unknown metric", func(d *Dashboard) { d.Panels[1].Targets[0].Expr = "sum(raft_state_leader)" }, "unknown metric raft_state_leader"},
		{"misspelt function", func(d *Dashboard) { d.Panels[1].Targets[0].Expr = "summ(ctxtier_raft_is_leader)" }, "unknown function summ"},
		{"no metric", func(d *Dashboard) { d.Panels[1].Targets[0].Expr = "1" }, "selects no metric"},
		{"overlap", func(d *Dashboard) { d.Panels[2].GridPos = d.Panels[1].GridPos }, "overlaps"},
		{"off the grid", func(d *Dashboard) { d.Panels[1].GridPos.X = 20 }, "outside the 24-column grid"},
		{"duplicate id", func(d *Dashboard) { d.Panels[2].ID = d.Panels[1].ID }, "also used by"},
		{"no queries", func(d *Dashboard) { d.Panels[1].Targets = nil }, "has no queries"},
		{"bad variable", func(d *Dashboard) { d.Templating.List[1].Query = "label_values(ctxtier_request_total, instance)" }, "unknown metric ctxtier_request_total"},
	}
	for _, tt := range tests {
		d := loadDashboard(t)
		tt.break_(d)
		wantError(t, CheckDashboard(d), tt.want)
	}
}
