package dram

import (
	"context"
	"fmt"
	"maps"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Per-namespace accounting and quotas. Every namespace with blocks here has
// an account: its payload bytes (resident blocks plus space reserved by puts
// in progress, so concurrent puts cannot overshoot a quota together) and a
// list of its resident blocks, most recently used first. When a put would
// take a namespace over its quota (Config.Quota), the namespace's own least
// recently used evictable block is evicted (demoted through Config.Demote
// like any eviction) until the put fits; other namespaces' blocks are never
// touched for a quota. A block larger than the quota is refused.

const nilHandle = ^uint32(0)

// nsAcct is one namespace's account.
type nsAcct struct {
	bytes      int64
	head, tail uint32 // the namespace's live entries; head is most recent
	blocks     int
}

func (t *Tier) acctLocked(ns string) *nsAcct {
	a := t.ns[ns]
	if a == nil {
		a = &nsAcct{head: nilHandle, tail: nilHandle}
		t.ns[ns] = a
	}
	return a
}

// chargeLocked adds size bytes (a reservation) to ns.
func (t *Tier) chargeLocked(ns string, size int64) { t.acctLocked(ns).bytes += size }

// unchargeLocked removes size bytes from ns, dropping an empty account.
func (t *Tier) unchargeLocked(ns string, size int64) {
	a := t.ns[ns]
	if a == nil {
		return
	}
	a.bytes -= size
	if a.bytes <= 0 && a.blocks == 0 {
		delete(t.ns, ns)
	}
}

// linkLocked puts live entry h at the head of its namespace's list.
func (t *Tier) linkLocked(h uint32) {
	e := t.entries.At(h)
	a := t.acctLocked(e.key.Namespace)
	e.nsPrev, e.nsNext = nilHandle, a.head
	if a.head != nilHandle {
		t.entries.At(a.head).nsPrev = h
	}
	a.head = h
	if a.tail == nilHandle {
		a.tail = h
	}
	a.blocks++
}

// unlinkLocked takes entry h out of its namespace's list.
func (t *Tier) unlinkLocked(h uint32) {
	e := t.entries.At(h)
	a := t.ns[e.key.Namespace]
	if a == nil {
		return
	}
	if e.nsPrev != nilHandle {
		t.entries.At(e.nsPrev).nsNext = e.nsNext
	} else {
		a.head = e.nsNext
	}
	if e.nsNext != nilHandle {
		t.entries.At(e.nsNext).nsPrev = e.nsPrev
	} else {
		a.tail = e.nsPrev
	}
	e.nsPrev, e.nsNext = nilHandle, nilHandle
	a.blocks--
}

// nsTouchLocked moves live entry h to the head of its namespace's list.
func (t *Tier) nsTouchLocked(h uint32) {
	if a := t.ns[t.entries.At(h).key.Namespace]; a != nil && a.head != h {
		t.unlinkLocked(h)
		t.linkLocked(h)
	}
}

// nsVictimLocked is ns's least recently used block that may be evicted now
// (not leased, pinned, or already being demoted).
func (t *Tier) nsVictimLocked(ns string, now int64) (uint32, bool) {
	a := t.ns[ns]
	if a == nil {
		return 0, false
	}
	for h := a.tail; h != nilHandle; h = t.entries.At(h).nsPrev {
		if e := t.entries.At(h); e.tracked && e.leases == 0 && e.pinUntil <= now {
			return h, true
		}
	}
	return 0, false
}

// quotaOf is ns's DRAM quota, 0 for none.
func (t *Tier) quotaOf(ns string) int64 {
	if t.cfg.Quota == nil {
		return 0
	}
	return max(t.cfg.Quota(ns), 0)
}

// putQuota is the DRAM quota of a put's namespace: from the put's options
// when the store resolved the namespace for it (no second lookup), else
// Config.Quota's. Without Config.Quota no namespace has a quota here.
func (t *Tier) putQuota(ns string, opts *block.PutOptions) int64 {
	if t.cfg.Quota != nil && opts.Resolved(ns) {
		return max(opts.Namespace.Quota.DRAM, 0)
	}
	return t.quotaOf(ns)
}

// fitQuotaLocked evicts ns's own blocks until size more bytes fit in its
// quota. It may release and retake t.mu (a demotion).
func (t *Tier) fitQuotaLocked(ctx context.Context, key block.Key, size, quota int64) error {
	ns := key.Namespace
	if size > quota {
		t.st.quotaRefused.Add(1)
		return fmt.Errorf("%w: %s: block of %d bytes is larger than namespace %q's dram quota of %d bytes",
			block.ErrQuotaExceeded, key, size, ns, quota)
	}
	for {
		if t.closed {
			return block.ErrClosed
		}
		a := t.ns[ns]
		if a == nil || a.bytes+size <= quota {
			return nil
		}
		now := t.now().UnixNano()
		h, ok := t.nsVictimLocked(ns, now)
		if !ok {
			t.st.quotaRefused.Add(1)
			return fmt.Errorf("%w: %s: namespace %q holds %d of its %d-byte dram quota and every one of its blocks is pinned, leased or being demoted",
				block.ErrQuotaExceeded, key, ns, a.bytes, quota)
		}
		t.st.quotaEvictions.Add(1)
		t.evictLocked(ctx, h, now)
	}
}

// NamespaceBytes returns each namespace's bytes in the tier (resident
// blocks, plus space reserved by puts in progress).
func (t *Tier) NamespaceBytes() map[string]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]int64, len(t.ns))
	for ns, a := range maps.All(t.ns) {
		out[ns] = a.bytes
	}
	return out
}

// Medium is block.TierDRAM (tiers.Counter).
func (t *Tier) Medium() block.Tier { return block.TierDRAM }

// TrimNamespace evicts (demotes) ns's least recently used evictable blocks
// until it holds at most limit bytes, evicting at most about budget bytes
// in this call, so that a lowered quota is reached at a bounded rate
// without a put. It returns the bytes it evicted.
func (t *Tier) TrimNamespace(ctx context.Context, ns string, limit, budget int64) (int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var freed int64
	for freed < budget {
		if t.closed {
			return freed, block.ErrClosed
		}
		a := t.ns[ns]
		if a == nil || a.bytes <= limit {
			break
		}
		now := t.now().UnixNano()
		h, ok := t.nsVictimLocked(ns, now)
		if !ok {
			break
		}
		freed += t.entries.At(h).size
		t.st.quotaEvictions.Add(1)
		t.evictLocked(ctx, h, now)
	}
	return freed, nil
}
