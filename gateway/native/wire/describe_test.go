package wire

import (
	"bytes"
	"errors"
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
	}
	var body []byte
	for _, l := range leases {
		body = AppendDescribeItem(AppendStatus(body, errcode.OK, ""), l)
	}
	body = AppendStatus(body, errcode.NotFound, "gone")
	h := Header{Length: uint32(len(body)), Op: OpDescribe, Flags: FlagResponse, Count: 3}
	r, err := ReadResponse(bytes.NewReader(body), h, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range leases {
		if got := r.Items[i].Lease; got != l {
			t.Fatalf("item %d: got %+v, want %+v", i, got, l)
		}
	}
	if r.Items[2].Code != errcode.NotFound {
		t.Fatalf("item 2 %+v", r.Items[2])
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
		{name: "reserved byte", raw: func(b []byte) { b[StatusSize+57] = 1 }},
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
