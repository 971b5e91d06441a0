// Package metrictable exports a stats snapshot to Prometheus from a table:
// a component declares each metric once (name, help, gauge or counter, and
// how to read its value from the snapshot), and the table's Collector
// describes them and, at scrape time, takes one snapshot and turns it into
// constant metrics. The tiers' and the tier manager's collectors are such
// tables; counters stay plain atomics on the hot path and are read only when
// scraped.
package metrictable

import "github.com/prometheus/client_golang/prometheus"

// Metric is one row of a table: the metric's name after the table's prefix,
// its help string, its type (prometheus.GaugeValue or CounterValue), and its
// value in a snapshot S. Gauge and Counter make one.
type Metric[S any] struct {
	Name  string
	Help  string
	Kind  prometheus.ValueType
	Value func(S) float64
}

// Gauge is a gauge row.
func Gauge[S any](name, help string, value func(S) float64) Metric[S] {
	return Metric[S]{Name: name, Help: help, Kind: prometheus.GaugeValue, Value: value}
}

// Counter is a counter row.
func Counter[S any](name, help string, value func(S) float64) Metric[S] {
	return Metric[S]{Name: name, Help: help, Kind: prometheus.CounterValue, Value: value}
}

// Collector is a prometheus.Collector over a table of metrics of snapshot
// type S, plus any collectors that go with them (a tier's histograms).
type Collector[S any] struct {
	snapshot func() S
	metrics  []Metric[S]
	descs    []*prometheus.Desc
	extra    []prometheus.Collector
}

// New returns a collector that exports every metric of table as
// prefix+Name with the given constant labels (nil for none), each scrape
// reading one snapshot, and describes and collects extra after them.
func New[S any](prefix string, labels prometheus.Labels, snapshot func() S, table []Metric[S], extra ...prometheus.Collector) *Collector[S] {
	c := &Collector[S]{snapshot: snapshot, metrics: table, descs: make([]*prometheus.Desc, len(table)), extra: extra}
	for i, m := range table {
		c.descs[i] = prometheus.NewDesc(prefix+m.Name, m.Help, nil, labels)
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector[S]) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
	for _, e := range c.extra {
		e.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (c *Collector[S]) Collect(ch chan<- prometheus.Metric) {
	s := c.snapshot()
	for i, m := range c.metrics {
		ch <- prometheus.MustNewConstMetric(c.descs[i], m.Kind, m.Value(s))
	}
	for _, e := range c.extra {
		e.Collect(ch)
	}
}

// Flag is 1 for true and 0 for false: a boolean state as a gauge.
func Flag(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
