package raft

import (
	"strings"
	"sync"
	"time"

	gometrics "github.com/hashicorp/go-metrics"
	gmprom "github.com/hashicorp/go-metrics/prometheus"
	wal "github.com/hashicorp/raft-wal"
	walmetrics "github.com/hashicorp/raft-wal/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// Raft reports its metrics through go-metrics' process-wide global. We
// install one global whose sink fans out to one Prometheus sink per
// registry in use, so every registry passed to Open receives Raft's metrics
// (prefixed ctxtier_raft_…). In a process with several nodes (tests) the
// global metrics are those of all of them together; the per-node metrics
// below carry a node_id label.
var raftMetrics struct {
	once  sync.Once
	mu    sync.RWMutex
	sinks map[prometheus.Registerer]*regSink
}

type regSink struct {
	sink *gmprom.PrometheusSink
	refs int
}

// fanout forwards to the current registry sinks.
type fanout struct{}

func (fanout) each(fn func(gometrics.MetricSink)) {
	raftMetrics.mu.RLock()
	defer raftMetrics.mu.RUnlock()
	for _, s := range raftMetrics.sinks {
		fn(s.sink)
	}
}

func (f fanout) SetGauge(k []string, v float32) {
	f.each(func(s gometrics.MetricSink) { s.SetGauge(k, v) })
}
func (f fanout) SetGaugeWithLabels(k []string, v float32, l []gometrics.Label) {
	f.each(func(s gometrics.MetricSink) { s.SetGaugeWithLabels(k, v, l) })
}
func (f fanout) EmitKey(k []string, v float32) {
	f.each(func(s gometrics.MetricSink) { s.EmitKey(k, v) })
}
func (f fanout) IncrCounter(k []string, v float32) {
	f.each(func(s gometrics.MetricSink) { s.IncrCounter(k, v) })
}
func (f fanout) IncrCounterWithLabels(k []string, v float32, l []gometrics.Label) {
	f.each(func(s gometrics.MetricSink) { s.IncrCounterWithLabels(k, v, l) })
}
func (f fanout) AddSample(k []string, v float32) {
	f.each(func(s gometrics.MetricSink) { s.AddSample(k, v) })
}
func (f fanout) AddSampleWithLabels(k []string, v float32, l []gometrics.Label) {
	f.each(func(s gometrics.MetricSink) { s.AddSampleWithLabels(k, v, l) })
}

// attachRaftMetrics routes go-metrics into reg until the returned release
// is called.
func attachRaftMetrics(reg prometheus.Registerer) (release func(), err error) {
	if reg == nil {
		return func() {}, nil
	}
	raftMetrics.once.Do(func() {
		raftMetrics.sinks = map[prometheus.Registerer]*regSink{}
		conf := gometrics.DefaultConfig("ctxtier")
		conf.EnableHostname = false
		conf.EnableRuntimeMetrics = false
		conf.TimerGranularity = time.Millisecond
		_, _ = gometrics.NewGlobal(conf, fanout{})
	})
	raftMetrics.mu.Lock()
	defer raftMetrics.mu.Unlock()
	rs, ok := raftMetrics.sinks[reg]
	if !ok {
		s, err := gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{Registerer: reg, Expiration: 5 * time.Minute, Name: "ctxtier_raft_gometrics_sink"})
		if err != nil {
			return nil, err
		}
		rs = &regSink{sink: s}
		raftMetrics.sinks[reg] = rs
	}
	rs.refs++
	var once sync.Once
	return func() {
		once.Do(func() {
			raftMetrics.mu.Lock()
			defer raftMetrics.mu.Unlock()
			rs.refs--
			if rs.refs == 0 {
				delete(raftMetrics.sinks, reg)
				reg.Unregister(rs.sink)
			}
		})
	}, nil
}

// walCollector implements raft-wal's metrics.Collector with Prometheus
// counters and gauges labelled with the node id.
type walCollector struct {
	counters map[string]prometheus.Counter
	gauges   map[string]prometheus.Gauge
	all      []prometheus.Collector
}

func newWALCollector(nodeID string) *walCollector {
	c := &walCollector{counters: map[string]prometheus.Counter{}, gauges: map[string]prometheus.Gauge{}}
	labels := prometheus.Labels{"node_id": nodeID}
	for _, d := range wal.MetricDefinitions.Counters {
		m := prometheus.NewCounter(prometheus.CounterOpts{Name: "ctxtier_raft_wal_" + strings.TrimSuffix(d.Name, "_total") + "_total", Help: d.Desc, ConstLabels: labels})
		c.counters[d.Name] = m
		c.all = append(c.all, m)
	}
	for _, d := range wal.MetricDefinitions.Gauges {
		m := prometheus.NewGauge(prometheus.GaugeOpts{Name: "ctxtier_raft_wal_" + d.Name, Help: d.Desc, ConstLabels: labels})
		c.gauges[d.Name] = m
		c.all = append(c.all, m)
	}
	return c
}

var _ walmetrics.Collector = (*walCollector)(nil)

func (c *walCollector) IncrementCounter(name string, delta uint64) {
	if m, ok := c.counters[name]; ok {
		m.Add(float64(delta))
	}
}

func (c *walCollector) SetGauge(name string, val uint64) {
	if m, ok := c.gauges[name]; ok {
		m.Set(float64(val))
	}
}

// nodeMetrics are this package's own, per node.
type nodeMetrics struct {
	batchOps    prometheus.Histogram
	proposedOps prometheus.Counter
	applyErrors prometheus.Counter
	collectors  []prometheus.Collector
}

func newNodeMetrics(nodeID string, isLeader func() bool, opsApplied func() uint64) *nodeMetrics {
	labels := prometheus.Labels{"node_id": nodeID}
	m := &nodeMetrics{
		batchOps: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ctxtier_raft_batch_ops", Help: "Index operations per group-committed Raft log entry.",
			ConstLabels: labels, Buckets: prometheus.ExponentialBuckets(1, 4, 8)}),
		proposedOps: prometheus.NewCounter(prometheus.CounterOpts{Name: "ctxtier_raft_proposed_ops_total", Help: "Index operations proposed through the batcher.", ConstLabels: labels}),
		applyErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "ctxtier_raft_apply_errors_total", Help: "Raft applies that failed (not leader, leadership lost, timeout).", ConstLabels: labels}),
	}
	m.collectors = []prometheus.Collector{m.batchOps, m.proposedOps, m.applyErrors,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ctxtier_raft_is_leader", Help: "1 when this node is the Raft leader.", ConstLabels: labels},
			func() float64 {
				if isLeader() {
					return 1
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ctxtier_raft_index_ops_applied_total", Help: "Index operations applied to this node's FSM.", ConstLabels: labels},
			func() float64 { return float64(opsApplied()) }),
	}
	return m
}

// register adds cs to reg; the returned function unregisters them.
func register(reg prometheus.Registerer, cs []prometheus.Collector) (func(), error) {
	if reg == nil {
		return func() {}, nil
	}
	var done []prometheus.Collector
	undo := func() {
		for _, c := range done {
			reg.Unregister(c)
		}
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			undo()
			return nil, err
		}
		done = append(done, c)
	}
	return undo, nil
}
