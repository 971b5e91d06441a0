package wire

import (
	"fmt"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/router/query"
	"github.com/ctxtier/ctxtier/gateway/errcode"
)

// Request is a decoded request frame.
type Request struct {
	Header
	// Namespace names the namespace of every key in the frame (empty for PING).
	Namespace string
	// Keys are the keys of GET, EXISTS, LOOKUP, DELETE, DELETE_IF and PIN; KeyErrs[i]
	// is key i's own validation error (nil when well formed).
	Keys    []block.Key
	KeyErrs []error
	// Items are the blocks of a PUT.
	Items []PutItem
	// PinTTL is a PIN's duration.
	PinTTL time.Duration
	// LeaseIDs are a RELEASE's leases.
	LeaseIDs []uint64
	// Route is a ROUTE's query.
	Route *query.Query
	// DescribeFlags are a DESCRIBE's optional flags (describe.go).
	DescribeFlags uint32
	// Retain is a GET's, LOOKUP's or ROUTE's read hint (FlagReadHints), 0
	// without (a ROUTE's is Route.Hints.Retain too).
	Retain time.Duration
	// Session is an END_SESSION's session id.
	Session uint64
	// Sums are a DELETE_IF's checksums, one per key.
	Sums []uint32
}

// DecodeRequest decodes the body of a request frame whose header h was
// accepted by DecodeHeader. The frame was read whole, so an error here is
// about this request only and the connection stays usable. Errors wrap
// errcode.ErrMalformedFrame (an inconsistent body, an unknown opcode) or
// block.ErrTooLarge (more items than lim.MaxBatch). PUT data aliases body.
func DecodeRequest(h Header, body []byte, lim Limits) (*Request, error) {
	req := &Request{Header: h}
	if h.Flags&FlagResponse != 0 || h.Code != errcode.OK {
		return req, fmt.Errorf("%w: a request must have no response flag and code 0", errcode.ErrMalformedFrame)
	}
	if !h.Op.Known() {
		return req, fmt.Errorf("%w: unknown opcode %d", errcode.ErrMalformedFrame, uint8(h.Op))
	}
	if h.Flags&FlagLinearizable != 0 && !h.Op.ReadOp() {
		return req, fmt.Errorf("%w: the linearizable flag on a %s request (only get, exists, lookup and describe read)", errcode.ErrMalformedFrame, h.Op)
	}
	if h.Flags&FlagVerifyAtRest != 0 && h.Op != OpGet {
		return req, fmt.Errorf("%w: the verify-at-rest flag on a %s request (only get)", errcode.ErrMalformedFrame, h.Op)
	}
	if h.Flags&FlagPutHints != 0 && h.Op != OpPut {
		return req, fmt.Errorf("%w: the put-hints flag on a %s request (only put)", errcode.ErrMalformedFrame, h.Op)
	}
	if err := checkSessionFlags(h); err != nil {
		return req, err
	}
	if uint64(len(body)) != uint64(h.Length) {
		return req, fmt.Errorf("%w: body is %d bytes, header says %d", errcode.ErrMalformedFrame, len(body), h.Length)
	}
	if h.Op == OpPing {
		if h.Count != 0 || len(body) != 0 {
			return req, fmt.Errorf("%w: ping carries no items", errcode.ErrMalformedFrame)
		}
		return req, nil
	}
	if h.Op == OpRoute {
		// The hashes or token ids are counted in the body, bounded by the frame.
		if h.Count != 0 {
			return req, fmt.Errorf("%w: a route request has count 0 in its header (%d)", errcode.ErrMalformedFrame, h.Count)
		}
		q, err := DecodeRouteQueryFlags(body, h.Flags)
		req.Namespace = q.Namespace
		if err != nil {
			return req, err
		}
		req.Route = &q
		req.Retain = q.Hints.Retain
		return req, nil
	}
	if h.Count > lim.MaxBatch {
		return req, fmt.Errorf("%w: %d items in one request, the maximum is %d", block.ErrTooLarge, h.Count, lim.MaxBatch)
	}
	if h.Op == OpRelease {
		return req, req.decodeRelease(body)
	}
	if len(body) < 1 || len(body) < 1+int(body[0]) {
		return req, fmt.Errorf("%w: body too short for the namespace", errcode.ErrMalformedFrame)
	}
	n := int(body[0])
	req.Namespace = string(body[1 : 1+n])
	b := body[1+n:]
	switch h.Op {
	case OpPut:
		return req, req.decodePut(b, lim, h.Flags&FlagPutHints != 0, h.Flags&FlagPutSession != 0)
	case OpEndSession:
		return req, req.decodeEndSession(b)
	case OpGet, OpLookup:
		if h.Flags&FlagReadHints != 0 {
			var err error
			if b, err = req.decodeReadHints(b); err != nil {
				return req, err
			}
		}
	case OpPin:
		if len(b) < 8 {
			return req, fmt.Errorf("%w: pin body too short for its TTL", errcode.ErrMalformedFrame)
		}
		ms := le.Uint64(b)
		if ms == 0 || ms > uint64(time.Duration(1<<62)/time.Millisecond) {
			return req, fmt.Errorf("%w: pin TTL %d ms out of range", block.ErrInvalidArgument, ms)
		}
		req.PinTTL = time.Duration(ms) * time.Millisecond
		b = b[8:]
	case OpDescribe:
		return req, req.decodeDescribe(b)
	case OpDeleteIf:
		return req, req.decodeDeleteIf(b)
	}
	return req, req.decodeKeys(b)
}

