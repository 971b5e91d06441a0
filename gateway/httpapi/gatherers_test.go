package httpapi

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestMetricsServesExtraGatherers(t *testing.T) {
	extra := prometheus.NewRegistry()
	other := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "in_extra_total", Help: "h"}, []string{"namespace"})
	other.WithLabelValues("a").Add(3)
	extra.MustRegister(other)
	for _, tc := range []struct {
		name       string
		opts       []Option
		want, lack []string
	}{
		{"registry alone", nil, []string{"in_registry_total 2"}, []string{"in_extra_total"}},
		{"with a gatherer", []Option{WithGatherers(extra)}, []string{"in_registry_total 2", `in_extra_total{namespace="a"} 3`}, nil},
	} {
		reg := prometheus.NewRegistry()
		own := prometheus.NewCounter(prometheus.CounterOpts{Name: "in_registry_total", Help: "h"})
		own.Add(2)
		reg.MustRegister(own)
		s := New(DefaultConfig(), nil, reg, nil, tc.opts...)
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		body, _ := io.ReadAll(rec.Body)
		for _, w := range tc.want {
			if !strings.Contains(string(body), w) {
				t.Errorf("%s: /metrics lacks %q:\n%s", tc.name, w, body)
			}
		}
		for _, l := range tc.lack {
			if strings.Contains(string(body), l) {
				t.Errorf("%s: /metrics has %q", tc.name, l)
			}
		}
	}
}
