package wire

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
)

var testLimits = Limits{MaxFrameSize: 1<<20 + FrameOverhead, MaxBlockSize: 1 << 20, MaxBatch: 64, MaxInFlight: 8, MaxResponseSize: 4 << 20}

func TestHeaderRoundTrip(t *testing.T) {
	h := Header{Length: 123, Op: OpGet, Flags: FlagResponse, Code: errcode.NotFound, ID: 1<<63 + 5, Count: 7}
	b := AppendHeader(nil, h)
	if len(b) != HeaderSize {
		t.Fatalf("header is %d bytes", len(b))
	}
	got, err := DecodeHeader(b, 1<<20)
	if err != nil || got != h {
		t.Fatalf("got %+v, %v", got, err)
	}
	var p [HeaderSize]byte
	PutHeader(p[:], h)
	if !bytes.Equal(p[:], b) {
		t.Fatal("PutHeader and AppendHeader differ")
	}
}

func TestHelloRoundTrip(t *testing.T) {
	for _, flags := range []uint16{0, HelloVerifiesGets} {
		b := AppendHello(nil, Version, flags)
		h, err := DecodeHello(b)
		if len(b) != HelloSize || err != nil || h != (Hello{Version: Version, Flags: flags}) {
			t.Fatalf("hello %d bytes, %+v, %v", len(b), h, err)
		}
		r := HelloReply{Version: Version, Code: errcode.VersionMismatch, Limits: testLimits, Flags: flags}
		rb := AppendHelloReply(nil, r)
		got, err := DecodeHelloReply(rb)
		if len(rb) != HelloReplySize || err != nil || got != r {
			t.Fatalf("reply %d bytes, %+v, %v", len(rb), got, err)
		}
	}
}

// The hello's flags: known bits decode, unknown bits and reserved bytes are
// MalformedFrame (what a server older than a flag answers, closing the
// connection); a reply from a server older than hello flags carries zeros
// where the echo goes, so it reads as "no flag honoured".
func TestHelloFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"none", AppendHello(nil, Version, 0), nil},
		{"verifies gets", AppendHello(nil, Version, HelloVerifiesGets), nil},
		{"verifies gets, version 1", AppendHello(nil, Version1, HelloVerifiesGets), nil},
		{"put hints", AppendHello(nil, Version, HelloVerifiesGets|HelloPutHints), nil},
		{"agent sessions", AppendHello(nil, Version, HelloVerifiesGets|HelloPutHints|HelloAgentSessions), nil},
		{"unknown bit", AppendHello(nil, Version, 1<<3), errcode.ErrMalformedFrame},
		{"high bit", AppendHello(nil, Version, HelloVerifiesGets|1<<15), errcode.ErrMalformedFrame},
		{"reserved", func() []byte { b := AppendHello(nil, Version, HelloVerifiesGets); b[15] = 1; return b }(), errcode.ErrMalformedFrame},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeHello(tc.b)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	old := AppendHelloReply(nil, HelloReply{Version: Version, Limits: testLimits})
	if r, err := DecodeHelloReply(old); err != nil || r.Flags != 0 || [4]byte(old[28:]) != [4]byte{} {
		t.Fatalf("reply without flags: %+v %v, tail %x", r, err, old[28:])
	}
}

