package s3

import (
	"context"
	"fmt"
	"maps"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Per-namespace accounting and quotas. The tier counts each namespace's
// payload bytes: the blocks it holds, buffered for upload or indexed in a
// pack. The count covers what this tier wrote or indexed, under this node's
// prefix, so it is per node like the DRAM and NVMe quotas even when nodes
// share a bucket; it is rebuilt with the index (journal replay, or the
// rebuild from the bucket). Each held block has one small entry in a
// per-namespace list, most recently used first (a put, a demotion or a get
// moves it to the front).
//
// A put or demotion that would take a namespace over its quota
// (Config.Quota) first forgets that namespace's own least recently used
// unpinned blocks, as Delete does (their bytes leave the pack at the next
// compaction), and reports each to Config.OnDrop, as every block that leaves
// the tier without a delete is reported. Other namespaces' blocks are never
// touched for a quota. A block larger than the quota, or one that cannot fit
// because the rest is pinned, is refused with block.ErrQuotaExceeded (a
// demotion that is refused is a drop).

// held is one block the tier holds, in its namespace's recency list.
type held struct {
	key        block.Key
	size       int64
	pinUntil   int64
	prev, next *held
}

// nsAcct is one namespace's account.
type nsAcct struct {
	bytes      int64
	head, tail *held // head is the most recently used
}

func (t *Tier) nsLink(a *nsAcct, h *held) {
	h.prev, h.next = nil, a.head
	if a.head != nil {
		a.head.prev = h
	}
	a.head = h
	if a.tail == nil {
		a.tail = h
	}
}

func (t *Tier) nsUnlink(a *nsAcct, h *held) {
	if h.prev != nil {
		h.prev.next = h.next
	} else {
		a.head = h.next
	}
	if h.next != nil {
		h.next.prev = h.prev
	} else {
		a.tail = h.prev
	}
	h.prev, h.next = nil, nil
}

// syncHeldLocked brings key's account entry in line with what the tier
// holds of it now (buffered or indexed), after any change to t.pend or
// t.index.
func (t *Tier) syncHeldLocked(k block.Key) {
	var size int64
	if p := t.pend[k]; p != nil {
		size = int64(len(p.data))
	} else if l, ok := t.index[k]; ok {
		size = l.length
	}
	h := t.held[k]
	a := t.nsAcct[k.Namespace]
	switch {
	case size == 0 && h == nil:
	case size == 0:
		t.nsUnlink(a, h)
		a.bytes -= h.size
		delete(t.held, k)
		if a.head == nil {
			delete(t.nsAcct, k.Namespace)
		}
	case h == nil:
		if a == nil {
			a = &nsAcct{}
			t.nsAcct[k.Namespace] = a
		}
		h = &held{key: k, size: size}
		t.held[k] = h
		t.nsLink(a, h)
		a.bytes += size
	default:
		a.bytes += size - h.size
		h.size = size
	}
}

// touchLocked makes key its namespace's most recently used block.
func (t *Tier) touchLocked(k block.Key) {
	if h := t.held[k]; h != nil {
		a := t.nsAcct[k.Namespace]
		if a.head != h {
			t.nsUnlink(a, h)
			t.nsLink(a, h)
		}
	}
}

// pinLocked keeps key from quota eviction until until (UnixNano).
func (t *Tier) pinLocked(k block.Key, until int64) {
	if h := t.held[k]; h != nil && until > h.pinUntil {
		h.pinUntil = until
	}
}

// quotaOf is ns's S3 quota, 0 for none.
func (t *Tier) quotaOf(ns string) int64 {
	if t.cfg.Quota == nil {
		return 0
	}
	return max(t.cfg.Quota(ns), 0)
}

// forgetLocked removes key from the buffer and the index, as Delete does,
// and reports whether the tier held it.
func (t *Tier) forgetLocked(key block.Key) bool {
	found := false
	if p := t.pend[key]; p != nil {
		p.dead = true
		delete(t.pend, key)
		found = true
	}
	if t.unindexLocked(key) {
		t.journalLocked(encodeDeleteRecord(key), false)
		found = true
	}
	t.syncHeldLocked(key)
	return found
}

// evictNamespaceLocked forgets ns's least recently used unpinned blocks
// (never skip) until its bytes are at most limit or budget bytes went, and
// returns the keys it forgot (to report once t.mu is released).
func (t *Tier) evictNamespaceLocked(ns string, limit, budget int64, skip block.Key) []block.Key {
	a := t.nsAcct[ns]
	if a == nil {
		return nil
	}
	now := t.now().UnixNano()
	var gone []block.Key
	var freed int64
	for h := a.tail; h != nil && a.bytes > limit && freed < budget; {
		prev := h.prev
		if h.key != skip && h.pinUntil <= now {
			freed += h.size
			gone = append(gone, h.key)
			t.forgetLocked(h.key)
			t.st.quotaEvictions.Add(1)
			if t.nsAcct[ns] == nil {
				break
			}
		}
		h = prev
	}
	return gone
}

// admitLocked makes room in key's namespace for n bytes replacing what the
// tier holds of key; it returns the blocks it evicted for that.
func (t *Tier) admitLocked(key block.Key, n int64) ([]block.Key, error) {
	ns := key.Namespace
	quota := t.quotaOf(ns)
	if quota == 0 {
		return nil, nil
	}
	if n > quota {
		t.st.quotaRefused.Add(1)
		return nil, fmt.Errorf("%w: s3 tier: block %s of %d bytes is larger than namespace %q's s3 quota of %d bytes",
			block.ErrQuotaExceeded, key, n, ns, quota)
	}
	var own int64
	if h := t.held[key]; h != nil {
		own = h.size
	}
	used := func() int64 {
		if a := t.nsAcct[ns]; a != nil {
			return a.bytes - own
		}
		return 0
	}
	if used()+n <= quota {
		return nil, nil
	}
	gone := t.evictNamespaceLocked(ns, quota-n+own, used()+n-quota, key)
	if u := used(); u+n > quota {
		t.st.quotaRefused.Add(1)
		return gone, fmt.Errorf("%w: s3 tier: %s: namespace %q holds %d bytes of its %d-byte s3 quota and the rest of its blocks are pinned",
			block.ErrQuotaExceeded, key, ns, u, quota)
	}
	return gone, nil
}

// reportDrops tells Config.OnDrop of blocks that left the tier without a
// delete (t.mu not held).
func (t *Tier) reportDrops(keys []block.Key) {
	if t.cfg.OnDrop == nil {
		return
	}
	for _, k := range keys {
		t.cfg.OnDrop(k)
	}
}

// TrimNamespace forgets ns's least recently used unpinned blocks until it
// holds at most limit bytes, forgetting at most about budget bytes in this
// call (a quota that was lowered is reached over several calls). It returns
// the bytes it freed.
func (t *Tier) TrimNamespace(_ context.Context, ns string, limit, budget int64) (int64, error) {
	t.mu.Lock()
	var before int64
	if a := t.nsAcct[ns]; a != nil {
		before = a.bytes
	}
	gone := t.evictNamespaceLocked(ns, limit, budget, block.Key{})
	var after int64
	if a := t.nsAcct[ns]; a != nil {
		after = a.bytes
	}
	t.mu.Unlock()
	t.reportDrops(gone)
	return before - after, nil
}

// NamespaceBytes returns each namespace's payload bytes in the tier
// (buffered and uploaded; tiers.Counter).
func (t *Tier) NamespaceBytes() map[string]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]int64, len(t.nsAcct))
	for ns, a := range maps.All(t.nsAcct) {
		out[ns] = a.bytes
	}
	return out
}

// Medium is block.TierS3 (tiers.Counter).
func (t *Tier) Medium() block.Tier { return block.TierS3 }
