package nvme

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/dgraph-io/badger/v4"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Per-namespace accounting and quotas. The tier counts each namespace's
// payload bytes (indexed blocks, rebuilt from the index at open). A put that
// would take a namespace over its quota (Config.Quota) first evicts that
// namespace's own least valuable blocks: those not read since written
// before read ones, oldest first, never pinned ones, each handed to OnEvict
// (the next tier down) as reclamation does. Other namespaces' blocks are
// never evicted for a quota. The bytes of a put in progress are reserved,
// so concurrent puts of one namespace cannot overshoot together. The
// evicted extents' space returns when reclamation reaches their segments.

// quotaOf is ns's quota in this tier, 0 for none.
func (t *Tier) quotaOf(ns string) int64 {
	if t.cfg.Quota == nil {
		return 0
	}
	return max(t.cfg.Quota(ns), 0)
}

// nsAddLocked changes ns's byte count under t.mu.
func (t *Tier) nsAddLocked(ns string, n int64) {
	v := t.nsBytes[ns] + n
	if v <= 0 {
		delete(t.nsBytes, ns)
		return
	}
	t.nsBytes[ns] = v
}

// admitQuota makes room in key's namespace for size more bytes and
// reserves them; release (never nil) ends the reservation once the put is
// indexed or has failed.
func (t *Tier) admitQuota(ctx context.Context, key block.Key, size int64, opts *block.PutOptions) (release func(), err error) {
	ns := key.Namespace
	quota := t.quotaOf(ns)
	if t.cfg.Quota != nil && opts.Resolved(ns) {
		// The store resolved the namespace for this put: no second lookup.
		quota = max(opts.Namespace.Quota.NVMe, 0)
	}
	if quota == 0 {
		return func() {}, nil
	}
	if size > quota {
		t.st.quotaRefused.Add(1)
		return nil, fmt.Errorf("%w: %s: block of %d bytes is larger than namespace %q's nvme quota of %d bytes",
			block.ErrQuotaExceeded, key, size, ns, quota)
	}
	for stalls := 0; ; {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t.mu.Lock()
		used := t.nsBytes[ns] + t.nsPending[ns]
		if used+size <= quota {
			t.nsPending[ns] += size
			t.mu.Unlock()
			return func() {
				t.mu.Lock()
				if t.nsPending[ns] -= size; t.nsPending[ns] <= 0 {
					delete(t.nsPending, ns)
				}
				t.mu.Unlock()
			}, nil
		}
		t.mu.Unlock()
		freed, err := t.evictNamespace(ns, used+size-quota)
		if err != nil {
			return nil, err
		}
		if freed == 0 {
			// Nothing evictable now (pinned, or reserved by puts still
			// writing): a second look, then give up.
			if stalls++; stalls > 1 {
				t.st.quotaRefused.Add(1)
				return nil, fmt.Errorf("%w: %s: namespace %q holds %d bytes of its %d-byte nvme quota and none of its blocks can be evicted (pinned, or puts in progress)",
					block.ErrQuotaExceeded, key, ns, used, quota)
			}
		}
	}
}

type nsCandidate struct {
	key block.Key
	e   entry
}

// evictNamespace evicts ns's least valuable unpinned blocks until at least
// need payload bytes are gone, and returns how many went.
func (t *Tier) evictNamespace(ns string, need int64) (int64, error) {
	now := t.now().UnixNano()
	var cands []nsCandidate
	pfx := nsPrefix(ns)
	err := t.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = pfx
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k, ok := parseIndexKey(it.Item().Key())
			if !ok || k.Namespace != ns {
				continue
			}
			var e entry
			if err := it.Item().Value(func(v []byte) error {
				var derr error
				e, derr = decodeEntry(v)
				return derr
			}); err != nil {
				return err
			}
			if e.pinUntil <= now {
				cands = append(cands, nsCandidate{k, e})
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("nvme: quota scan of %s: %w", ns, err)
	}
	// Least valuable first: expired, then never read since written, then
	// the oldest generation.
	rank := func(c nsCandidate) int {
		switch {
		case t.expired(c.e, now):
			return 0
		case c.e.flags&flagAccessed == 0:
			return 1
		}
		return 2
	}
	slices.SortFunc(cands, func(a, b nsCandidate) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		switch {
		case a.e.gen < b.e.gen:
			return -1
		case a.e.gen > b.e.gen:
			return 1
		}
		return 0
	})
	var freed int64
	var last error
	// Serialised with reclamation, which also evicts and hands blocks on.
	t.wmu.Lock()
	defer t.wmu.Unlock()
	for _, c := range cands {
		if freed >= need {
			break
		}
		dropped, err := t.evictExtent(c.key, c.e, now)
		if err != nil {
			last = err
			continue
		}
		if dropped {
			freed += c.e.length
			t.st.quotaEvictions.Add(1)
		}
	}
	if freed == 0 && last != nil {
		return 0, fmt.Errorf("nvme: quota eviction in %s: %w", ns, last)
	}
	return freed, nil
}

// NamespaceBytes returns each namespace's payload bytes in the tier.
func (t *Tier) NamespaceBytes() map[string]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.nsBytes)
}

// Medium is block.TierNVMe (tiers.Counter).
func (t *Tier) Medium() block.Tier { return block.TierNVMe }

// TrimNamespace evicts ns's least valuable unpinned blocks until it holds
// at most limit bytes, evicting at most about budget bytes in this call, so
// that a lowered quota is reached at a bounded rate without a put. It
// returns the bytes it evicted.
func (t *Tier) TrimNamespace(_ context.Context, ns string, limit, budget int64) (int64, error) {
	t.mu.Lock()
	over := t.nsBytes[ns] - limit
	t.mu.Unlock()
	if over <= 0 {
		return 0, nil
	}
	return t.evictNamespace(ns, min(over, budget))
}
