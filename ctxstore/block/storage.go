package block

import (
	"context"
	"time"
)

// Storage is a store of immutable blocks: what ctxstore.Store needs from a
// node's tier stack (ctxstore.Tier: the DRAM tier alone on a bare node, the
// tier manager, or the cluster backend) and what the tier manager needs from
// a tier below DRAM (tiers.Lower: NVMe, S3, a chain of them). Both names are
// aliases of this one interface. Implementations must be safe for
// concurrent use.
type Storage interface {
	// Put stores data under key. data has already been verified against sum.
	// A key that exists with the same bytes succeeds; with other bytes it is
	// ErrConflict and nothing changes.
	Put(ctx context.Context, key Key, data []byte, sum uint32, opts PutOptions) error
	// Get returns a leased reference to the verified bytes (unless
	// opts.ReaderVerifies leaves the check to the reader).
	Get(ctx context.Context, key Key, opts GetOptions) (*Ref, error)
	// Stat returns metadata without touching recency.
	Stat(ctx context.Context, key Key) (Info, error)
	// Contains reports presence without touching recency or verifying bytes.
	Contains(key Key) bool
	// Delete removes key (evicts it); ErrNotFound if absent.
	Delete(ctx context.Context, key Key) error
	// Pin protects key from eviction until the given time (extending, never shortening).
	Pin(ctx context.Context, key Key, until time.Time) error
	// List returns up to limit blocks of namespace ns whose object names
	// start with prefix and sort after `after`, in object-name order.
	List(ctx context.Context, ns, prefix, after string, limit int) ([]Info, error)
}
