package wire

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/router/query"
	"github.com/ctxtier/ctxtier/gateway/errcode"
)

// ROUTE: the KV-aware router's query (ctxstore/router) in the native
// protocol. The request body is the namespace, RouteQuerySize fixed bytes and
// count block hashes (u64) or token ids (u32); header count is 0. The
// response (header count 0) is one route result: RouteResultSize fixed
// bytes, its strings, the recommendation's cost, then one line per listed
// worker. docs/protocol.md has the layouts.
const (
	// RouteQuerySize is the fixed part of a ROUTE request after the namespace.
	RouteQuerySize = 28
	// RouteResultSize is the fixed part of a ROUTE response.
	RouteResultSize = 28
	// RouteCostSize is the encoded size of one cost.
	RouteCostSize = 56
	// RouteWorkerSize is the fixed part of a worker line, before its name.
	RouteWorkerSize = 32 + RouteCostSize
	// MaxWorkerNameLen bounds a worker name on the wire (longer names are cut).
	MaxWorkerNameLen = math.MaxUint16
	// MaxRouteResponse bounds a ROUTE response body a client accepts:
	// about 700k worker lines with 8-byte names, far above any router's
	// max_workers.
	MaxRouteResponse = 64 << 20
)

// ROUTE request flags.
const (
	RouteCommit         uint8 = 1 << 0 // add the request's predicted load to the recommended worker
	RouteHasTemperature uint8 = 1 << 1 // the temperature field is set (else: the server's default)
	RouteTokenIDs       uint8 = 1 << 2 // the items are u32 token ids (else u64 block hashes)
	routeFlagsKnown           = RouteCommit | RouteHasTemperature | RouteTokenIDs
)

// ROUTE response flags.
const (
	// RouteRecommended: a recommended worker (its name and cost) is present.
	RouteRecommended uint8 = 1 << 0
	// RouteStale marks a worker line whose entries are not trusted.
	RouteStale uint8 = 1 << 0
)

// routeItems reports whether q travels as token ids, and how many items.
// Hashes win when both are set, as in the router's Route (ctxstore/router); an empty TokenIDs slice
// that is not nil travels as a token query of 0 tokens.
func routeItems(q query.Query) (tokens bool, n int) {
	if len(q.BlockHashes) == 0 && q.TokenIDs != nil {
		return true, len(q.TokenIDs)
	}
	return false, len(q.BlockHashes)
}

// RouteQueryLen is the encoded size of AppendRouteQuery(q), namespace included.
func RouteQueryLen(q query.Query) int {
	tokens, n := routeItems(q)
	size := 8
	if tokens {
		size = 4
	}
	hint := 0
	if q.Hints.Retain > 0 {
		hint = ReadHintsSize
	}
	return 1 + len(q.Namespace) + hint + RouteQuerySize + n*size
}

// RouteFrameFlags are the frame flags a ROUTE request of q is sent with:
// FlagReadHints when it carries a read hint (q.Hints.Retain), as
// AppendRouteQuery encodes it.
func RouteFrameFlags(q query.Query) uint8 {
	if q.Hints.Retain > 0 {
		return FlagReadHints
	}
	return 0
}

// AppendRouteQuery appends a ROUTE request body: the namespace, the read
// hint record when q.Hints.Retain is positive (the frame then carries
// FlagReadHints: RouteFrameFlags), the query's fields, and its block
// hashes or token ids. Negative hints and max_workers
// encode as 0, values above u32 saturate, and a positive pin TTL below a
// millisecond rounds up to 1 ms; callers check what they send (the Go
// client refuses negative hints).
func AppendRouteQuery(b []byte, q query.Query) []byte {
	tokens, _ := routeItems(q)
	var f uint8
	if q.Commit {
		f |= RouteCommit
	}
	var temp uint64
	if q.Temperature != nil {
		f |= RouteHasTemperature
		temp = math.Float64bits(*q.Temperature)
	}
	if tokens {
		f |= RouteTokenIDs
	}
	b = AppendNamespace(b, q.Namespace)
	if q.Hints.Retain > 0 {
		b = AppendReadHints(b, q.Hints.Retain)
	}
	b = append(b, f, q.Hints.Priority, 0, 0)
	b = le.AppendUint32(b, sat32(int64(q.MaxWorkers)))
	b = le.AppendUint64(b, temp)
	b = le.AppendUint32(b, sat32(int64(q.Hints.ExpectedOutputTokens)))
	ttl := PinTTLMillis(q.Hints.PinTTL.Milliseconds())
	if ttl == 0 && q.Hints.PinTTL > 0 {
		ttl = 1
	}
	b = le.AppendUint32(b, ttl)
	if tokens {
		b = le.AppendUint32(b, uint32(len(q.TokenIDs)))
		for _, t := range q.TokenIDs {
			b = le.AppendUint32(b, t)
		}
		return b
	}
	b = le.AppendUint32(b, uint32(len(q.BlockHashes)))
	for _, h := range q.BlockHashes {
		b = le.AppendUint64(b, h)
	}
	return b
}

