package wire

import (
	"fmt"
	"math"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
)

// DESCRIBE and RELEASE: direct-read descriptor leases for co-located clients.
//
// A DESCRIBE request is a key list (as GET), optionally followed by a u32 of
// describe flags (DescribeFlagVersion, DescribeFlagPromote). Each OK status in its response is
// followed by a descriptor item: DescribeItemSize fixed bytes, the u64
// version offset when the item's flags byte says so (DescribeItemVersion),
// then the path. A server that predates the flags answers a request that
// carries them MalformedFrame as a whole (its body is longer than its keys)
// and keeps the connection: the client then describes without them. A
// server only sets DescribeItemVersion for a client that asked, so an old
// client never meets the longer item. A RELEASE request carries no
// namespace: its body is count u64 lease ids; the response is one status
// per id (NotFound for a lease that is not held: already released or
// expired).
const (
	// DescribeItemSize is the fixed part of a DESCRIBE item, before its
	// version offset (if any) and path.
	DescribeItemSize = 60
	// DescribeFlagsSize is the size of a DESCRIBE request's optional flags.
	DescribeFlagsSize = 4
	// DescribeFlagVersion asks for DRAM version words: the client checks a
	// DRAM copy by its version word (block.Descriptor.VersionOffset) rather
	// than by checksum, and reads the longer item.
	DescribeFlagVersion uint32 = 1 << 0
	// DescribeFlagPromote asks the server to read a block that is below
	// DRAM into DRAM first (its tiers' read, promotion and single flight,
	// as a GET of it would) and to describe the DRAM copy; a block the
	// promotion does not take is described where it is.
	DescribeFlagPromote uint32 = 1 << 1
	describeFlagsKnown         = DescribeFlagVersion | DescribeFlagPromote
	// DescribeItemVersion (the item's flags byte) marks a DRAM item whose
	// generation is the block's version and which carries a u64 version
	// offset after the fixed part.
	DescribeItemVersion uint8 = 1 << 0
	// DescribeVersionSize is the size of an item's version offset.
	DescribeVersionSize = 8
	// MaxPathLen bounds a descriptor's path (Linux PATH_MAX).
	MaxPathLen = 4096
	// LeaseIDSize is the size of one RELEASE item.
	LeaseIDSize = 8
)

// Lease is one leased descriptor as it travels in a DESCRIBE response.
type Lease struct {
	// ID names the lease in RELEASE; it is only meaningful on the connection
	// that described it.
	ID uint64
	// TTL is how long the lease lasted when the server answered; it ends
	// then even if never released.
	TTL  time.Duration
	Desc block.Descriptor
}

// AppendDescribeFlags appends a DESCRIBE request's flags after its keys;
// with flags 0 it appends nothing (the original request).
func AppendDescribeFlags(b []byte, flags uint32) []byte {
	if flags == 0 {
		return b
	}
	return le.AppendUint32(b, flags)
}

// decodeDescribe decodes a DESCRIBE request's keys and optional flags (an
// absent flags word is 0; a present one must be non-zero and known).
func (req *Request) decodeDescribe(b []byte) error {
	keys := uint64(req.Count) * KeySize
	if uint64(len(b)) == keys+DescribeFlagsSize {
		f := le.Uint32(b[keys:])
		if f == 0 || f&^describeFlagsKnown != 0 {
			return fmt.Errorf("%w: describe flags %#x", errcode.ErrMalformedFrame, f)
		}
		req.DescribeFlags = f
		b = b[:keys]
	}
	return req.decodeKeys(b)
}

// AppendDescribeItem appends what follows an OK status in a DESCRIBE
// response: lease id, TTL (ms, rounded down), then the descriptor. A
// descriptor with a VersionOffset gets the longer, versioned item: send it
// only to a client that asked (DescribeFlagVersion), and clear
// VersionOffset (and Generation) for the others.
func AppendDescribeItem(b []byte, l Lease) []byte {
	d := l.Desc
	b = le.AppendUint64(b, l.ID)
	b = le.AppendUint32(b, PinTTLMillis(l.TTL.Milliseconds()))
	b = le.AppendUint32(b, d.Sum)
	b = le.AppendUint64(b, uint64(d.Offset))
	b = le.AppendUint64(b, uint64(d.ReadLength))
	b = le.AppendUint64(b, uint64(d.DataOffset))
	b = le.AppendUint64(b, uint64(d.Length))
	b = le.AppendUint64(b, d.Generation)
	var flags uint8
	if d.VersionOffset != 0 {
		flags |= DescribeItemVersion
	}
	b = append(b, TierByte(d.Tier), flags)
	b = le.AppendUint16(b, uint16(len(d.Path)))
	if flags&DescribeItemVersion != 0 {
		b = le.AppendUint64(b, uint64(d.VersionOffset))
	}
	return append(b, d.Path...)
}

// DescribeItemLen is the encoded size of AppendDescribeItem for d.
func DescribeItemLen(d block.Descriptor) int {
	n := DescribeItemSize + len(d.Path)
	if d.VersionOffset != 0 {
		n += DescribeVersionSize
	}
	return n
}

