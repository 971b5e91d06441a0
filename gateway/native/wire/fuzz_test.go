package wire

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/router/query"
	"github.com/ctxtier/ctxtier/gateway/errcode"
)

// reencode rebuilds a request body from a successfully decoded request, or
// returns nil when some item had its own error (those bytes are not canonical).
func reencode(r *Request) []byte {
	if r.Op == OpPing {
		return []byte{}
	}
	if r.Op == OpRelease {
		return AppendLeaseIDs([]byte{}, r.LeaseIDs)
	}
	if r.Op == OpRoute {
		return AppendRouteQuery([]byte{}, *r.Route)
	}
	b := AppendNamespace([]byte{}, r.Namespace)
	switch r.Op {
	case OpPut:
		for _, it := range r.Items {
			if it.Err != nil {
				return nil
			}
			b = AppendPutItem(b, it.Key, it.Opts.Sum, it.Size, it.Opts)
			if r.Flags&FlagPutHints != 0 {
				b = AppendPutHints(b, it.Opts)
			}
			if r.Flags&FlagPutSession != 0 {
				b = AppendPutSession(b, it.Opts.Session)
			}
			b = append(b, it.Data...)
		}
		return b
	case OpEndSession:
		return AppendPutSession(b, r.Session)
	case OpGet, OpLookup:
		if r.Flags&FlagReadHints != 0 {
			b = AppendReadHints(b, r.Retain)
		}
	case OpPin:
		b = binary.LittleEndian.AppendUint64(b, uint64(r.PinTTL.Milliseconds()))
	}
	if r.KeyErrs != nil {
		return nil
	}
	if r.Op == OpDeleteIf {
		for i, k := range r.Keys {
			b = AppendDeleteIfItem(b, k, r.Sums[i])
		}
		return b
	}
	for _, k := range r.Keys {
		b = AppendKey(b, k)
	}
	if r.Op == OpDescribe {
		b = AppendDescribeFlags(b, r.DescribeFlags)
	}
	return b
}

