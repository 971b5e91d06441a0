package metrictable

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

type stats struct {
	Items uint64
	Hits  uint64
	Open  bool
}

var table = []Metric[stats]{
	Gauge("items", "Items held.", func(s stats) float64 { return float64(s.Items) }),
	Counter("hits_total", "Hits.", func(s stats) float64 { return float64(s.Hits) }),
	Gauge("open", "1 while open.", func(s stats) float64 { return Flag(s.Open) }),
}

func TestCollector(t *testing.T) {
	extra := prometheus.NewCounter(prometheus.CounterOpts{Name: "x_extra_total", Help: "An extra counter."})
	extra.Add(3)
	for _, tc := range []struct {
		name   string
		labels prometheus.Labels
		extra  []prometheus.Collector
		s      stats
		want   string
	}{
		{"no labels", nil, nil, stats{Items: 7, Hits: 2}, `
# HELP x_hits_total Hits.
# TYPE x_hits_total counter
x_hits_total 2
# HELP x_items Items held.
# TYPE x_items gauge
x_items 7
# HELP x_open 1 while open.
# TYPE x_open gauge
x_open 0
`},
		{"constant label and an extra collector", prometheus.Labels{"tier": "t"}, []prometheus.Collector{extra}, stats{Items: 1, Hits: 1 << 40, Open: true}, `
# HELP x_extra_total An extra counter.
# TYPE x_extra_total counter
x_extra_total 3
# HELP x_hits_total Hits.
# TYPE x_hits_total counter
x_hits_total{tier="t"} 1.099511627776e+12
# HELP x_items Items held.
# TYPE x_items gauge
x_items{tier="t"} 1
# HELP x_open 1 while open.
# TYPE x_open gauge
x_open{tier="t"} 1
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snapshots := 0
			c := New("x_", tc.labels, func() stats { snapshots++; return tc.s }, table, tc.extra...)
			if err := testutil.CollectAndCompare(c, strings.NewReader(tc.want)); err != nil {
				t.Fatal(err)
			}
			if snapshots != 1 {
				t.Errorf("one scrape took %d snapshots, want 1", snapshots)
			}
			if n, want := testutil.CollectAndCount(c), len(table)+len(tc.extra); n != want {
				t.Errorf("%d metrics collected, want %d", n, want)
			}
			descs := make(chan *prometheus.Desc, 16)
			c.Describe(descs)
			close(descs)
			if n, want := len(descs), len(table)+len(tc.extra); n != want {
				t.Errorf("%d descriptions, want %d", n, want)
			}
		})
	}
}