func TestDecodeHeaderErrors(t *testing.T) {
	ok := AppendHeader(nil, Header{Length: 10, Op: OpPing})
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"short", ok[:10], errcode.ErrMalformedFrame},
		{"flags", func() []byte { b := bytes.Clone(ok); b[5] = 64; return b }(), errcode.ErrMalformedFrame},
		{"reserved", func() []byte { b := bytes.Clone(ok); b[23] = 1; return b }(), errcode.ErrMalformedFrame},
		{"too large", AppendHeader(nil, Header{Length: 1 << 20}), block.ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeHeader(tc.b, 1<<20); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestDecodeRequest(t *testing.T) {
	k := block.NewKey("ns", 99).WithPart(2)
	data := []byte("payload")
	put := AppendNamespace(nil, "ns")
	put = AppendPutItem(put, k, block.Checksum(data), uint32(len(data)), block.PutOptions{Priority: 3, HasPriority: true, PinTTL: 1500 * time.Millisecond, Parent: 8, HasParent: true})
	put = append(put, data...)
	keys := AppendKey(AppendKey(AppendNamespace(nil, "ns"), k), block.NewKey("ns", 1))
	pin := append(AppendNamespace(nil, "ns"), 0xe8, 3, 0, 0, 0, 0, 0, 0) // 1000 ms
	pin = AppendKey(pin, k)
	tests := []struct {
		name  string
		op    Op
		count uint32
		body  []byte
		want  error
		check func(*testing.T, *Request)
	}{
		{"put", OpPut, 1, put, nil, func(t *testing.T, r *Request) {
			it := r.Items[0]
			if it.Err != nil || it.Key != k || !bytes.Equal(it.Data, data) || it.Opts.Priority != 3 || it.Opts.PinTTL != 1500*time.Millisecond || it.Opts.Parent != 8 || !it.Opts.HasSum {
				t.Fatalf("item %+v", it)
			}
		}},
		{"get", OpGet, 2, keys, nil, func(t *testing.T, r *Request) {
			if r.Namespace != "ns" || len(r.Keys) != 2 || r.Keys[0] != k || r.KeyErrs != nil {
				t.Fatalf("%+v", r)
			}
		}},
		{"pin", OpPin, 1, pin, nil, func(t *testing.T, r *Request) {
			if r.PinTTL != time.Second || r.Keys[0] != k {
				t.Fatalf("%+v", r)
			}
		}},
		{"ping", OpPing, 0, nil, nil, nil},
		{"ping with body", OpPing, 0, []byte{1}, errcode.ErrMalformedFrame, nil},
		{"unknown op", Op(42), 0, nil, errcode.ErrMalformedFrame, nil},
		{"no namespace", OpGet, 0, nil, errcode.ErrMalformedFrame, nil},
		{"namespace past end", OpGet, 0, []byte{9, 'a'}, errcode.ErrMalformedFrame, nil},
		{"keys short", OpGet, 3, keys, errcode.ErrMalformedFrame, nil},
		{"put truncated data", OpPut, 1, put[:len(put)-1], errcode.ErrMalformedFrame, nil},
		{"put trailing", OpPut, 1, append(bytes.Clone(put), 0), errcode.ErrMalformedFrame, nil},
		{"batch too big", OpGet, 65, keys, block.ErrTooLarge, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := Header{Length: uint32(len(tc.body)), Op: tc.op, Count: tc.count}
			r, err := DecodeRequest(h, tc.body, testLimits)
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if tc.check != nil && err == nil {
				tc.check(t, r)
			}
		})
	}
}