func fuzzSeeds(f *testing.F) {
	d := []byte("seed block")
	put := AppendNamespace(nil, "default")
	put = AppendPutItem(put, block.NewKey("default", 1).WithPart(1), block.Checksum(d), uint32(len(d)), block.PutOptions{PinTTL: 5000})
	put = append(put, d...)
	keys := AppendKey(AppendNamespace(nil, "default"), block.NewKey("default", 7))
	shardPut := AppendNamespace(nil, "default")
	shardPut = AppendPutItem(shardPut, block.NewKey("default", 2).WithShard(1), block.Checksum(d), uint32(len(d)), block.PutOptions{})
	shardPut = append(shardPut, d...)
	shardKeys := AppendKey(AppendNamespace(nil, "default"), block.NewKey("default", 7).WithPart(3).WithShard(0))
	pin := append(AppendNamespace(nil, "default"), 1, 0, 0, 0, 0, 0, 0, 0)
	pin = AppendKey(pin, block.NewKey("default", 7))
	describe := AppendKey(AppendKey(AppendNamespace(nil, "default"), block.NewKey("default", 7)), block.NewKey("default", 8).WithPart(2))
	describeVersion := AppendDescribeFlags(append([]byte{}, describe...), DescribeFlagVersion)
	release := AppendLeaseIDs(nil, []uint64{1, 1 << 40})
	route, routeTokens := routeSeeds()
	deleteIf := AppendDeleteIfItem(AppendNamespace(nil, "default"), block.NewKey("default", 7), block.Checksum(d))
	deleteIf = AppendDeleteIfItem(deleteIf, block.NewKey("default", 9).WithShard(2), 0xffffffff)
	for _, s := range []struct {
		op    Op
		count uint32
		body  []byte
	}{
		{OpPut, 1, put}, {OpGet, 1, keys}, {OpExists, 1, keys}, {OpLookup, 1, keys},
		{OpDelete, 1, keys}, {OpPin, 1, pin}, {OpPing, 0, nil}, {OpPut, 2, put}, {99, 0, nil},
		{OpPut, 1, shardPut}, {OpGet, 1, shardKeys}, {OpDelete, 1, shardKeys},
		{OpDescribe, 2, describe}, {OpDescribe, 2, describeVersion}, {OpDescribe, 1, describeVersion},
		{OpRelease, 2, release}, {OpRelease, 0, nil}, {OpRelease, 3, release},
		{OpRoute, 0, route}, {OpRoute, 0, routeTokens}, {OpRoute, 2, route},
		{OpDeleteIf, 2, deleteIf}, {OpDeleteIf, 1, deleteIf}, {OpDeleteIf, 1, keys},
	} {
		f.Add(append(AppendHeader(nil, Header{Length: uint32(len(s.body)), Op: s.op, ID: 1, Count: s.count}), s.body...))
	}
	for _, o := range []block.PutOptions{{Reuse: block.ReuseSession, Retain: 30 * time.Second}, {Reuse: block.ReuseNever}, {Reuse: 9}} {
		h, body := hintedPut(o, block.PutOptions{Reuse: block.ReuseShared})
		f.Add(append(AppendHeader(nil, h), body...))
	}
	for _, rh := range []struct {
		op     Op
		retain time.Duration
	}{{OpGet, 30 * time.Second}, {OpLookup, time.Millisecond}, {OpLookup, 0}, {OpExists, time.Second}} {
		h, body := readFrame(rh.op, rh.retain, 7, 8)
		f.Add(append(AppendHeader(nil, h), body...))
	}
	sessPut := AppendNamespace(nil, "default")
	so := block.PutOptions{Reuse: block.ReuseSession, Retain: time.Second, Session: 5}
	sessPut = AppendPutItem(sessPut, block.NewKey("default", 3), block.Checksum(d), uint32(len(d)), so)
	sessPut = append(AppendPutSession(AppendPutHints(sessPut, so), so.Session), d...)
	f.Add(append(AppendHeader(nil, Header{Length: uint32(len(sessPut)), Op: OpPut, Flags: FlagPutHints | FlagPutSession, Count: 1}), sessPut...))
	hintedRoute := query.Query{Namespace: "default", BlockHashes: []uint64{1, 2}, Hints: query.Hints{Retain: 30 * time.Second}}
	hr := AppendRouteQuery(nil, hintedRoute)
	f.Add(append(AppendHeader(nil, Header{Length: uint32(len(hr)), Op: OpRoute, Flags: RouteFrameFlags(hintedRoute)}), hr...))
	end := AppendEndSession(nil, "default", 77)
	f.Add(append(AppendHeader(nil, Header{Length: uint32(len(end)), Op: OpEndSession}), end...))
	f.Add([]byte{})
	f.Add(AppendHeader(nil, Header{Length: 1 << 30}))
}

