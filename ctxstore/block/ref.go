package block

import (
	"sync/atomic"
	"time"
)

// Tier names where a block was found.
type Tier string

// Tier names.
const (
	TierDRAM Tier = "dram"
	TierNVMe Tier = "nvme"
	TierS3   Tier = "s3"
)

// Ref is a leased, read-only view of a block's verified bytes. While a Ref is
// held the block cannot be evicted and its bytes do not move, so a server can
// write them to a socket straight from the tier's memory. Release ends the
// lease; it is safe to call more than once. Data must not be used after
// Release, nor modified ever.
type Ref struct {
	Data []byte
	Sum  uint32
	Tier Tier

	release func()
	done    atomic.Bool
}

// NewRef wraps data (already verified against sum) with the function that
// ends its lease. release may be nil.
func NewRef(data []byte, sum uint32, tier Tier, release func()) *Ref {
	return &Ref{Data: data, Sum: sum, Tier: tier, release: release}
}

// Release ends the lease. Only the first call has an effect.
func (r *Ref) Release() {
	if r == nil || !r.done.CompareAndSwap(false, true) {
		return
	}
	if r.release != nil {
		r.release()
	}
}

// Info is a block's metadata, without its bytes.
type Info struct {
	Key         Key
	Size        int64
	Sum         uint32
	Tier        Tier
	Priority    uint8
	Created     time.Time
	LastAccess  time.Time
	PinnedUntil time.Time // zero when not pinned
}

// PutOptions carry a put's optional hints.
type PutOptions struct {
	// Sum, when HasSum, is the checksum the sender computed; the bytes are
	// verified against it before anything is stored.
	Sum    uint32
	HasSum bool
	// Priority overrides the namespace's eviction class when HasPriority.
	Priority    uint8
	HasPriority bool
	// PinTTL pins the block for this long (agent cache_control), 0 for none.
	PinTTL time.Duration
	// Parent is the sequence hash of the previous block in the chain, when
	// known (HasParent); policies use it to keep chain heads.
	Parent    uint64
	HasParent bool
	// WriteThrough writes the block to the tier below DRAM before the put is
	// acknowledged (resolved by the store from the namespace's write mode).
	WriteThrough bool
	// Expires is when the block lapses (the namespace's TTL, resolved by the
	// store); zero for never.
	Expires time.Time
}