// sat32 clamps v into a u32 field.
func sat32(v int64) uint32 {
	switch {
	case v <= 0:
		return 0
	case v > math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(v)
}

// DecodeRouteQuery parses a whole ROUTE request body (namespace included).
// A body inconsistent with itself (too short, unknown flags, non-zero
// reserved bytes, a temperature without its flag, a count that does not
// match the bytes left) is ErrMalformedFrame; a priority above
// block.MaxPriority or a negative, NaN or infinite temperature is
// block.ErrInvalidArgument. The item count is bounded by the body, which
// DecodeHeader bounded by the frame size; the router applies its own
// max_query_blocks (block.ErrTooLarge).
func DecodeRouteQuery(body []byte) (query.Query, error) {
	return DecodeRouteQueryFlags(body, 0)
}

// DecodeRouteQueryFlags is DecodeRouteQuery for a frame with flags: with
// FlagReadHints the namespace is followed by a read hint record (a
// retain window of 0 or non-zero reserved bytes are
// block.ErrInvalidArgument), which goes to q.Hints.Retain.
func DecodeRouteQueryFlags(body []byte, flags uint8) (query.Query, error) {
	var q query.Query
	if len(body) < 1 || len(body) < 1+int(body[0]) {
		return q, fmt.Errorf("%w: route body too short for the namespace", errcode.ErrMalformedFrame)
	}
	n := int(body[0])
	q.Namespace = string(body[1 : 1+n])
	b := body[1+n:]
	if flags&FlagReadHints != 0 {
		var req Request
		var err error
		if b, err = req.decodeReadHints(b); err != nil {
			return q, err
		}
		q.Hints.Retain = req.Retain
	}
	if len(b) < RouteQuerySize {
		return q, fmt.Errorf("%w: route body has %d bytes after the namespace, the query needs %d", errcode.ErrMalformedFrame, len(b), RouteQuerySize)
	}
	f := b[0]
	if f&^routeFlagsKnown != 0 {
		return q, fmt.Errorf("%w: route flags %#02x has unknown bits", errcode.ErrMalformedFrame, f)
	}
	if b[2] != 0 || b[3] != 0 {
		return q, fmt.Errorf("%w: route reserved bytes must be zero", errcode.ErrMalformedFrame)
	}
	q.Commit = f&RouteCommit != 0
	q.Hints.Priority = b[1]
	if q.Hints.Priority > block.MaxPriority {
		return q, fmt.Errorf("%w: route priority %d above %d", block.ErrInvalidArgument, q.Hints.Priority, block.MaxPriority)
	}
	q.MaxWorkers = int(le.Uint32(b[4:]))
	tb := le.Uint64(b[8:])
	if f&RouteHasTemperature != 0 {
		t := math.Float64frombits(tb)
		if t < 0 || math.IsNaN(t) || math.IsInf(t, 0) {
			return q, fmt.Errorf("%w: route temperature %v", block.ErrInvalidArgument, t)
		}
		q.Temperature = &t
	} else if tb != 0 {
		return q, fmt.Errorf("%w: route temperature set without its flag", errcode.ErrMalformedFrame)
	}
	q.Hints.ExpectedOutputTokens = int(le.Uint32(b[16:]))
	q.Hints.PinTTL = time.Duration(le.Uint32(b[20:])) * time.Millisecond
	count := uint64(le.Uint32(b[24:]))
	b = b[RouteQuerySize:]
	size := uint64(8)
	if f&RouteTokenIDs != 0 {
		size = 4
	}
	if uint64(len(b)) != count*size {
		return q, fmt.Errorf("%w: %d route item bytes for %d items of %d bytes", errcode.ErrMalformedFrame, len(b), count, size)
	}
	if f&RouteTokenIDs != 0 {
		q.TokenIDs = make([]uint32, count)
		for i := range q.TokenIDs {
			q.TokenIDs[i] = le.Uint32(b[4*i:])
		}
		return q, nil
	}
	if count > 0 {
		q.BlockHashes = make([]uint64, count)
		for i := range q.BlockHashes {
			q.BlockHashes[i] = le.Uint64(b[8*i:])
		}
	}
	return q, nil
}

// RouteResultLen is the encoded size of AppendRouteResult(r).
func RouteResultLen(r query.Result) int {
	n := RouteResultSize + min(len(r.TierError), MaxMessageLen) + min(len(r.PinError), MaxMessageLen)
	if r.Cost != nil && r.Recommended != "" {
		n += min(len(r.Recommended), MaxWorkerNameLen) + RouteCostSize
	}
	for _, w := range r.Workers {
		n += RouteWorkerSize + min(len(w.Worker), MaxWorkerNameLen)
	}
	return n
}

// AppendRouteResult appends a ROUTE response body. The namespace and the
// hashes (query.Result.Hashes) do not travel: the client knows the first,
// and the second only when it sent hashes. Error strings are cut to
// MaxMessageLen bytes, worker names to MaxWorkerNameLen. A recommendation
// travels when r.Recommended and r.Cost are both set (the router sets both
// or neither).
func AppendRouteResult(b []byte, r query.Result) []byte {
	tierErr, pinErr := cut(r.TierError, MaxMessageLen), cut(r.PinError, MaxMessageLen)
	var f uint8
	var rec string
	rc := r.Cost != nil && r.Recommended != ""
	if rc {
		f |= RouteRecommended
		rec = cut(r.Recommended, MaxWorkerNameLen)
	}
	b = le.AppendUint32(b, sat32(int64(r.Blocks)))
	b = le.AppendUint32(b, sat32(int64(r.BlockTokens)))
	b = le.AppendUint32(b, sat32(int64(r.TierDepth)))
	b = le.AppendUint32(b, sat32(int64(r.Pinned)))
	b = le.AppendUint32(b, uint32(len(r.Workers)))
	b = append(b, f, 0)
	b = le.AppendUint16(b, uint16(len(tierErr)))
	b = le.AppendUint16(b, uint16(len(pinErr)))
	b = le.AppendUint16(b, uint16(len(rec)))
	b = append(b, tierErr...)
	b = append(b, pinErr...)
	b = append(b, rec...)
	if rc {
		b = appendCost(b, *r.Cost)
	}
	for _, w := range r.Workers {
		name := cut(w.Worker, MaxWorkerNameLen)
		var wf uint8
		if w.Stale {
			wf |= RouteStale
		}
		b = le.AppendUint16(b, uint16(len(name)))
		b = append(b, wf, 0)
		b = le.AppendUint32(b, sat32(int64(w.Device)))
		b = le.AppendUint32(b, sat32(int64(w.Host)))
		b = le.AppendUint32(b, sat32(int64(w.Disk)))
		b = le.AppendUint64(b, uint64(w.Load.PrefillBlocks))
		b = le.AppendUint64(b, uint64(w.Load.DecodeBlocks))
		b = appendCost(b, w.Cost)
		b = append(b, name...)
	}
	return b
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func appendCost(b []byte, c query.Cost) []byte {
	for _, v := range [...]float64{c.Seconds, c.RecomputeSec, c.LoadSec, c.FetchSec, c.QueueSec} {
		b = le.AppendUint64(b, math.Float64bits(v))
	}
	for _, v := range [...]int{c.CachedBlocks, c.LocalBlocks, c.FetchBlocks, c.RecomputeBlocks} {
		b = le.AppendUint32(b, sat32(int64(v)))
	}
	return b
}

func decodeCost(p []byte) query.Cost {
	f := func(off int) float64 { return math.Float64frombits(le.Uint64(p[off:])) }
	i := func(off int) int { return int(le.Uint32(p[off:])) }
	return query.Cost{
		Seconds: f(0), RecomputeSec: f(8), LoadSec: f(16), FetchSec: f(24), QueueSec: f(32),
		CachedBlocks: i(40), LocalBlocks: i(44), FetchBlocks: i(48), RecomputeBlocks: i(52),
	}
}

// DecodeRouteResult parses a whole ROUTE response body. Anything
// inconsistent (a length past the end, unknown flags, non-zero reserved
// bytes, an empty worker name, a recommendation name without the flag,
// trailing bytes) is ErrMalformedFrame. Workers is never nil.
func DecodeRouteResult(b []byte) (query.Result, error) {
	var r query.Result
	bad := func(format string, a ...any) (query.Result, error) {
		return query.Result{}, fmt.Errorf("%w: route result: %s", errcode.ErrMalformedFrame, fmt.Sprintf(format, a...))
	}
	if len(b) < RouteResultSize {
		return bad("%d bytes, the fixed part needs %d", len(b), RouteResultSize)
	}
	r.Blocks = int(le.Uint32(b[0:]))
	r.BlockTokens = int(le.Uint32(b[4:]))
	r.TierDepth = int(le.Uint32(b[8:]))
	r.Pinned = int(le.Uint32(b[12:]))
	nw := uint64(le.Uint32(b[16:]))
	f := b[20]
	tl, pl, rl := int(le.Uint16(b[22:])), int(le.Uint16(b[24:])), int(le.Uint16(b[26:]))
	switch {
	case f&^RouteRecommended != 0 || b[21] != 0:
		return bad("flags %#02x, reserved %#02x", f, b[21])
	case tl > MaxMessageLen || pl > MaxMessageLen:
		return bad("error strings of %d and %d bytes (at most %d)", tl, pl, MaxMessageLen)
	case (f&RouteRecommended != 0) != (rl > 0):
		return bad("recommended name of %d bytes with flags %#02x", rl, f)
	}
	b = b[RouteResultSize:]
	need := tl + pl + rl
	if f&RouteRecommended != 0 {
		need += RouteCostSize
	}
	if len(b) < need {
		return bad("strings and cost need %d bytes, %d left", need, len(b))
	}
	r.TierError, b = string(b[:tl]), b[tl:]
	r.PinError, b = string(b[:pl]), b[pl:]
	r.Recommended, b = string(b[:rl]), b[rl:]
	if f&RouteRecommended != 0 {
		c := decodeCost(b)
		r.Cost = &c
		b = b[RouteCostSize:]
	}
	// Every line needs its fixed part, which bounds the allocation by the body.
	if nw*RouteWorkerSize > uint64(len(b)) {
		return bad("%d worker lines cannot fit in %d bytes", nw, len(b))
	}
	r.Workers = make([]query.WorkerResult, nw)
	for i := range r.Workers {
		if len(b) < RouteWorkerSize {
			return bad("worker %d: %d bytes left, the line needs %d", i, len(b), RouteWorkerSize)
		}
		n := int(le.Uint16(b))
		wf := b[2]
		if n == 0 || wf&^RouteStale != 0 || b[3] != 0 {
			return bad("worker %d: name of %d bytes, flags %#02x, reserved %#02x", i, n, wf, b[3])
		}
		if len(b) < RouteWorkerSize+n {
			return bad("worker %d: name of %d bytes past the end", i, n)
		}
		w := &r.Workers[i]
		w.Stale = wf&RouteStale != 0
		w.Device, w.Host, w.Disk = int(le.Uint32(b[4:])), int(le.Uint32(b[8:])), int(le.Uint32(b[12:]))
		w.Load = query.Load{PrefillBlocks: int64(le.Uint64(b[16:])), DecodeBlocks: int64(le.Uint64(b[24:]))}
		w.Cost = decodeCost(b[32:])
		w.Worker = string(b[RouteWorkerSize : RouteWorkerSize+n])
		b = b[RouteWorkerSize+n:]
	}
	if len(b) != 0 {
		return bad("%d trailing bytes", len(b))
	}
	return r, nil
}

// readRoute reads and decodes a ROUTE response body of h.Length bytes. The
// buffer grows as bytes arrive, so a header announcing more than is sent
// costs no large allocation.
func (b *bodyReader) readRoute(resp *Response) error {
	if b.left > MaxRouteResponse {
		return fmt.Errorf("%w: route result of %d bytes exceeds %d", errcode.ErrMalformedFrame, b.left, MaxRouteResponse)
	}
	want := b.left
	body, err := io.ReadAll(io.LimitReader(b.r, int64(want)))
	if err != nil {
		return fmt.Errorf("%w: reading response: %w", errcode.ErrMalformedFrame, err)
	}
	if uint32(len(body)) != want {
		return fmt.Errorf("%w: reading response: %w", errcode.ErrMalformedFrame, io.ErrUnexpectedEOF)
	}
	b.left = 0
	r, err := DecodeRouteResult(body)
	if err != nil {
		return err
	}
	resp.Route = &r
	return nil
}
