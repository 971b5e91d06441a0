package tiers

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Counter is a tier that counts each namespace's bytes (tiers/dram and
// tiers/nvme do; they also enforce the namespaces' quotas).
type Counter interface {
	NamespaceBytes() map[string]int64
	Medium() block.Tier
}

// NamespaceUsage returns each counting tier's bytes per namespace on this
// node: DRAM, and the lower tiers that implement Counter.
func (m *Manager) NamespaceUsage() map[block.Tier]map[string]int64 {
	out := map[block.Tier]map[string]int64{block.TierDRAM: m.dram.NamespaceBytes()}
	lowers := []Lower{m.lower}
	if c, ok := m.lower.(*Chain); ok {
		lowers = c.Tiers
	}
	for _, l := range lowers {
		if c, ok := l.(Counter); ok {
			out[c.Medium()] = c.NamespaceBytes()
		}
	}
	return out
}

// NamespaceCollector exports ctxtier_namespace_bytes{namespace,tier}, the
// bytes each namespace holds in each counting tier of this node, and
// ctxtier_namespace_quota_bytes{namespace,tier}, each quota that is set.
type NamespaceCollector struct {
	m             *Manager
	list          func() []block.Namespace
	bytes, quotas *prometheus.Desc
}

// NewNamespaceCollector returns a collector over m's tiers; list returns
// the namespaces (with their quotas).
func NewNamespaceCollector(m *Manager, list func() []block.Namespace) *NamespaceCollector {
	labels := []string{"namespace", "tier"}
	return &NamespaceCollector{m: m, list: list,
		bytes:  prometheus.NewDesc("ctxtier_namespace_bytes", "Payload bytes a namespace holds in a tier of this node.", labels, nil),
		quotas: prometheus.NewDesc("ctxtier_namespace_quota_bytes", "A namespace's byte quota in a tier (per node); absent when unlimited.", labels, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *NamespaceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.bytes
	ch <- c.quotas
}

// Collect implements prometheus.Collector. Every namespace of the catalog
// gets a bytes sample per counting tier (0 when it holds nothing there).
func (c *NamespaceCollector) Collect(ch chan<- prometheus.Metric) {
	usage := c.m.NamespaceUsage()
	var list []block.Namespace
	if c.list != nil {
		list = c.list()
	}
	for tier, byNS := range usage {
		seen := make(map[string]bool, len(byNS))
		for ns, b := range byNS {
			seen[ns] = true
			ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(b), ns, string(tier))
		}
		for _, n := range list {
			if !seen[n.Name] {
				ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, 0, n.Name, string(tier))
			}
		}
	}
	for _, n := range list {
		for _, tier := range []block.Tier{block.TierDRAM, block.TierNVMe, block.TierS3} {
			if q := n.Quota.Of(tier); q > 0 {
				ch <- prometheus.MustNewConstMetric(c.quotas, prometheus.GaugeValue, float64(q), n.Name, string(tier))
			}
		}
	}
}
