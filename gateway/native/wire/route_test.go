package wire

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/router/query"
	"github.com/ctxtier/ctxtier/gateway/errcode"
)

func ptr[T any](v T) *T { return &v }

func TestRouteQueryRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		q    query.Query
	}{
		{"hashes", query.Query{Namespace: "llama", BlockHashes: []uint64{1, 1 << 63, math.MaxUint64}}},
		{"everything", query.Query{Namespace: "llama", BlockHashes: []uint64{11, 12}, Temperature: ptr(0.25), MaxWorkers: 8, Commit: true,
			Hints: query.Hints{Priority: block.MaxPriority, ExpectedOutputTokens: 512, PinTTL: 5 * time.Minute}}},
		{"tokens", query.Query{Namespace: "t", TokenIDs: []uint32{1, 2, 3, math.MaxUint32}, Temperature: ptr(0.0)}},
		{"empty tokens", query.Query{Namespace: "t", TokenIDs: []uint32{}}},
		{"no items", query.Query{Namespace: "default"}},
		{"negative zero temperature", query.Query{Namespace: "default", Temperature: ptr(math.Copysign(0, -1))}},
		{"read hint", query.Query{Namespace: "agent", BlockHashes: []uint64{5, 6}, Hints: query.Hints{Retain: 20 * time.Second}}},
		{"read hint, tokens and pin", query.Query{Namespace: "t", TokenIDs: []uint32{9}, Hints: query.Hints{Retain: MaxRetainMillis(), PinTTL: time.Minute}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := AppendRouteQuery(nil, tc.q)
			if len(b) != RouteQueryLen(tc.q) {
				t.Fatalf("encoded %d bytes, RouteQueryLen says %d", len(b), RouteQueryLen(tc.q))
			}
			got, err := DecodeRouteQueryFlags(b, RouteFrameFlags(tc.q))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.q) {
				t.Fatalf("got %+v\nwant %+v", got, tc.q)
			}
			if re := AppendRouteQuery(nil, got); !bytes.Equal(re, b) {
				t.Fatalf("re-encoded differs:\n%x\n%x", re, b)
			}
			// Through DecodeRequest, as the server reads it.
			req, err := DecodeRequest(Header{Length: uint32(len(b)), Op: OpRoute, Flags: RouteFrameFlags(tc.q)}, b, testLimits)
			if err != nil || req.Namespace != tc.q.Namespace || !reflect.DeepEqual(*req.Route, tc.q) {
				t.Fatalf("DecodeRequest: %+v, %v", req, err)
			}
		})
	}
	// Hashes win over token ids; clamps and rounding.
	q := query.Query{Namespace: "n", BlockHashes: []uint64{7}, TokenIDs: []uint32{1, 2}, MaxWorkers: -3,
		Hints: query.Hints{ExpectedOutputTokens: math.MaxInt, PinTTL: time.Microsecond}}
	got, err := DecodeRouteQuery(AppendRouteQuery(nil, q))
	want := query.Query{Namespace: "n", BlockHashes: []uint64{7}, Hints: query.Hints{ExpectedOutputTokens: int(min(int64(math.MaxInt), math.MaxUint32)), PinTTL: time.Millisecond}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("clamped: %+v, %v", got, err)
	}
}

