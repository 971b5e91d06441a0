package tiers

import (
	"context"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Trimmer is a counting tier that brings a namespace down to a byte limit
// on its own, evicting that namespace's blocks by the same rules as a put
// over its quota (tiers/dram, tiers/nvme, tiers/s3).
type Trimmer interface {
	Counter
	// TrimNamespace evicts ns's blocks until it holds at most limit
	// bytes, at most about budget bytes per call; it returns the bytes
	// it evicted.
	TrimNamespace(ctx context.Context, ns string, limit, budget int64) (int64, error)
}

// trimmers are the manager's tiers that trim, hottest first.
func (m *Manager) trimmers() []Trimmer {
	out := []Trimmer{m.dram}
	lowers := []Lower{m.lower}
	if c, ok := m.lower.(*Chain); ok {
		lowers = c.Tiers
	}
	for _, l := range lowers {
		if t, ok := l.(Trimmer); ok {
			out = append(out, t)
		}
	}
	return out
}

// TrimQuotas brings every namespace that holds more than its quota in a
// tier (a quota that was lowered, or an index rebuilt over it) down
// toward that quota, evicting at most TrimBudget bytes per tier in this
// call: DRAM demotes to the lower tier, NVMe hands blocks on to S3, S3
// forgets them. It returns the bytes evicted per tier.
func (m *Manager) TrimQuotas(ctx context.Context) map[block.Tier]int64 {
	out := map[block.Tier]int64{}
	if m.cfg.Quota == nil {
		return out
	}
	for _, t := range m.trimmers() {
		tier := t.Medium()
		budget := m.cfg.TrimBudget
		for ns, b := range t.NamespaceBytes() {
			q := m.cfg.Quota(ns).Of(tier)
			if q <= 0 || b <= q || budget <= 0 {
				continue
			}
			freed, err := t.TrimNamespace(ctx, ns, q, budget)
			if err != nil {
				m.log.Warn("trimming a namespace to its quota failed", "namespace", ns, "tier", tier, "err", err)
			}
			budget -= freed
			out[tier] += freed
		}
	}
	for tier, n := range out {
		if n > 0 {
			m.trimmed.Add(uint64(n))
			m.log.Debug("namespaces trimmed to their quotas", "tier", tier, "bytes", n)
		}
	}
	return out
}

// RunQuotaTrim calls TrimQuotas every TrimInterval until ctx ends, so a
// lowered quota takes effect within about a second, without waiting for
// the namespace's next put.
func (m *Manager) RunQuotaTrim(ctx context.Context) {
	tick := time.NewTicker(m.cfg.TrimInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			m.TrimQuotas(ctx)
		}
	}
}