// FuzzDecodeFrame feeds arbitrary bytes to the server's frame decoder: it
// must never panic, never accept a body inconsistent with its header, and a
// request it accepts must re-encode to exactly the bytes it came from.
func FuzzDecodeFrame(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHeader(b, testLimits.MaxFrameSize)
		if err != nil {
			return
		}
		body := b[HeaderSize:]
		if uint64(len(body)) < uint64(h.Length) {
			return // truncated: the server reports it without decoding
		}
		body = body[:h.Length]
		r, err := DecodeRequest(h, body, testLimits)
		if err != nil {
			if errcode.Of(err) == errcode.Internal {
				t.Fatalf("unmapped error %v", err)
			}
			return
		}
		if r.Op == OpRelease && len(r.LeaseIDs) != int(h.Count) {
			t.Fatalf("%d lease ids for count %d", len(r.LeaseIDs), h.Count)
		}
		if r.Op == OpRoute && (r.Route == nil || r.Route.Namespace != r.Namespace || h.Count != 0) {
			t.Fatalf("route request %+v for count %d", r.Route, h.Count)
		}
		if r.Op == OpEndSession && (r.Session == 0 || h.Count != 0) {
			t.Fatalf("end-session accepted session %d, count %d", r.Session, h.Count)
		}
		if (h.Flags&FlagReadHints != 0) != (r.Retain != 0) || r.Retain != 0 && block.ValidateRetain(r.Retain) != nil {
			t.Fatalf("read retain %v with frame flags %#02x", r.Retain, h.Flags)
		}
		if r.Op != OpPut && r.Op != OpPing && r.Op != OpRelease && r.Op != OpRoute && r.Op != OpEndSession && len(r.Keys) != int(h.Count) {
			t.Fatalf("%d keys for count %d", len(r.Keys), h.Count)
		}
		if r.Op == OpDeleteIf && len(r.Sums) != int(h.Count) {
			t.Fatalf("%d checksums for %d delete-if keys", len(r.Sums), h.Count)
		}
		if r.Op != OpDeleteIf && r.Sums != nil {
			t.Fatalf("checksums %v decoded for a %s request", r.Sums, r.Op)
		}
		if r.Op == OpPut && len(r.Items) != int(h.Count) {
			t.Fatalf("%d items for count %d", len(r.Items), h.Count)
		}
		for i, it := range r.Items {
			if it.Err == nil && it.Opts.ValidateHints() != nil {
				t.Fatalf("item %d accepted with invalid hints %+v", i, it.Opts)
			}
			if h.Flags&FlagPutHints == 0 && it.Opts.HasHints() {
				t.Fatalf("item %d has hints %+v in a frame without the hint flag", i, it.Opts)
			}
			if h.Flags&FlagPutSession == 0 && it.Opts.Session != 0 {
				t.Fatalf("item %d has session %d in a frame without the session flag", i, it.Opts.Session)
			}
		}
		if re := reencode(r); re != nil && !bytes.Equal(re, body) {
			t.Fatalf("re-encoded body differs:\n got %x\nwant %x", re, body)
		}
	})
}

