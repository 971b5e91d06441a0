package wire

import (
	"bytes"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
)

func TestDescribeRoundTrip(t *testing.T) {
	leases := []Lease{
		{ID: 1, TTL: 30 * time.Second, Desc: block.Descriptor{Tier: block.TierDRAM, Path: "/proc/42/fd/7",
			Offset: 1 << 33, ReadLength: 2 << 20, DataOffset: 1 << 33, Length: 2 << 20, Sum: 0xdeadbeef}},
		{ID: 1 << 60, TTL: 1500 * time.Millisecond, Desc: block.Descriptor{Tier: block.TierNVMe, Path: "/data/segments/0000000000000001.seg",
			Offset: 4096, ReadLength: 4096 + 8192, DataOffset: 8192, Length: 5000, Sum: 1, Generation: 77}},
		{ID: 5, TTL: time.Second, Desc: block.Descriptor{Tier: block.TierDRAM, Path: "/dev/shm/ctxtier",
			Offset: 1 << 21, ReadLength: 2 << 20, DataOffset: 1 << 21, Length: 2 << 20, Sum: 2,
			Generation: 0xfedcba9876543210, VersionOffset: 1<<30 + 4096}},
	}
	var body []byte
	for _, l := range leases {
		body = AppendDescribeItem(AppendStatus(body, errcode.OK, ""), l)
	}
	body = AppendStatus(body, errcode.NotFound, "gone")
	h := Header{Length: uint32(len(body)), Op: OpDescribe, Flags: FlagResponse, Count: uint32(len(leases) + 1)}
	r, err := ReadResponse(bytes.NewReader(body), h, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range leases {
		if got := r.Items[i].Lease; got != l {
			t.Fatalf("item %d: got %+v, want %+v", i, got, l)
		}
	}
	if it := r.Items[len(leases)]; it.Code != errcode.NotFound {
		t.Fatalf("last item %+v", it)
	}
}

// TestDescribeItemLayout pins the bytes: an item without a version word is
// the original 60-byte layout (what an old client reads), one with it sets
// flag bit 0 of byte 57 and carries the offset before the path.
func TestDescribeItemLayout(t *testing.T) {
	d := block.Descriptor{Tier: block.TierDRAM, Path: "/m", Offset: 8192, ReadLength: 100, DataOffset: 8192, Length: 100, Sum: 9}
	plain := AppendDescribeItem(nil, Lease{ID: 3, TTL: time.Second, Desc: d})
	if len(plain) != 62 || len(plain) != DescribeItemLen(d) || plain[57] != 0 || string(plain[60:]) != "/m" ||
		le.Uint64(plain[48:]) != 0 || le.Uint16(plain[58:]) != 2 {
		t.Fatalf("plain item % x", plain)
	}
	d.Generation, d.VersionOffset = 41, 1<<20
	v := AppendDescribeItem(nil, Lease{ID: 3, TTL: time.Second, Desc: d})
	if len(v) != 70 || len(v) != DescribeItemLen(d) || v[57] != DescribeItemVersion || le.Uint64(v[48:]) != 41 ||
		le.Uint64(v[60:]) != 1<<20 || string(v[68:]) != "/m" || !bytes.Equal(v[:48], plain[:48]) || v[56] != plain[56] {
		t.Fatalf("versioned item % x", v)
	}
}

func TestDecodeDescribeFlags(t *testing.T) {
	keys := AppendKey(AppendKey(AppendNamespace(nil, "default"), block.NewKey("default", 1)), block.NewKey("default", 2))
	tests := []struct {
		name  string
		body  []byte
		count uint32
		flags uint32
		err   error
	}{
		{"no flags", keys, 2, 0, nil},
		{"version", AppendDescribeFlags(append([]byte{}, keys...), DescribeFlagVersion), 2, DescribeFlagVersion, nil},
		{"zero flags word", le.AppendUint32(append([]byte{}, keys...), 0), 2, 0, errcode.ErrMalformedFrame},
		{"promote", AppendDescribeFlags(append([]byte{}, keys...), DescribeFlagPromote), 2, DescribeFlagPromote, nil},
		{"version and promote", AppendDescribeFlags(append([]byte{}, keys...), DescribeFlagVersion|DescribeFlagPromote), 2, DescribeFlagVersion | DescribeFlagPromote, nil},
		{"unknown flag", le.AppendUint32(append([]byte{}, keys...), 4), 2, 0, errcode.ErrMalformedFrame},
		{"flags word cut short", append(append([]byte{}, keys...), 1, 0), 2, 0, errcode.ErrMalformedFrame},
		{"count says one key more", AppendDescribeFlags(append([]byte{}, keys...), DescribeFlagVersion), 3, 0, errcode.ErrMalformedFrame},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := Header{Length: uint32(len(tc.body)), Op: OpDescribe, Count: tc.count}
			r, err := DecodeRequest(h, tc.body, testLimits)
			if !errors.Is(err, tc.err) || (err == nil && tc.err != nil) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if err == nil && (r.DescribeFlags != tc.flags || len(r.Keys) != int(tc.count) || r.Keys[1].Hash != 2) {
				t.Fatalf("decoded %+v", r)
			}
		})
	}
	if b := AppendDescribeFlags([]byte{1}, 0); len(b) != 1 {
		t.Fatal("flags 0 must append nothing")
	}
	// The flags word is a DESCRIBE's only: GET keeps its exact length.
	h := Header{Length: uint32(len(keys) + 4), Op: OpGet, Count: 2}
	if _, err := DecodeRequest(h, AppendDescribeFlags(append([]byte{}, keys...), DescribeFlagVersion), testLimits); !errors.Is(err, errcode.ErrMalformedFrame) {
		t.Fatalf("get with a flags word: %v", err)
	}
}

