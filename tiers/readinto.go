package tiers

import (
	"context"
	"errors"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/tiers/dram"
)

// IntoReader is a lower tier that can read a block's verified payload
// straight into caller memory (nvme.Tier.ReadInto; a Chain through its first
// tier). The manager promotes through it into the DRAM tier's own pages, so
// a promoted read costs no staging buffer, no copy and no second hash.
// dst holds at least length rounded up to 4 KiB and starts on a 4 KiB
// boundary; the result is the block's CRC-32C and the xxh3-64 of the bytes
// as they lie in dst[:length], checked against what the tier recorded.
type IntoReader interface {
	ReadInto(ctx context.Context, key block.Key, length int64, dst []byte) (sum uint32, fp uint64, err error)
}

// errNoDirect is a Chain's answer when its first tier cannot read into
// caller memory: the manager reads and promotes the usual way.
var errNoDirect = errors.New("tiers: no direct read from this tier")

// ReadInto reads from the chain's first tier when it is an IntoReader.
// Anything else, including a block that only a colder tier holds, is an
// error the manager answers by reading the chain with Get.
func (c *Chain) ReadInto(ctx context.Context, key block.Key, length int64, dst []byte) (uint32, uint64, error) {
	r, ok := c.Tiers[0].(IntoReader)
	if !ok {
		return 0, 0, errNoDirect
	}
	return r.ReadInto(ctx, key, length, dst)
}

// promoteInto promotes key from the lower tier by reading it straight into
// a new DRAM copy, and returns a lease on that copy. done is false when it
// did not serve the read, and the caller reads the lower tier with Get as
// before: the lower tier cannot read into memory, the block's size is not
// known, DRAM has no room for it (noRoom: the caller then serves the block
// from below without trying a copying promotion, which would fail the same
// way after another eviction scan), or the direct read failed for any
// reason (a block that failed verification is dropped by the lower tier,
// whose Get then reports it missing). The caller has already recorded and
// admitted the promotion.
func (m *Manager) promoteInto(ctx context.Context, key block.Key, info block.Info, opts block.GetOptions) (ref *block.Ref, done, noRoom bool) {
	// The direct read is the NVMe tier's. A chain's Stat names the tier of
	// the hottest copy, so a block only a colder tier (S3) holds goes the
	// usual way without reserving DRAM for a read that would miss.
	r, ok := m.lower.(IntoReader)
	if !ok || info.Size <= 0 || info.Tier != block.TierNVMe {
		return nil, false, false
	}
	popts := block.PutOptions{Namespace: opts.Namespace, Priority: info.Priority, HasPriority: true}
	ref, err := m.dram.Fill(ctx, key, info.Size, popts, opts.Retain, func(slot []byte) (uint32, uint64, error) {
		return r.ReadInto(ctx, key, info.Size, slot)
	})
	switch {
	case err == nil:
		m.lowerHits.Add(1)
		m.promotions.Add(1)
		m.directPromotions.Add(1)
		return ref, true, false
	case errors.Is(err, dram.ErrResident):
		// A concurrent put or promotion got there first.
		if ref, err := m.dram.Get(ctx, key, opts); err == nil {
			m.lowerHits.Add(1)
			return ref, true, false
		}
	case errors.Is(err, block.ErrNoSpace), errors.Is(err, block.ErrQuotaExceeded):
		return nil, false, true
	case errors.Is(err, errNoDirect):
	default:
		m.log.Debug("direct promotion failed; reading the lower tier", "key", key.String(), "err", err)
	}
	return nil, false, false
}