func (req *Request) decodeKeys(b []byte) error {
	if uint64(len(b)) != uint64(req.Count)*KeySize {
		return fmt.Errorf("%w: %d key bytes for %d keys of %d bytes", errcode.ErrMalformedFrame, len(b), req.Count, KeySize)
	}
	req.Keys = make([]block.Key, req.Count)
	var errs []error
	for i := range req.Keys {
		k, err := decodeKey(req.Namespace, b[i*KeySize:])
		req.Keys[i] = k
		if err != nil {
			if errs == nil {
				errs = make([]error, req.Count)
			}
			errs[i] = err
		}
	}
	req.KeyErrs = errs
	return nil
}

func (req *Request) decodePut(b []byte, lim Limits, hinted, session bool) error {
	req.Items = make([]PutItem, req.Count)
	head := PutItemSize
	switch {
	case session:
		head += PutSessionHintsSize
	case hinted:
		head += PutHintsSize
	}
	for i := range req.Items {
		if len(b) < head {
			return fmt.Errorf("%w: put item %d: %d bytes left, item header needs %d", errcode.ErrMalformedFrame, i, len(b), head)
		}
		it := &req.Items[i]
		f := b[10]
		it.Key = block.Key{Namespace: req.Namespace, Hash: le.Uint64(b), Part: le.Uint16(b[8:]), HasPart: f&KeyHasPart != 0}
		it.Opts = block.PutOptions{
			Priority: b[11], HasPriority: f&KeyHasPriority != 0,
			Sum: le.Uint32(b[12:]), HasSum: true,
			PinTTL: time.Duration(le.Uint32(b[16:])) * time.Millisecond,
			Parent: le.Uint64(b[24:]), HasParent: f&KeyHasParent != 0,
		}
		it.Size = le.Uint32(b[20:])
		shardErr := error(nil)
		if f&KeyHasShard != 0 {
			// The parent field carries the shard; a shard has no parent.
			switch sh := it.Opts.Parent; {
			case f&KeyHasParent != 0:
				shardErr = fmt.Errorf("%w: put item has both the shard and the parent flag", block.ErrInvalidKey)
			case sh == 0 || sh > block.MaxShard:
				shardErr = fmt.Errorf("%w: shard %d out of range 1..%d", block.ErrInvalidKey, sh, block.MaxShard)
			default:
				it.Key.Shard = uint8(sh)
			}
			it.Opts.Parent = 0
		}
		var hintErr error
		if hinted {
			hintErr = decodePutHints(b[PutItemSize:], &it.Opts)
		}
		if session {
			it.Opts.Session = le.Uint64(b[PutItemSize+PutHintsSize:])
		}
		b = b[head:]
		if uint64(it.Size) > uint64(len(b)) {
			return fmt.Errorf("%w: put item %d says %d data bytes, %d left in the frame", errcode.ErrMalformedFrame, i, it.Size, len(b))
		}
		it.Data = b[:it.Size:it.Size]
		b = b[it.Size:]
		switch {
		case f&^(KeyHasPart|KeyHasPriority|KeyHasParent|KeyHasShard) != 0:
			it.Err = fmt.Errorf("%w: put item flags %#02x has unknown bits", block.ErrInvalidKey, f)
		case shardErr != nil:
			it.Err = shardErr
		case hintErr != nil:
			it.Err = fmt.Errorf("put item %d: %w", i, hintErr)
		case !it.Key.HasPart && it.Key.Part != 0:
			it.Err = fmt.Errorf("%w: part %d given without the part flag", block.ErrInvalidKey, it.Key.Part)
		case !it.Opts.HasPriority && it.Opts.Priority != 0:
			it.Err = fmt.Errorf("%w: priority %d given without the priority flag", block.ErrInvalidArgument, it.Opts.Priority)
		case !it.Opts.HasParent && it.Opts.Parent != 0:
			it.Err = fmt.Errorf("%w: parent given without the parent flag", block.ErrInvalidArgument)
		case it.Size > lim.MaxBlockSize:
			it.Err = fmt.Errorf("%w: block of %d bytes exceeds the maximum block size %d", block.ErrTooLarge, it.Size, lim.MaxBlockSize)
		}
	}
	if len(b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes after the last put item", errcode.ErrMalformedFrame, len(b))
	}
	return nil
}

