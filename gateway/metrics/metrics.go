// Package metrics holds the request metrics that every wire surface records
// (native TCP, HTTP, S3): operations by protocol, op and result code, bytes in
// and out, and latency histograms, on a private Prometheus registry.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/gateway/errcode"
)

// Metrics records per-request figures. A nil *Metrics records nothing.
type Metrics struct {
	ops      *prometheus.CounterVec
	bytes    *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	conns    *prometheus.GaugeVec
	blockOps *prometheus.CounterVec
}

// New registers the request metrics on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "ctxtier", Name: "requests_total",
			Help: "Requests by protocol, operation and result code.",
		}, []string{"proto", "op", "code"}),
		blockOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "ctxtier", Name: "block_ops_total",
			Help: "Block operations (a batch of n counts n) by protocol, operation and result code.",
		}, []string{"proto", "op", "code"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "ctxtier", Name: "payload_bytes_total",
			Help: "Block payload bytes received (in) and sent (out) by protocol.",
		}, []string{"proto", "dir"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "ctxtier", Name: "request_duration_seconds",
			Help:    "Request latency by protocol and operation.",
			Buckets: prometheus.ExponentialBuckets(10e-6, 2, 20), // 10us .. ~5s
		}, []string{"proto", "op"}),
		conns: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "ctxtier", Name: "open_connections",
			Help: "Open client connections by protocol.",
		}, []string{"proto"}),
	}
	reg.MustRegister(m.ops, m.blockOps, m.bytes, m.latency, m.conns)
	return m
}

// Request records one request.
func (m *Metrics) Request(proto, op string, code errcode.Code, d time.Duration) {
	if m == nil {
		return
	}
	m.ops.WithLabelValues(proto, op, code.String()).Inc()
	m.latency.WithLabelValues(proto, op).Observe(d.Seconds())
}

// Block records one block-level outcome inside a request (a batch records one per item).
func (m *Metrics) Block(proto, op string, code errcode.Code) {
	if m == nil {
		return
	}
	m.blockOps.WithLabelValues(proto, op, code.String()).Inc()
}

// Bytes records payload bytes in and out.
func (m *Metrics) Bytes(proto string, in, out int64) {
	if m == nil {
		return
	}
	if in > 0 {
		m.bytes.WithLabelValues(proto, "in").Add(float64(in))
	}
	if out > 0 {
		m.bytes.WithLabelValues(proto, "out").Add(float64(out))
	}
}

// ConnOpened and ConnClosed track open connections.
func (m *Metrics) ConnOpened(proto string) {
	if m != nil {
		m.conns.WithLabelValues(proto).Inc()
	}
}

// ConnClosed decrements the open-connection gauge.
func (m *Metrics) ConnClosed(proto string) {
	if m != nil {
		m.conns.WithLabelValues(proto).Dec()
	}
}

// Observer records the requests of one protocol and operation with the
// label lookups done once, for surfaces that answer hundreds of thousands
// of small requests a second (RESP). A nil *Observer records nothing.
type Observer struct {
	m         *Metrics
	proto, op string
	latency   prometheus.Observer
	ok        prometheus.Counter
}

// Observer returns the recorder of proto's op requests (nil when m is nil).
func (m *Metrics) Observer(proto, op string) *Observer {
	if m == nil {
		return nil
	}
	return &Observer{
		m: m, proto: proto, op: op,
		latency: m.latency.WithLabelValues(proto, op),
		ok:      m.ops.WithLabelValues(proto, op, errcode.OK.String()),
	}
}

// Request records one request, like Metrics.Request.
func (o *Observer) Request(code errcode.Code, d time.Duration) {
	if o == nil {
		return
	}
	if code == errcode.OK {
		o.ok.Inc()
	} else {
		o.m.ops.WithLabelValues(o.proto, o.op, code.String()).Inc()
	}
	o.latency.Observe(d.Seconds())
}