func TestDescribeItemRejects(t *testing.T) {
	good := block.Descriptor{Tier: block.TierNVMe, Path: "/s.seg", Offset: 4096, ReadLength: 8192, DataOffset: 8192, Length: 4096}
	tests := []struct {
		name string
		mod  func(d *block.Descriptor)
		raw  func(b []byte) // applied to the encoded item (after the status)
	}{
		{name: "unknown tier", mod: func(d *block.Descriptor) { d.Tier = block.TierS3 }},
		{name: "empty path", mod: func(d *block.Descriptor) { d.Path = "" }},
		{name: "payload past range", mod: func(d *block.Descriptor) { d.Length = 4097 }},
		{name: "payload before range", mod: func(d *block.Descriptor) { d.DataOffset = 0 }},
		{name: "dram range wider than payload", mod: func(d *block.Descriptor) { d.Tier = block.TierDRAM }},
		{name: "offset above int64", raw: func(b []byte) { b[StatusSize+16+7] = 0x80 }},
		{name: "unknown item flag", raw: func(b []byte) { b[StatusSize+57] = 2 }},
		{name: "version flag without its offset", raw: func(b []byte) { b[StatusSize+57] = DescribeItemVersion }},
		{name: "version word on nvme", mod: func(d *block.Descriptor) { d.VersionOffset = 1 << 20 }},
		{name: "path longer than body", raw: func(b []byte) { b[StatusSize+58] = 200 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := good
			if tc.mod != nil {
				tc.mod(&d)
			}
			b := AppendDescribeItem(AppendStatus(nil, errcode.OK, ""), Lease{ID: 1, Desc: d})
			if tc.raw != nil {
				tc.raw(b)
			}
			h := Header{Length: uint32(len(b)), Op: OpDescribe, Flags: FlagResponse, Count: 1}
			if _, err := ReadResponse(bytes.NewReader(b), h, nil); !errors.Is(err, errcode.ErrMalformedFrame) {
				t.Fatalf("got %v, want MalformedFrame", err)
			}
		})
	}
	if err := CheckDescriptor(good); err != nil {
		t.Fatalf("good descriptor refused: %v", err)
	}

	dram := block.Descriptor{Tier: block.TierDRAM, Path: "/m", Offset: 8192, ReadLength: 4096, DataOffset: 8192, Length: 4096,
		Generation: 3, VersionOffset: 1 << 20}
	for _, tc := range []struct {
		name string
		vo   int64
		ok   bool
	}{
		{"after the arena", 1 << 20, true},
		{"just before the payload", 8184, true},
		{"just after the payload", 12288, true},
		{"negative", -8, false},
		{"misaligned", 1<<20 + 4, false},
		{"at the payload", 8192, false},
		{"inside the payload", 12280, false},
		{"straddling the payload's start", 8188, false},
		{"past int64", math.MaxInt64 - 7, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := dram
			d.VersionOffset = tc.vo
			if err := CheckDescriptor(d); (err == nil) != tc.ok {
				t.Fatalf("CheckDescriptor: %v, want ok=%v", err, tc.ok)
			}
			if !tc.ok {
				return
			}
			b := AppendDescribeItem(AppendStatus(nil, errcode.OK, ""), Lease{ID: 1, Desc: d})
			h := Header{Length: uint32(len(b)), Op: OpDescribe, Flags: FlagResponse, Count: 1}
			r, err := ReadResponse(bytes.NewReader(b), h, nil)
			if err != nil || r.Items[0].Lease.Desc != d {
				t.Fatalf("round trip: %v %+v", err, r)
			}
		})
	}
}

func TestDecodeRelease(t *testing.T) {
	ids := []uint64{3, 1 << 63, 0}
	body := AppendLeaseIDs(nil, ids)
	h := Header{Length: uint32(len(body)), Op: OpRelease, Count: 3}
	r, err := DecodeRequest(h, body, testLimits)
	if err != nil || len(r.LeaseIDs) != 3 || r.LeaseIDs[1] != 1<<63 || r.Namespace != "" {
		t.Fatalf("%+v %v", r, err)
	}
	h.Count = 2
	if _, err := DecodeRequest(h, body, testLimits); !errors.Is(err, errcode.ErrMalformedFrame) {
		t.Fatalf("count mismatch: %v", err)
	}
	h.Count = testLimits.MaxBatch + 1
	if _, err := DecodeRequest(h, body, testLimits); !errors.Is(err, block.ErrTooLarge) {
		t.Fatalf("over max batch: %v", err)
	}
}
