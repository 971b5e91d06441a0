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
// A DESCRIBE request is a key list (as GET). Each OK status in its response
// is followed by a descriptor item: DescribeItemSize fixed bytes, then the
// path. A RELEASE request carries no namespace: its body is count u64 lease
// ids; the response is one status per id (NotFound for a lease that is not
// held: already released or expired).
const (
	// DescribeItemSize is the fixed part of a DESCRIBE item, before its path.
	DescribeItemSize = 60
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

// AppendDescribeItem appends what follows an OK status in a DESCRIBE
// response: lease id, TTL (ms, rounded down), then the descriptor.
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
	b = append(b, TierByte(d.Tier), 0)
	b = le.AppendUint16(b, uint16(len(d.Path)))
	return append(b, d.Path...)
}

// DescribeItemLen is the encoded size of AppendDescribeItem for a path of n bytes.
func DescribeItemLen(pathLen int) int { return DescribeItemSize + pathLen }

// CheckDescriptor checks a descriptor's shape: a DRAM or NVMe tier, a path
// of 1..MaxPathLen bytes, non-negative offsets, and a payload inside the
// range to read (for DRAM exactly that range). Servers check before
// encoding, clients after decoding.
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
	if ok != [4]bool{true, true, true, true} || p[57] != 0 {
		return fmt.Errorf("%w: item %d: descriptor offset out of range or reserved byte set", errcode.ErrMalformedFrame, i)
	}
	n := le.Uint16(p[58:])
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