func TestRouteQueryRejects(t *testing.T) {
	good := AppendRouteQuery(nil, query.Query{Namespace: "ns", BlockHashes: []uint64{1, 2}})
	fix := 1 + 2 // the fixed part starts after the namespace
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	tests := []struct {
		name  string
		body  []byte
		count uint32
		want  error
	}{
		{"empty", nil, 0, errcode.ErrMalformedFrame},
		{"namespace past end", []byte{9, 'a'}, 0, errcode.ErrMalformedFrame},
		{"fixed part short", good[:fix+RouteQuerySize-1], 0, errcode.ErrMalformedFrame},
		{"unknown flag", mod(func(b []byte) []byte { b[fix] = 0x80; return b }), 0, errcode.ErrMalformedFrame},
		{"reserved", mod(func(b []byte) []byte { b[fix+3] = 1; return b }), 0, errcode.ErrMalformedFrame},
		{"temperature without flag", mod(func(b []byte) []byte { b[fix+8] = 1; return b }), 0, errcode.ErrMalformedFrame},
		{"priority", mod(func(b []byte) []byte { b[fix+1] = block.MaxPriority + 1; return b }), 0, block.ErrInvalidArgument},
		{"NaN temperature", AppendRouteQuery(nil, query.Query{Namespace: "ns", Temperature: ptr(math.NaN())}), 0, block.ErrInvalidArgument},
		{"negative temperature", AppendRouteQuery(nil, query.Query{Namespace: "ns", Temperature: ptr(-1.0)}), 0, block.ErrInvalidArgument},
		{"infinite temperature", AppendRouteQuery(nil, query.Query{Namespace: "ns", Temperature: ptr(math.Inf(1))}), 0, block.ErrInvalidArgument},
		{"count past end", mod(func(b []byte) []byte { b[fix+24] = 3; return b }), 0, errcode.ErrMalformedFrame},
		{"huge count", mod(func(b []byte) []byte { b[fix+27] = 0xff; return b }), 0, errcode.ErrMalformedFrame},
		{"trailing byte", append(bytes.Clone(good), 0), 0, errcode.ErrMalformedFrame},
		{"hashes read as tokens", mod(func(b []byte) []byte { b[fix] |= RouteTokenIDs; return b }), 0, errcode.ErrMalformedFrame},
		{"header count", good, 2, errcode.ErrMalformedFrame},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeRequest(Header{Length: uint32(len(tc.body)), Op: OpRoute, Count: tc.count}, tc.body, testLimits)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	// A route frame over the frame limit is refused by its header, before the body is read.
	big := Header{Length: testLimits.MaxFrameSize, Op: OpRoute}
	if _, err := DecodeHeader(AppendHeader(nil, big), testLimits.MaxFrameSize); !errors.Is(err, block.ErrTooLarge) {
		t.Fatalf("oversized route frame: %v", err)
	}
}

func sampleResult() query.Result {
	c := query.Cost{Seconds: 0.0125, RecomputeSec: 0.01, LoadSec: 0.002, FetchSec: 0.0005, CachedBlocks: 3, LocalBlocks: 2, FetchBlocks: 1, RecomputeBlocks: 1}
	return query.Result{
		Blocks: 7, BlockTokens: 16, TierDepth: 4, TierError: "", Recommended: "vllm-0", Cost: &c, Pinned: 4, PinError: "pin: no space",
		Workers: []query.WorkerResult{
			{Worker: "vllm-0", Device: 3, Host: 4, Disk: 5, Load: query.Load{PrefillBlocks: 2, DecodeBlocks: 120}, Cost: c},
			{Worker: "vllm-1", Stale: true, Load: query.Load{PrefillBlocks: -1}, Cost: query.Cost{Seconds: math.Inf(1), QueueSec: 1}},
		},
	}
}

func TestRouteResultRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		r    query.Result
	}{
		{"full", sampleResult()},
		{"no workers", query.Result{Blocks: 2, BlockTokens: 16, TierDepth: 1, TierError: "tier down", Workers: []query.WorkerResult{}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := AppendRouteResult(nil, tc.r)
			if len(b) != RouteResultLen(tc.r) {
				t.Fatalf("encoded %d bytes, RouteResultLen says %d", len(b), RouteResultLen(tc.r))
			}
			got, err := DecodeRouteResult(b)
			if err != nil || !reflect.DeepEqual(got, tc.r) {
				t.Fatalf("got %+v (%v)\nwant %+v", got, err, tc.r)
			}
			// Through ReadResponse, as the client reads it.
			h := Header{Length: uint32(len(b)), Op: OpRoute, Flags: FlagResponse}
			resp, err := ReadResponse(bytes.NewReader(b), h, nil)
			if err != nil || !reflect.DeepEqual(*resp.Route, tc.r) {
				t.Fatalf("ReadResponse: %+v, %v", resp, err)
			}
		})
	}
	// Long strings are cut to their limits.
	r := query.Result{TierError: strings.Repeat("e", 3000), Workers: []query.WorkerResult{}}
	got, err := DecodeRouteResult(AppendRouteResult(nil, r))
	if err != nil || len(got.TierError) != MaxMessageLen {
		t.Fatalf("long error: %d bytes, %v", len(got.TierError), err)
	}
}

