package ctxstore

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Traffic counts each namespace's requests through a Store: gets (hits and
// misses), puts and their bytes. The counters of a namespace are made on its
// first request that names a namespace the catalog knows, so there is at
// most one set per namespace (a namespace with no traffic has none). After
// that a request costs one lock-free map load and atomic adds: no lock and
// no allocation on the request path.
type Traffic struct {
	m sync.Map // namespace name -> *nsCounters
}

type nsCounters struct {
	gets, hits, misses, puts, readBytes, writtenBytes atomic.Uint64
}

// TrafficCount is one namespace's totals since the node started (or since
// the namespace's first request, if later).
type TrafficCount struct {
	Namespace string `json:"namespace"`
	// Gets is every get of a block of the namespace, whatever its outcome.
	Gets uint64 `json:"gets"`
	// Hits are gets that returned the block, Misses those that found none
	// (block.ErrNotFound). Gets - Hits - Misses failed otherwise.
	Hits   uint64 `json:"hits"`
	Misses uint64 `json:"misses"`
	// Puts are puts that succeeded (stored, or already there with the same
	// bytes), WrittenBytes their payload bytes.
	Puts         uint64 `json:"puts"`
	WrittenBytes uint64 `json:"written_bytes"`
	// ReadBytes are the payload bytes of the hits.
	ReadBytes uint64 `json:"read_bytes"`
}

// of returns ns's counters, making them on first use. ns must be a name the
// catalog knows (the callers count after the catalog lookup succeeded).
func (t *Traffic) of(ns string) *nsCounters {
	if c, ok := t.m.Load(ns); ok {
		return c.(*nsCounters)
	}
	c, _ := t.m.LoadOrStore(strings.Clone(ns), &nsCounters{})
	return c.(*nsCounters)
}

func (t *Traffic) get(ns string, size int, err error) {
	c := t.of(ns)
	c.gets.Add(1)
	switch {
	case err == nil:
		c.hits.Add(1)
		c.readBytes.Add(uint64(size))
	case errors.Is(err, block.ErrNotFound):
		c.misses.Add(1)
	}
}

func (t *Traffic) put(ns string, size int) {
	c := t.of(ns)
	c.puts.Add(1)
	c.writtenBytes.Add(uint64(size))
}

// Snapshot returns the totals of every namespace that has had traffic,
// sorted by name.
func (t *Traffic) Snapshot() []TrafficCount {
	var out []TrafficCount
	t.m.Range(func(k, v any) bool {
		c := v.(*nsCounters)
		out = append(out, TrafficCount{Namespace: k.(string), Gets: c.gets.Load(), Hits: c.hits.Load(), Misses: c.misses.Load(),
			Puts: c.puts.Load(), WrittenBytes: c.writtenBytes.Load(), ReadBytes: c.readBytes.Load()})
		return true
	})
	slices.SortFunc(out, func(a, b TrafficCount) int { return strings.Compare(a.Namespace, b.Namespace) })
	return out
}

// Forget drops the counters of every namespace keep refuses (the deleted
// ones), so the set stays bounded by the namespaces that exist.
func (t *Traffic) Forget(keep func(ns string) bool) {
	t.m.Range(func(k, _ any) bool {
		if !keep(k.(string)) {
			t.m.Delete(k)
		}
		return true
	})
}

// TrafficCollector exports a Store's per-namespace traffic as
// ctxtier_namespace_{gets,hits,misses,puts}_total and
// ctxtier_namespace_{read,written}_bytes_total with a namespace label: six
// series per namespace that has had traffic on this node. Each scrape first
// forgets the counters of namespaces the catalog no longer lists.
type TrafficCollector struct {
	t          *Traffic
	namespaces func() []block.Namespace
	descs      [6]*prometheus.Desc
}

// NewTrafficCollector returns a collector of s's traffic; register it on a
// registry (once per registry: the names are fixed).
func NewTrafficCollector(s *Store) *TrafficCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("ctxtier_namespace_"+name, help, []string{"namespace"}, nil)
	}
	return &TrafficCollector{t: s.traffic, namespaces: s.Namespaces, descs: [6]*prometheus.Desc{
		d("gets_total", "Gets of blocks of the namespace through this node's client-facing store, whatever their outcome."),
		d("hits_total", "Gets of the namespace that returned the block."),
		d("misses_total", "Gets of the namespace that found no block."),
		d("puts_total", "Puts of the namespace that succeeded."),
		d("read_bytes_total", "Payload bytes returned by the namespace's gets."),
		d("written_bytes_total", "Payload bytes of the namespace's successful puts."),
	}}
}

// Describe implements prometheus.Collector.
func (c *TrafficCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *TrafficCollector) Collect(ch chan<- prometheus.Metric) {
	list := c.namespaces()
	known := make(map[string]struct{}, len(list))
	for _, ns := range list {
		known[ns.Name] = struct{}{}
	}
	c.t.Forget(func(ns string) bool { _, ok := known[ns]; return ok })
	for _, tc := range c.t.Snapshot() {
		for i, v := range [6]uint64{tc.Gets, tc.Hits, tc.Misses, tc.Puts, tc.ReadBytes, tc.WrittenBytes} {
			ch <- prometheus.MustNewConstMetric(c.descs[i], prometheus.CounterValue, float64(v), tc.Namespace)
		}
	}
}