func TestReadResponse(t *testing.T) {
	data := []byte("block bytes")
	body := AppendStatus(nil, errcode.OK, "ignored")
	body = AppendGetMeta(body, block.Checksum(data), uint32(len(data)), block.TierNVMe)
	body = append(body, data...)
	body = AppendStatus(body, errcode.NotFound, "no such block")
	h := Header{Length: uint32(len(body)), Op: OpGet, Flags: FlagResponse, Count: 2}
	r, err := ReadResponse(bytes.NewReader(body), h, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := r.Items[0], r.Items[1]
	if a.Code != errcode.OK || !bytes.Equal(a.Data, data) || a.Sum != block.Checksum(data) || TierName(a.Tier) != block.TierNVMe {
		t.Fatalf("item 0 %+v", a)
	}
	if b.Code != errcode.NotFound || b.Message != "no such block" {
		t.Fatalf("item 1 %+v", b)
	}
	// Into a too-small destination: skipped, and the stream stays aligned.
	r, err = ReadResponse(bytes.NewReader(body), h, func(int, uint32) []byte { return make([]byte, 3) })
	if err != nil || !r.Items[0].Skipped || r.Items[1].Code != errcode.NotFound {
		t.Fatalf("skip: %+v %v", r, err)
	}
	// Truncated and padded bodies are malformed.
	for _, cut := range []int{1, 5, len(body) - 1} {
		hh := h
		hh.Length = uint32(cut)
		if _, err := ReadResponse(bytes.NewReader(body[:cut]), hh, nil); !errors.Is(err, errcode.ErrMalformedFrame) {
			t.Fatalf("cut %d: %v", cut, err)
		}
	}
	hh := h
	hh.Length++
	if _, err := ReadResponse(bytes.NewReader(append(bytes.Clone(body), 0)), hh, nil); !errors.Is(err, errcode.ErrMalformedFrame) {
		t.Fatalf("trailing byte: %v", err)
	}
}

func TestShardKeys(t *testing.T) {
	data := []byte("shard bytes")
	sk := block.NewKey("ns", 5).WithPart(1).WithShard(2) // Shard 3
	t.Run("key round trip", func(t *testing.T) {
		b := AppendKey(AppendNamespace(nil, "ns"), sk)
		r, err := DecodeRequest(Header{Length: uint32(len(b)), Op: OpGet, Count: 1}, b, testLimits)
		if err != nil || r.KeyErrs != nil || r.Keys[0] != sk {
			t.Fatalf("%+v %v", r, err)
		}
	})
	t.Run("put round trip", func(t *testing.T) {
		b := AppendPutItem(AppendNamespace(nil, "ns"), sk, block.Checksum(data), uint32(len(data)), block.PutOptions{Parent: 77, HasParent: true})
		b = append(b, data...)
		r, err := DecodeRequest(Header{Length: uint32(len(b)), Op: OpPut, Count: 1}, b, testLimits)
		if err != nil || r.Items[0].Err != nil || r.Items[0].Key != sk || r.Items[0].Opts.HasParent || r.Items[0].Opts.Parent != 0 {
			t.Fatalf("%+v %v", r.Items, err)
		}
	})
	t.Run("old encoding has shard 0", func(t *testing.T) {
		b := AppendKey(AppendNamespace(nil, "ns"), block.NewKey("ns", 5))
		if b[len(b)-2] != 0 || b[len(b)-1] != 0 {
			t.Fatalf("a whole-block key must encode as before: % x", b)
		}
	})
	bad := []struct {
		name  string
		flags byte
		shard byte
	}{
		{"shard flag with shard 0", KeyHasShard, 0},
		{"shard above max", KeyHasShard, block.MaxShard + 1},
		{"shard byte without flag", 0, 3},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			b := AppendKey(AppendNamespace(nil, "ns"), block.NewKey("ns", 5))
			b[len(b)-2], b[len(b)-1] = tc.flags, tc.shard
			r, err := DecodeRequest(Header{Length: uint32(len(b)), Op: OpGet, Count: 1}, b, testLimits)
			if err != nil || r.KeyErrs == nil || !errors.Is(r.KeyErrs[0], block.ErrInvalidKey) {
				t.Fatalf("want a per-key ErrInvalidKey, got %+v %v", r, err)
			}
		})
	}
	t.Run("put with shard and parent flags", func(t *testing.T) {
		b := AppendPutItem(AppendNamespace(nil, "ns"), sk, block.Checksum(data), uint32(len(data)), block.PutOptions{})
		b[1+2+10] |= KeyHasParent
		b = append(b, data...)
		r, err := DecodeRequest(Header{Length: uint32(len(b)), Op: OpPut, Count: 1}, b, testLimits)
		if err != nil || !errors.Is(r.Items[0].Err, block.ErrInvalidKey) {
			t.Fatalf("%+v %v", r.Items, err)
		}
	})
}
