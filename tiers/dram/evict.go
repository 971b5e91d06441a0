package dram

import (
	"context"
	"fmt"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/tiers/policy"
)

// reserveLocked allocates pages for a size-byte block of key, evicting as
// the policy says, after evicting the key's namespace's own blocks as far
// as its quota needs (quota.go); the bytes are charged to the namespace. It
// may release and retake t.mu while a victim is being demoted.
func (t *Tier) reserveLocked(ctx context.Context, key block.Key, size, quota int64) (uint32, uint32, error) {
	pages := uint32((size + PageSize - 1) / PageSize)
	if int64(pages) > int64(t.alloc.npages) {
		return 0, 0, fmt.Errorf("%w: block of %d bytes exceeds the dram capacity", block.ErrTooLarge, size)
	}
	for {
		if t.closed {
			return 0, 0, block.ErrClosed
		}
		if quota > 0 {
			if err := t.fitQuotaLocked(ctx, key, size, quota); err != nil {
				return 0, 0, err
			}
		}
		if p, ok := t.alloc.alloc(pages); ok {
			t.chargeLocked(key.Namespace, size)
			return p, pages, nil
		}
		now := t.now().UnixNano()
		t.setClockLocked(now)
		v, ok := t.policy.Victim(t.evictableAt(now))
		if !ok {
			t.st.noSpace.Add(1)
			return 0, 0, fmt.Errorf("%w: need %d bytes, every resident block is pinned, leased or being demoted", block.ErrNoSpace, size)
		}
		t.evictLocked(ctx, uint32(v), now)
	}
}

// evictLocked evicts tracked entry h: at once when it is clean, put with
// the agent hint block.ReuseNever (it will not be read again: not worth a
// lower tier's write) or there is no lower tier, else after handing it to
// Demote (t.mu is released and retaken meanwhile).
func (t *Tier) evictLocked(ctx context.Context, h uint32, now int64) {
	e := t.entries.At(h)
	if t.closed {
		// Close is unmapping the arena: nothing can be demoted from it
		// now. The callers' loops see closed and give up.
		return
	}
	t.st.evictions.Add(1)
	t.st.evictedBytes.Add(uint64(e.size))
	if t.cfg.Demote == nil || e.clean || e.never {
		key := e.key
		t.unindexLocked(h)
		t.evictedLocked(key)
		return
	}
	// Write-back: hand the block to the lower tier without holding the
	// lock. It stays indexed (readable) and leased, but leaves the policy
	// so no one picks it again.
	e.leases++
	t.policy.Remove(policy.Handle(h))
	e.tracked = false
	key, data, sum, info := e.key, t.bytesOf(e), e.sum, t.infoLocked(e, now)
	t.busy.Add(1) // enterLocked: closed was checked above, under this hold of mu
	t.mu.Unlock()
	t.cfg.Demote(ctx, key, data, sum, info)
	t.busy.Done()
	t.mu.Lock()
	e = t.entries.At(h)
	gone := e.live && t.index[key] == h
	if gone {
		t.unindexLocked(h)
	}
	e.leases--
	if e.leases == 0 && e.doomed {
		t.releaseLocked(h)
	}
	if gone {
		t.evictedLocked(key)
	}
}

// evictedLocked runs the Evicted hook for key, which eviction has just
// unindexed, without holding t.mu (it is released and retaken).
func (t *Tier) evictedLocked(key block.Key) {
	if t.cfg.Evicted == nil {
		return
	}
	t.mu.Unlock()
	t.cfg.Evicted(key)
	t.mu.Lock()
}

// setClockLocked tells a time-aware policy (policy.Clocked: the retain
// windows of agent hints) the time, in Unix nanoseconds, before it orders
// blocks.
func (t *Tier) setClockLocked(now int64) {
	if t.clock != nil {
		t.clock.SetNow(now)
	}
}