// FuzzReadResponse feeds arbitrary bytes to the client's response decoder.
func FuzzReadResponse(f *testing.F) {
	d := []byte("data")
	get := AppendStatus(nil, errcode.OK, "")
	get = AppendGetMeta(get, block.Checksum(d), uint32(len(d)), block.TierDRAM)
	get = append(get, d...)
	get = AppendStatus(get, errcode.NotFound, "missing")
	f.Add(append(AppendHeader(nil, Header{Length: uint32(len(get)), Op: OpGet, Flags: FlagResponse, Count: 2}), get...))
	f.Add(append(AppendHeader(nil, Header{Length: 4, Op: OpLookup, Flags: FlagResponse}), 3, 0, 0, 0))
	f.Add(append(AppendHeader(nil, Header{Length: 4, Op: OpEndSession, Flags: FlagResponse}), 9, 0, 0, 0))
	f.Add(append(AppendHeader(nil, Header{Length: 4, Op: OpEndSession, Flags: FlagResponse, Count: 1}), 9, 0, 0, 0))
	f.Add(append(AppendHeader(nil, Header{Length: 5, Op: OpExists, Flags: FlagResponse, Count: 1}), 0, 0, 0, 0, 1))
	f.Add(append(AppendHeader(nil, Header{Length: 5, Op: OpPut, Flags: FlagResponse, Code: errcode.TooLarge}), AppendErrorBody(nil, "big")...))
	desc := AppendStatus(nil, errcode.OK, "")
	desc = AppendDescribeItem(desc, Lease{ID: 9, TTL: 30 * time.Second, Desc: block.Descriptor{
		Tier: block.TierDRAM, Path: "/proc/1/fd/3", Offset: 8192, ReadLength: 100, DataOffset: 8192, Length: 100, Sum: 5}})
	desc = AppendDescribeItem(AppendStatus(desc, errcode.OK, ""), Lease{ID: 10, TTL: time.Second, Desc: block.Descriptor{
		Tier: block.TierNVMe, Path: "/d/segments/1.seg", Offset: 4096, ReadLength: 8192, DataOffset: 8192, Length: 10, Sum: 6, Generation: 3}})
	desc = AppendDescribeItem(AppendStatus(desc, errcode.OK, ""), Lease{ID: 11, TTL: time.Second, Desc: block.Descriptor{
		Tier: block.TierDRAM, Path: "/proc/1/fd/3", Offset: 0, ReadLength: 4096, DataOffset: 0, Length: 4096, Sum: 7,
		Generation: 1<<64 - 1, VersionOffset: 1 << 30}})
	desc = AppendStatus(desc, errcode.Unavailable, "reclaiming")
	f.Add(append(AppendHeader(nil, Header{Length: uint32(len(desc)), Op: OpDescribe, Flags: FlagResponse, Count: 4}), desc...))
	delIf := AppendStatus(AppendStatus(nil, errcode.OK, ""), errcode.NotFound, "holds other bytes")
	f.Add(append(AppendHeader(nil, Header{Length: uint32(len(delIf)), Op: OpDeleteIf, Flags: FlagResponse, Count: 2}), delIf...))
	rel := AppendStatus(AppendStatus(nil, errcode.OK, ""), errcode.NotFound, "no lease")
	f.Add(append(AppendHeader(nil, Header{Length: uint32(len(rel)), Op: OpRelease, Flags: FlagResponse, Count: 2}), rel...))
	route := AppendRouteResult(nil, sampleResult())
	f.Add(append(AppendHeader(nil, Header{Length: uint32(len(route)), Op: OpRoute, Flags: FlagResponse}), route...))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHeader(b, 1<<20)
		if err != nil {
			return
		}
		r, err := ReadResponse(bytes.NewReader(b[HeaderSize:]), h, nil)
		if err != nil {
			return
		}
		if uint64(len(b)-HeaderSize) < uint64(h.Length) {
			t.Fatalf("accepted a body of %d bytes, header says %d", len(b)-HeaderSize, h.Length)
		}
		if h.Op == OpRoute && h.Code == errcode.OK {
			if re := AppendRouteResult(nil, *r.Route); !bytes.Equal(re, b[HeaderSize:HeaderSize+int(h.Length)]) {
				t.Fatalf("re-encoded route result differs")
			}
		}
		for _, it := range r.Items {
			if uint32(len(it.Data)) != it.Size && !it.Skipped && it.Code == errcode.OK && h.Op == OpGet {
				t.Fatalf("item data %d bytes, size %d", len(it.Data), it.Size)
			}
			if it.Code == errcode.OK && h.Op == OpDescribe {
				if err := CheckDescriptor(it.Lease.Desc); err != nil {
					t.Fatalf("accepted a bad descriptor: %v", err)
				}
				re := AppendDescribeItem(nil, it.Lease)
				if DecodeLen := DescribeItemLen(it.Lease.Desc); len(re) != DecodeLen {
					t.Fatalf("re-encoded describe item is %d bytes, want %d", len(re), DecodeLen)
				}
			}
		}
	})
}

// routeSeeds are two ROUTE request bodies: hashes with every field set, and
// token ids.
func routeSeeds() (hashes, tokens []byte) {
	temp := 0.5
	hashes = AppendRouteQuery(nil, query.Query{Namespace: "default", BlockHashes: []uint64{1, 2, 3}, Temperature: &temp,
		MaxWorkers: 4, Commit: true, Hints: query.Hints{Priority: 3, ExpectedOutputTokens: 100, PinTTL: time.Minute}})
	tokens = AppendRouteQuery(nil, query.Query{Namespace: "t", TokenIDs: []uint32{5, 6, 7, 8}})
	return hashes, tokens
}

