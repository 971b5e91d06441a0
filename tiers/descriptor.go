package tiers

import (
	"context"
	"errors"
	"fmt"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// LowerDescriber is implemented by a lower tier that hands out direct-read
// descriptors (tiers/nvme does: a leased segment extent).
type LowerDescriber interface {
	BlockDescriptor(ctx context.Context, key block.Key) (block.Descriptor, func(), error)
}

// Descriptor leases key where it lives and says where a co-located reader
// finds its bytes: in DRAM, a range of the arena's memory file; otherwise, if
// the lower tier hands out descriptors, an extent of a segment file. Until
// release runs (it is idempotent) the DRAM block is neither evicted nor
// moved and the NVMe segment is not reclaimed (the NVMe tier also ends its
// lease by itself after its LeaseTTL, reported in Expires).
//
// The DRAM bytes are not verified here: the reader verifies what it copies
// against Sum, or checks the block's version word (Generation at
// VersionOffset, see descriptor.CopyVersioned) and, on a mismatch, reads the block with Get, which verifies it
// at rest and drops it when it is corrupt. A descriptor is not a read for
// promotion: an NVMe-resident block stays where it is. A lower tier without
// descriptors answers block.ErrUnavailable (read the block with Get).
func (m *Manager) Descriptor(ctx context.Context, key block.Key) (block.Descriptor, func(), error) {
	m.cfg.DemoteAdmission.Record(key.Hash)
	d, release, err := m.dram.DescriptorUnverified(ctx, key)
	if err == nil {
		return block.Descriptor{
			Tier: block.TierDRAM, Path: d.MemFile, Offset: d.Offset, ReadLength: d.Length,
			DataOffset: d.Offset, Length: d.Length, Sum: d.Sum,
			Generation: d.Version, VersionOffset: d.VersionOffset,
		}, release, nil
	}
	if m.lower == nil || !errors.Is(err, block.ErrNotFound) {
		return block.Descriptor{}, nil, err
	}
	ld, ok := m.lower.(LowerDescriber)
	if !ok {
		if m.lower.Contains(key) {
			return block.Descriptor{}, nil, fmt.Errorf("%w: %s: the lower tier hands out no descriptors; read the block instead", block.ErrUnavailable, key)
		}
		return block.Descriptor{}, nil, err
	}
	bd, release, err := ld.BlockDescriptor(ctx, key)
	if err != nil {
		if errors.Is(err, block.ErrNotFound) {
			m.lowerMisses.Add(1)
		}
		return block.Descriptor{}, nil, err
	}
	m.lowerHits.Add(1)
	return bd, release, nil
}
