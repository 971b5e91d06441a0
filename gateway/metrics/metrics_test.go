package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/gateway/errcode"
)

// TestObserverRecordsLikeRequest: an Observer's requests land in the same
// series as Metrics.Request's, successes and failures alike.
func TestObserverRecordsLikeRequest(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	o := m.Observer("resp", "get")
	o.Request(errcode.OK, time.Millisecond)
	o.Request(errcode.OK, time.Millisecond)
	o.Request(errcode.NotFound, time.Millisecond)
	m.Request("resp", "get", errcode.OK, time.Millisecond)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	latencySeries, latencyCount := 0, uint64(0)
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			labels := ""
			for _, l := range mt.GetLabel() {
				labels += l.GetName() + "=" + l.GetValue() + ","
			}
			switch mf.GetName() {
			case "ctxtier_requests_total":
				got[labels] = mt.GetCounter().GetValue()
			case "ctxtier_request_duration_seconds":
				latencySeries++
				latencyCount += mt.GetHistogram().GetSampleCount()
			}
		}
	}
	cases := []struct {
		code errcode.Code
		want float64
	}{{errcode.OK, 3}, {errcode.NotFound, 1}, {errcode.Internal, 0}}
	for _, tc := range cases {
		if v := got["code="+tc.code.String()+",op=get,proto=resp,"]; v != tc.want {
			t.Errorf("%s: %v requests, want %v (all: %v)", tc.code, v, tc.want, got)
		}
	}
	if latencySeries != 1 || latencyCount != 4 {
		t.Errorf("%d latency series with %d samples, want 1 with 4", latencySeries, latencyCount)
	}
	var nilObs *Observer
	nilObs.Request(errcode.OK, time.Second) // records nothing, does not panic
	if (*Metrics)(nil).Observer("resp", "get") != nil {
		t.Error("a nil Metrics gave an Observer")
	}
}
