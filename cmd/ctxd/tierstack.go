package main

import (
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster"
	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/tiers"
	"github.com/ctxtier/ctxtier/tiers/dram"
	"github.com/ctxtier/ctxtier/tiers/nvme"
	"github.com/ctxtier/ctxtier/tiers/policy"
	"github.com/ctxtier/ctxtier/tiers/s3"
)

// clusterHooks is the node's one late binding between its tiers and its
// cluster, owed to a cycle: the cluster backend stacks on the tier manager
// (its local replicas), while the tiers report the blocks they drop without
// a delete to the backend (so the index does not claim them) and read each
// namespace's quotas and S3 policy from Raft's catalog. Raft opens after the
// tiers, so that a restarted node neither votes nor leads before its tiers
// are open, and the backend needs the manager to exist; the tiers are
// therefore built over these hooks and bind connects them once the cluster
// is open. Until then a namespace lookup answers block.ErrUnavailable (no
// quota, kept out of S3) and a drop is not reported.
type clusterHooks struct {
	catalog atomic.Pointer[raft.Catalog]
	backend atomic.Pointer[cluster.Backend]
}

// bind connects the hooks to the opened cluster.
func (h *clusterHooks) bind(c *raft.Catalog, b *cluster.Backend) {
	h.backend.Store(b)
	h.catalog.Store(c)
}

// namespace looks a namespace up in Raft's catalog once it is bound.
func (h *clusterHooks) namespace(name string) (block.Namespace, error) {
	if c := h.catalog.Load(); c != nil {
		return c.Namespace(name)
	}
	return block.Namespace{}, fmt.Errorf("%w: namespace catalog not open yet", block.ErrUnavailable)
}

// dropped tells the backend of a block that left this node without a delete.
func (h *clusterHooks) dropped(k block.Key) {
	if b := h.backend.Load(); b != nil {
		b.Dropped(k)
	}
}

// openTiers builds the node's tier stack: DRAM, over NVMe unless --nvme-dir
// is off, over S3 when --s3-endpoint is set too (namespaces resolves the S3
// policy). onDrop hears of blocks that leave the node without a delete.
// The returned function closes the stack, then NVMe, then S3.
func openTiers(cfg Config, namespaces func(string) (block.Namespace, error), reg prometheus.Registerer, log *slog.Logger, onDrop func(block.Key)) (*tiers.Manager, func(), error) {
	factory, err := policy.Lookup(cfg.DRAMPolicy)
	if err != nil {
		return nil, nil, err
	}
	dcfg := dram.DefaultConfig()
	dcfg.Capacity = cfg.DRAMCapacity
	dcfg.MemFile = cfg.DRAMMemFile
	dcfg.HugePages = cfg.DRAMHuge
	dcfg.Prefault = cfg.DRAMPrefault
	dcfg.MaxBlockSize = cfg.MaxBlockSize
	dcfg.Policy = factory
	tcfg := tiers.DefaultConfig()
	tcfg.OnDrop = onDrop
	quotaOf := func(ns string) block.Quota {
		n, err := namespaces(ns)
		if err != nil {
			return block.Quota{}
		}
		return n.Quota
	}
	tcfg.Quota = quotaOf
	var lower *nvme.Tier
	var cold *s3.Tier
	// The lower tiers hand the blocks they evict up to the manager that is
	// built over them, in their own goroutines: the one late binding inside
	// the stack, set once the manager exists.
	var built atomic.Pointer[tiers.Manager]
	// A block that leaves S3 without a delete (its quota, its TTL, a
	// demotion S3 did not keep) is gone from this node unless NVMe or DRAM
	// still holds it.
	// It is checked off the evicting goroutine: that may be NVMe's own
	// (its quota hands blocks to S3), whose Contains must not be re-entered.
	coldDropped := func(k block.Key) {
		go func() {
			if m := built.Load(); m != nil && (lower == nil || !lower.Contains(k)) {
				m.LowerEvicted(k, nil, 0)
			}
		}()
	}
	if cfg.nvmeEnabled() && cfg.S3Endpoint != "" {
		if cold, err = openS3Tier(cfg, namespaces, reg, log, coldDropped); err != nil {
			return nil, nil, err
		}
	}
	closeCold := func() {
		if cold != nil {
			if err := cold.Close(); err != nil {
				log.Error("closing the s3 tier", "err", err)
			}
		}
	}
	if cfg.nvmeEnabled() {
		ncfg := nvme.DefaultConfig()
		ncfg.Dir = cfg.NVMeDir
		ncfg.Capacity = cfg.NVMeCapacity
		ncfg.SegmentSize = cfg.NVMeSegment
		ncfg.MaxBlockSize = cfg.MaxBlockSize
		ncfg.SyncWrites = cfg.NVMeSync
		ncfg.Quota = func(ns string) int64 { return quotaOf(ns).NVMe }
		if cold != nil {
			ncfg.OnEvict = cold.Demote
		} else {
			ncfg.OnEvict = func(k block.Key, data []byte, sum uint32) {
				if m := built.Load(); m != nil {
					m.LowerEvicted(k, data, sum)
				}
			}
		}
		if lower, err = nvme.New(ncfg, log); err != nil {
			closeCold()
			return nil, nil, err
		}
		reg.MustRegister(nvme.NewCollector(lower))
		if cfg.NVMeAdmit == "tinylfu" {
			blocks := int(max(cfg.NVMeCapacity/(256<<10), 1024))
			tcfg.DemoteAdmission = tiers.LockAdmitter(policy.NewSketchAdmitter(blocks, 2))
		}
	}
	var lw tiers.Lower
	if lower != nil {
		lw = lower
	}
	if cold != nil {
		// Reads try NVMe then S3; S3 hits are written back to NVMe.
		lw = &tiers.Chain{Tiers: []tiers.Lower{lower, cold}, Promote: true}
	}
	stack, err := tiers.New(tcfg, dcfg, lw, log)
	if err != nil {
		if lower != nil {
			lower.Close()
		}
		closeCold()
		return nil, nil, err
	}
	built.Store(stack)
	reg.MustRegister(dram.NewCollector(stack.DRAM()), tiers.NewCollector(stack))
	return stack, func() {
		stack.Close()
		if lower != nil {
			if err := lower.Close(); err != nil {
				log.Error("closing the nvme tier", "err", err)
			}
		}
		closeCold() // after NVMe, which hands it blocks until closed
	}, nil
}
