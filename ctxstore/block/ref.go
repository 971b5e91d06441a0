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
	// lessor and lease, when lessor is set, end the lease instead of
	// release, and are told of a send from the file instead of onSend
	// (NewLeasedRef): a tier hands out a Ref without allocating closures.
	lessor Lessor
	lease  uint64
	done   atomic.Bool

	// fd and off say where Data also lies in a file (hasFile); onSend is
	// called when a caller hands that file range to the kernel.
	fd      int
	off     int64
	hasFile bool
	onSend  func()
}

// SetFile records that r's bytes also lie in the open file fd at offset
// off, which stays open and unchanged while r is held, so a server may send
// them with sendfile(2) instead of writing Data. onSend (may be nil) is
// called by FileRange: the tier learns that the kernel may keep references
// to the file's pages after Release (see FileRange). Tiers call it before
// handing r out.
func (r *Ref) SetFile(fd int, off int64, onSend func()) {
	r.fd, r.off, r.hasFile, r.onSend = fd, off, true, onSend
}

// FileRange returns the file and offset r's bytes lie at, if SetFile was
// called. A caller that gets ok must assume it will send from the file:
// the kernel's sendfile queues references to the file's pages, not copies,
// and those can outlive the call and r's lease (a slow receiver on
// loopback keeps them in its receive queue), so the tier is told (onSend)
// to make sure it never rewrites those pages in place once they are free.
func (r *Ref) FileRange() (fd int, off int64, ok bool) {
	if r == nil || !r.hasFile {
		return 0, 0, false
	}
	if r.lessor != nil {
		r.lessor.LeaseSent(r.lease)
	} else if r.onSend != nil {
		r.onSend()
	}
	return r.fd, r.off, true
}

// Lessor is a tier that leases its blocks' bytes by a handle of its own
// (NewLeasedRef): EndLease ends lease h (once per Ref), LeaseSent says the
// bytes of lease h were handed to the kernel from the file (see FileRange).
type Lessor interface {
	EndLease(h uint64)
	LeaseSent(h uint64)
}

// NewLeasedRef is NewRef whose lease is lease h of l, and whose bytes also
// lie in the open file fd at offset off (SetFile, with l.LeaseSent as its
// onSend): one allocation, where NewRef and SetFile with closures take
// three on every read.
func NewLeasedRef(data []byte, sum uint32, tier Tier, l Lessor, h uint64, fd int, off int64) *Ref {
	return &Ref{Data: data, Sum: sum, Tier: tier, lessor: l, lease: h, fd: fd, off: off, hasFile: true}
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
	if r.lessor != nil {
		r.lessor.EndLease(r.lease)
	} else if r.release != nil {
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
	// Reuse and Retain are the agent hints (hints.go): whether the block
	// will be read again, and for how long after its put or last read the
	// harness expects to come back for it (a soft pin: the block is kept
	// ahead of unhinted ones while the window lasts, but unlike PinTTL it
	// is evicted when nothing else is left). Zero values are no hint.
	Reuse  Reuse
	Retain time.Duration
	// Session is the agent session that put the block (0: none): when
	// the harness ends the session (SessionReleaser), its blocks lose
	// their retain windows and are evicted first, except shared ones.
	Session uint64
	// Namespace is key's namespace as the store resolved it for this put
	// (Resolved), so no layer below looks it up again in the same request:
	// the cluster takes the erasure code from it, a tier the namespace's
	// quota. The zero value means a layer that needs it looks it up.
	Namespace Namespace
}

// Resolved reports whether o.Namespace is the namespace named name, so a
// layer may use it instead of looking name up.
func (o *PutOptions) Resolved(name string) bool {
	return name != "" && o.Namespace.Name == name
}