// CheckDescriptor checks a descriptor's shape: a DRAM or NVMe tier, a path
// of 1..MaxPathLen bytes, non-negative offsets, a payload inside the range
// to read (for DRAM exactly that range), and a version word only for DRAM,
// 8-byte aligned and outside the payload. Servers check before encoding,
// clients after decoding.
func CheckDescriptor(d block.Descriptor) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: descriptor: %s", errcode.ErrMalformedFrame, fmt.Sprintf(format, a...))
	}
	switch {
	case d.Tier != block.TierDRAM && d.Tier != block.TierNVMe:
		return bad("tier %q", d.Tier)
	case len(d.Path) == 0 || len(d.Path) > MaxPathLen:
		return bad("path of %d bytes", len(d.Path))
	case d.Offset < 0 || d.ReadLength < 0 || d.DataOffset < 0 || d.Length < 0:
		return bad("negative offset or length")
	case d.ReadLength > math.MaxInt64-d.Offset:
		return bad("range overflows")
	case d.DataOffset < d.Offset || d.Length > d.ReadLength || d.DataOffset-d.Offset > d.ReadLength-d.Length:
		return bad("payload [%d,+%d) outside the range [%d,+%d)", d.DataOffset, d.Length, d.Offset, d.ReadLength)
	case d.Tier == block.TierDRAM && (d.DataOffset != d.Offset || d.ReadLength != d.Length):
		return bad("a dram range must be exactly the payload")
	case d.VersionOffset == 0:
	case d.Tier != block.TierDRAM:
		return bad("a version word on a %s descriptor", d.Tier)
	case d.VersionOffset < 0 || d.VersionOffset > math.MaxInt64-DescribeVersionSize || d.VersionOffset%DescribeVersionSize != 0:
		return bad("version word at %d", d.VersionOffset)
	case d.VersionOffset+DescribeVersionSize > d.Offset && d.VersionOffset < d.Offset+d.ReadLength:
		return bad("version word at %d inside the range [%d,+%d)", d.VersionOffset, d.Offset, d.ReadLength)
	}
	return nil
}

func (b *bodyReader) describeItem(i int, it *ItemResult) error {
	var p [DescribeItemSize]byte
	if err := b.read(p[:]); err != nil {
		return err
	}
	i64 := func(off int) (int64, bool) {
		v := le.Uint64(p[off:])
		return int64(v), v <= math.MaxInt64
	}
	l := &it.Lease
	l.ID = le.Uint64(p[0:])
	l.TTL = time.Duration(le.Uint32(p[8:])) * time.Millisecond
	d := &l.Desc
	d.Sum = le.Uint32(p[12:])
	var ok [4]bool
	d.Offset, ok[0] = i64(16)
	d.ReadLength, ok[1] = i64(24)
	d.DataOffset, ok[2] = i64(32)
	d.Length, ok[3] = i64(40)
	d.Generation = le.Uint64(p[48:])
	d.Tier = TierName(p[56])
	flags := p[57]
	if ok != [4]bool{true, true, true, true} || flags&^DescribeItemVersion != 0 {
		return fmt.Errorf("%w: item %d: descriptor offset out of range or unknown flags %#x", errcode.ErrMalformedFrame, i, flags)
	}
	n := le.Uint16(p[58:])
	if flags&DescribeItemVersion != 0 {
		var v [DescribeVersionSize]byte
		if err := b.read(v[:]); err != nil {
			return err
		}
		vo := le.Uint64(v[:])
		if vo == 0 || vo > math.MaxInt64 {
			return fmt.Errorf("%w: item %d: version word at %d", errcode.ErrMalformedFrame, i, vo)
		}
		d.VersionOffset = int64(vo)
	}
	if n > MaxPathLen || uint32(n) > b.left {
		return fmt.Errorf("%w: item %d: descriptor path of %d bytes", errcode.ErrMalformedFrame, i, n)
	}
	path := make([]byte, n)
	if err := b.read(path); err != nil {
		return err
	}
	d.Path = string(path)
	if err := CheckDescriptor(*d); err != nil {
		return fmt.Errorf("item %d: %w", i, err)
	}
	return nil
}

// AppendLeaseIDs appends a RELEASE body (no namespace: lease ids only).
func AppendLeaseIDs(b []byte, ids []uint64) []byte {
	for _, id := range ids {
		b = le.AppendUint64(b, id)
	}
	return b
}

func (req *Request) decodeRelease(b []byte) error {
	if uint64(len(b)) != uint64(req.Count)*LeaseIDSize {
		return fmt.Errorf("%w: %d release bytes for %d lease ids of %d bytes", errcode.ErrMalformedFrame, len(b), req.Count, LeaseIDSize)
	}
	req.LeaseIDs = make([]uint64, req.Count)
	for i := range req.LeaseIDs {
		req.LeaseIDs[i] = le.Uint64(b[i*LeaseIDSize:])
	}
	return nil
}