// FuzzDecodeRouteQuery feeds arbitrary bytes to the ROUTE request decoder:
// it must never panic, map every error to a wire code, keep the priority and
// temperature in range, and a query it accepts must re-encode to exactly the
// bytes it came from.
func FuzzDecodeRouteQuery(f *testing.F) {
	hashes, tokens := routeSeeds()
	f.Add(hashes)
	f.Add(tokens)
	f.Add(AppendRouteQuery(nil, query.Query{Namespace: "x", TokenIDs: []uint32{}}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		q, err := DecodeRouteQuery(b)
		if err != nil {
			if c := errcode.Of(err); c != errcode.MalformedFrame && c != errcode.InvalidArgument {
				t.Fatalf("error %v maps to %v", err, c)
			}
			return
		}
		if q.Hints.Priority > block.MaxPriority || (q.Temperature != nil && !(*q.Temperature >= 0) || q.Temperature != nil && math.IsInf(*q.Temperature, 0)) {
			t.Fatalf("accepted %+v", q)
		}
		if len(q.BlockHashes) > 0 && q.TokenIDs != nil {
			t.Fatalf("both hashes and token ids: %+v", q)
		}
		if re := AppendRouteQuery(nil, q); !bytes.Equal(re, b) {
			t.Fatalf("re-encoded query differs:\n got %x\nwant %x", re, b)
		}
	})
}

// FuzzDecodeRouteQueryReadHint is FuzzDecodeRouteQuery for bodies read
// with FlagReadHints: an accepted query has a retain window in
// (0, block.MaxRetain] and re-encodes, record included, to exactly the
// bytes it came from.
func FuzzDecodeRouteQueryReadHint(f *testing.F) {
	hashes, tokens := routeSeeds()
	for _, q := range []query.Query{
		{Namespace: "default", BlockHashes: []uint64{1, 2, 3}, Hints: query.Hints{Retain: time.Minute, PinTTL: time.Second}},
		{Namespace: "t", TokenIDs: []uint32{4}, Hints: query.Hints{Retain: time.Millisecond}},
	} {
		f.Add(AppendRouteQuery(nil, q))
	}
	f.Add(hashes)
	f.Add(tokens)
	f.Fuzz(func(t *testing.T, b []byte) {
		q, err := DecodeRouteQueryFlags(b, FlagReadHints)
		if err != nil {
			if c := errcode.Of(err); c != errcode.MalformedFrame && c != errcode.InvalidArgument {
				t.Fatalf("error %v maps to %v", err, c)
			}
			return
		}
		if block.ValidateRetain(q.Hints.Retain) != nil || q.Hints.Retain%time.Millisecond != 0 {
			t.Fatalf("accepted retain window %v", q.Hints.Retain)
		}
		if RouteFrameFlags(q) != FlagReadHints {
			t.Fatalf("a hinted query would go without the flag: %+v", q)
		}
		if re := AppendRouteQuery(nil, q); !bytes.Equal(re, b) {
			t.Fatalf("re-encoded query differs:\n got %x\nwant %x", re, b)
		}
	})
}

// FuzzDecodeRouteResult feeds arbitrary bytes to the ROUTE response decoder:
// it must never panic, and a result it accepts must re-encode to exactly the
// bytes it came from.
func FuzzDecodeRouteResult(f *testing.F) {
	f.Add(AppendRouteResult(nil, sampleResult()))
	f.Add(AppendRouteResult(nil, query.Result{TierError: "down", Workers: []query.WorkerResult{}}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRouteResult(b)
		if err != nil {
			if errcode.Of(err) != errcode.MalformedFrame {
				t.Fatalf("error %v is not MalformedFrame", err)
			}
			return
		}
		if r.Workers == nil || (r.Cost == nil) != (r.Recommended == "") {
			t.Fatalf("accepted %+v", r)
		}
		if re := AppendRouteResult(nil, r); !bytes.Equal(re, b) {
			t.Fatalf("re-encoded result differs:\n got %x\nwant %x", re, b)
		}
	})
}