func TestRouteResultRejects(t *testing.T) {
	good := AppendRouteResult(nil, sampleResult())
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	// Offsets in good: fixed part, pin error (13 bytes), recommended (6),
	// cost, then the first worker line.
	w0 := RouteResultSize + 13 + 6 + RouteCostSize
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"short fixed", good[:RouteResultSize-1]},
		{"flags", mod(func(b []byte) []byte { b[20] |= 2; return b })},
		{"reserved", mod(func(b []byte) []byte { b[21] = 1; return b })},
		{"message too long", mod(func(b []byte) []byte { b[22], b[23] = 0x01, 0x04; return b })},
		{"recommended without flag", mod(func(b []byte) []byte { b[20] = 0; return b })},
		{"strings past end", good[:RouteResultSize+5]},
		{"worker count too big", mod(func(b []byte) []byte { b[19] = 0x10; return b })},
		{"one worker fewer than sent", mod(func(b []byte) []byte { b[16] = 1; return b })},
		{"worker name empty", mod(func(b []byte) []byte { b[w0], b[w0+1] = 0, 0; return b })},
		{"worker name past end", mod(func(b []byte) []byte { b[w0+1] = 0x7f; return b })},
		{"worker flags", mod(func(b []byte) []byte { b[w0+2] = 4; return b })},
		{"worker reserved", mod(func(b []byte) []byte { b[w0+3] = 1; return b })},
		{"truncated", good[:len(good)-1]},
		{"trailing", append(bytes.Clone(good), 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeRouteResult(tc.b); !errors.Is(err, errcode.ErrMalformedFrame) {
				t.Fatalf("got %v, want MalformedFrame", err)
			}
		})
	}
	// ReadResponse refuses items on a route response, and a body that ends early.
	h := Header{Length: uint32(len(good)), Op: OpRoute, Flags: FlagResponse, Count: 1}
	if _, err := ReadResponse(bytes.NewReader(good), h, nil); !errors.Is(err, errcode.ErrMalformedFrame) {
		t.Fatalf("route response with items: %v", err)
	}
	h.Count = 0
	if _, err := ReadResponse(bytes.NewReader(good[:10]), h, nil); !errors.Is(err, errcode.ErrMalformedFrame) {
		t.Fatalf("short route response: %v", err)
	}
	h.Length = MaxRouteResponse + 1
	if _, err := ReadResponse(bytes.NewReader(good), h, nil); !errors.Is(err, errcode.ErrMalformedFrame) {
		t.Fatalf("oversized route response: %v", err)
	}
}

func TestOpRouteNamed(t *testing.T) {
	if OpRoute != 10 || !OpRoute.Known() || OpRoute.String() != "route" || Op(13).Known() {
		t.Fatalf("OpRoute %d known %v %q; op 13 known %v", OpRoute, OpRoute.Known(), OpRoute, Op(13).Known())
	}
}

// MaxRetainMillis is the largest retain window the read hint record holds.
func MaxRetainMillis() time.Duration { return block.MaxRetain }

// TestRouteQueryReadHint: with FlagReadHints a ROUTE body has the read hint
// record after its namespace; a zero window or non-zero reserved bytes are
// InvalidArgument, a body too short for the record or a record without the
// flag (bytes the query does not expect) MalformedFrame.
func TestRouteQueryReadHint(t *testing.T) {
	q := query.Query{Namespace: "ns", BlockHashes: []uint64{1, 2}, Hints: query.Hints{Retain: 3 * time.Second}}
	good := AppendRouteQuery(nil, q)
	rec := 1 + 2 // the record starts after the namespace
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for _, tc := range []struct {
		name  string
		body  []byte
		flags uint8
		want  error
	}{
		{"good", good, FlagReadHints, nil},
		{"zero window", mod(func(b []byte) []byte { clear(b[rec : rec+4]); return b }), FlagReadHints, block.ErrInvalidArgument},
		{"reserved", mod(func(b []byte) []byte { b[rec+5] = 1; return b }), FlagReadHints, block.ErrInvalidArgument},
		{"short for the record", good[:rec+ReadHintsSize-1], FlagReadHints, errcode.ErrMalformedFrame},
		{"record without the flag", good, 0, errcode.ErrMalformedFrame},
		// The fixed part's first 8 bytes read as a record of window 0.
		{"flag without the record", AppendRouteQuery(nil, query.Query{Namespace: "ns", BlockHashes: []uint64{1, 2}}), FlagReadHints, block.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := DecodeRequest(Header{Length: uint32(len(tc.body)), Op: OpRoute, Flags: tc.flags}, tc.body, testLimits)
			if !errors.Is(err, tc.want) || (tc.want == nil && (req.Route.Hints.Retain != q.Hints.Retain || req.Retain != q.Hints.Retain)) {
				t.Fatalf("got %v (%+v), want %v", err, req.Route, tc.want)
			}
		})
	}
}
