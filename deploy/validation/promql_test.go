package validation

import (
	"errors"
	"reflect"
	"testing"
)

func TestMetricNames(t *testing.T) {
	tests := []struct {
		expr string
		want []string
		err  bool
	}{
		{`sum by (tier) (rate(ctxtier_tier_hits_total{instance=~"$instance"}[$__rate_interval]))`, []string{"ctxtier_tier_hits_total"}, false},
		{`histogram_quantile(0.99, sum(rate(a_bucket[5m])) by (le, op))`, []string{"a_bucket"}, false},
		{`a / on(instance) group_left(node_id) b offset 5m`, []string{"a", "b"}, false},
		{`x{code=~"Internal|Unavailable", op!="get"} > bool 0.5`, []string{"x"}, false},
		{`max(y{quantile="0.99"}) and ignoring(le) z`, []string{"y", "z"}, false},
		{`sum(${metric_var})`, []string{}, false},
		{`1e3 * up`, []string{"up"}, false},
		{`summ(rate(a[1m]))`, nil, true},
		{`sum(rate(a[1m])`, nil, true},
		{`a{b="c"`, nil, true},
		{`a{b="c}`, nil, true},
		{`sum(a))`, nil, true},
	}
	for _, tt := range tests {
		got, err := MetricNames(tt.expr)
		if tt.err {
			if !errors.Is(err, ErrPromQL) {
				t.Errorf("MetricNames(%q): err %v, want ErrPromQL", tt.expr, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("MetricNames(%q) = %v, %v; want %v", tt.expr, got, err, tt.want)
		}
	}
}

func TestKnownSeries(t *testing.T) {
	for name, want := range map[string]bool{
		"ctxtier_request_duration_seconds_bucket": true,
		"ctxtier_request_duration_seconds_count":  true,
		"ctxtier_raft_commitTime":                 true,
		"ctxtier_raft_commitTime_sum":             true,
		"ctxtier_raft_commitTime_bucket":          false,
		"ctxtier_requests_total_bucket":           false,
		"ctxtier_tier_hits":                       false,
		"raft_state_leader":                       false,
	} {
		if got := KnownSeries(name); got != want {
			t.Errorf("KnownSeries(%s) = %v, want %v", name, got, want)
		}
	}
}
