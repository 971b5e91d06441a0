package nvme

import (
	"context"
	"fmt"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Descriptor locates an NVMe-resident block for a co-located reader, which
// reads it itself (an O_DIRECT pread, or a GPUDirect-Storage DMA) instead of
// receiving the bytes over a socket.
//
// The extent [Offset, Offset+ExtentLength) is 4 KiB-aligned and starts with
// the header page; the payload is [DataOffset, DataOffset+Length), also
// starting on a 4 KiB boundary. The reader must verify the payload's CRC-32C
// against Sum (descriptor.ReadExtent, given d.Block(), does) before using it.
type Descriptor struct {
	Path         string // segment file
	Offset       int64  // extent start (4 KiB aligned)
	ExtentLength int64  // aligned bytes covering header page and payload
	DataOffset   int64  // payload start in the file (4 KiB aligned)
	Length       int64  // payload bytes
	Sum          uint32 // CRC-32C of the payload
	Generation   uint64
	Expires      time.Time // the lease ends here even if never released
}

// Descriptor leases key's extent: until release is called (or LeaseTTL
// passes) its segment file is not reclaimed, so the file at Path keeps those
// bytes. Segments are never rewritten in place, so even a reader that
// outlives its lease reads either the right bytes or a missing file, never
// another block's bytes. A block whose segment is being reclaimed right now
// returns block.ErrUnavailable: read it with Get instead. release is
// idempotent.
func (t *Tier) Descriptor(_ context.Context, key block.Key) (Descriptor, func(), error) {
	if err := t.enter(); err != nil {
		return Descriptor{}, nil, err
	}
	defer t.leave()
	now := t.now()
	e, ok, err := t.live(key, now.UnixNano())
	if err != nil {
		return Descriptor{}, nil, err
	}
	if !ok {
		t.st.misses.Add(1)
		return Descriptor{}, nil, fmt.Errorf("%w: %s", block.ErrNotFound, key)
	}
	until := now.Add(t.cfg.LeaseTTL)
	t.mu.Lock()
	s := t.segs[e.seg]
	if s == nil || s.removed || s.cleaning {
		t.mu.Unlock()
		return Descriptor{}, nil, fmt.Errorf("%w: %s: its segment is being reclaimed; read the bytes instead", block.ErrUnavailable, key)
	}
	t.leaseSeq++
	id := t.leaseSeq
	if s.leases == nil {
		s.leases = make(map[uint64]int64)
	}
	s.leases[id] = until.UnixNano()
	t.mu.Unlock()
	t.st.leases.Add(1)
	t.st.hits.Add(1)
	t.touch(key, e, now.UnixNano())
	release := func() {
		t.mu.Lock()
		delete(s.leases, id)
		t.mu.Unlock()
	}
	return Descriptor{
		Path: s.path, Offset: e.off, ExtentLength: e.extent(), DataOffset: e.off + HeaderSize,
		Length: e.length, Sum: e.sum, Generation: e.gen, Expires: until,
	}, release, nil
}

// Block converts d to the tier-neutral form that travels on the wire.
func (d Descriptor) Block() block.Descriptor {
	return block.Descriptor{
		Tier: block.TierNVMe, Path: d.Path, Offset: d.Offset, ReadLength: d.ExtentLength,
		DataOffset: d.DataOffset, Length: d.Length, Sum: d.Sum, Generation: d.Generation, Expires: d.Expires,
	}
}

// BlockDescriptor is Descriptor in the tier-neutral form (the tier manager's
// lower-tier descriptor hook).
func (t *Tier) BlockDescriptor(ctx context.Context, key block.Key) (block.Descriptor, func(), error) {
	d, release, err := t.Descriptor(ctx, key)
	if err != nil {
		return block.Descriptor{}, nil, err
	}
	return d.Block(), release, nil
}
