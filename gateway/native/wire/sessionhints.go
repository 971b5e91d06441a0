package wire

import (
	"fmt"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
)

// The agent-session hints (hello flag HelloAgentSessions):
//
//   - a GET, LOOKUP or ROUTE with FlagReadHints carries, right after its
//     namespace, a ReadHintsSize record: u32 retain window in milliseconds
//     (1 and up) and four reserved zero bytes. Every block the request
//     touches (ROUTE: the prefix the tier holds) has its retain window
//     re-armed to end that long after the read.
//   - a PUT with FlagPutHints and FlagPutSession carries a
//     PutSessionHintsSize record per item: the PutHintsSize record, then
//     a u64 session id (0: none).
//   - END_SESSION (count 0): namespace, u64 session id (not 0). The answer
//     is a u32, the number of blocks the node released.

// ReadHintsSize is the size of a read's hint record (FlagReadHints).
const ReadHintsSize = 8

// PutSessionHintsSize is the size of a PUT item's hint record with
// FlagPutSession.
const PutSessionHintsSize = PutHintsSize + 8

// checkSessionFlags refuses the session flags where they mean nothing.
func checkSessionFlags(h Header) error {
	if h.Flags&FlagReadHints != 0 && h.Op != OpGet && h.Op != OpLookup && h.Op != OpRoute {
		return fmt.Errorf("%w: the read-hints flag on a %s request (only get, lookup and route)", errcode.ErrMalformedFrame, h.Op)
	}
	if h.Flags&FlagPutSession != 0 && (h.Op != OpPut || h.Flags&FlagPutHints == 0) {
		return fmt.Errorf("%w: the put-session flag on a %s request (only put, with the put-hints flag)", errcode.ErrMalformedFrame, h.Op)
	}
	return nil
}

// AppendReadHints appends a read's hint record: retain in milliseconds,
// rounded up, clamped to the u32.
func AppendReadHints(b []byte, retain time.Duration) []byte {
	ms := (retain + time.Millisecond - 1) / time.Millisecond
	b = le.AppendUint32(b, PinTTLMillis(int64(ms)))
	return le.AppendUint32(b, 0)
}

// decodeReadHints reads the record at the front of b into req.Retain and
// returns the rest. A short body is MalformedFrame; a zero window or
// non-zero reserved bytes are block.ErrInvalidArgument (the whole request).
func (req *Request) decodeReadHints(b []byte) ([]byte, error) {
	if len(b) < ReadHintsSize {
		return b, fmt.Errorf("%w: body too short for the read hint record", errcode.ErrMalformedFrame)
	}
	if le.Uint32(b[4:]) != 0 {
		return b, fmt.Errorf("%w: read hint reserved bytes must be zero", block.ErrInvalidArgument)
	}
	req.Retain = time.Duration(le.Uint32(b)) * time.Millisecond
	if err := block.ValidateRetain(req.Retain); err != nil {
		return b, err
	}
	return b[ReadHintsSize:], nil
}

// AppendPutSession appends the session id that follows an item's
// PutHintsSize record under FlagPutSession.
func AppendPutSession(b []byte, session uint64) []byte { return le.AppendUint64(b, session) }

// AppendEndSession appends an END_SESSION body.
func AppendEndSession(b []byte, ns string, session uint64) []byte {
	return le.AppendUint64(AppendNamespace(b, ns), session)
}

// decodeEndSession reads an END_SESSION body after its namespace.
func (req *Request) decodeEndSession(b []byte) error {
	if req.Count != 0 {
		return fmt.Errorf("%w: an end-session request has count 0 in its header (%d)", errcode.ErrMalformedFrame, req.Count)
	}
	if len(b) != 8 {
		return fmt.Errorf("%w: end-session body has %d bytes after the namespace, want 8", errcode.ErrMalformedFrame, len(b))
	}
	req.Session = le.Uint64(b)
	if req.Session == 0 {
		return fmt.Errorf("%w: session 0 is no session", block.ErrInvalidArgument)
	}
	return nil
}