// AppendStatus appends a per-item status: code, message length, message
// (truncated to MaxMessageLen; empty for OK).
func AppendStatus(b []byte, c errcode.Code, msg string) []byte {
	if c == errcode.OK {
		msg = ""
	}
	if len(msg) > MaxMessageLen {
		msg = msg[:MaxMessageLen]
	}
	b = le.AppendUint16(b, uint16(c))
	b = le.AppendUint16(b, uint16(len(msg)))
	return append(b, msg...)
}

// StatusLen is the encoded size of AppendStatus(c, msg).
func StatusLen(c errcode.Code, msg string) int {
	if c == errcode.OK {
		return StatusSize
	}
	return StatusSize + min(len(msg), MaxMessageLen)
}

// Tier bytes in GET metadata.
const (
	TierUnknown uint8 = 0
	TierDRAM    uint8 = 1
	TierNVMe    uint8 = 2
	TierS3      uint8 = 3
)

// TierByte encodes a tier name.
func TierByte(t block.Tier) uint8 {
	switch t {
	case block.TierDRAM:
		return TierDRAM
	case block.TierNVMe:
		return TierNVMe
	case block.TierS3:
		return TierS3
	}
	return TierUnknown
}

// TierName decodes a tier byte ("" when unknown).
func TierName(t uint8) block.Tier {
	switch t {
	case TierDRAM:
		return block.TierDRAM
	case TierNVMe:
		return block.TierNVMe
	case TierS3:
		return block.TierS3
	}
	return ""
}

// AppendGetMeta appends what follows an OK status in a GET response: the
// block's checksum, size and tier (the size bytes of data follow).
func AppendGetMeta(b []byte, sum uint32, size uint32, tier block.Tier) []byte {
	b = le.AppendUint32(b, sum)
	b = le.AppendUint32(b, size)
	return append(b, TierByte(tier), 0, 0, 0)
}
