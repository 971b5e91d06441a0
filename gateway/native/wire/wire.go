// Package wire is the codec of ctxtier's native block protocol: the
// handshake, the 24-byte frame header, and the request and response bodies of
// every opcode. It only encodes and decodes bytes; the server
// (gateway/native) and the Go client (gateway/client) own the sockets.
// docs/protocol.md is the specification this package implements.
//
// All integers are little-endian. Decoders never trust a length they have not
// bounded, and every decode error wraps a sentinel that gateway/errcode maps
// to a wire code (errcode.ErrMalformedFrame, block.ErrTooLarge,
// block.ErrInvalidKey, ...).
package wire

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
)

// Protocol constants.
const (
	// Version is the newest protocol version this package speaks: 2, whose
	// handshake carries credentials (see auth.go). Servers also accept
	// Version1 while authentication is off.
	Version uint16 = 2
	// Version1 is the original handshake, without credentials.
	Version1 uint16 = 1
	// HelloSize is the size of the client's handshake.
	HelloSize = 16
	// HelloReplySize is the size of the server's handshake reply.
	HelloReplySize = 32
	// HeaderSize is the size of every frame header.
	HeaderSize = 24
	// KeySize is the encoded size of one key (GET, EXISTS, LOOKUP, DELETE, PIN items).
	KeySize = 12
	// PutItemSize is the encoded size of a PUT item's header (its data follows).
	PutItemSize = 32
	// StatusSize is the fixed part of a per-item status (code + message length).
	StatusSize = 4
	// GetMetaSize is what follows an OK status in a GET response, before the data.
	GetMetaSize = 12
	// MaxMessageLen bounds an error message on the wire.
	MaxMessageLen = 1024
	// FrameOverhead is the room a frame needs beyond its block payloads for
	// one item: header, namespace and item header, rounded up generously.
	FrameOverhead = 4096
)

// Magic opens both handshake messages.
var Magic = [4]byte{'C', 'T', 'X', 'N'}

// Op is a frame's opcode.
type Op uint8

// Opcodes. Never renumber.
const (
	OpPut    Op = 1
	OpGet    Op = 2
	OpExists Op = 3
	OpLookup Op = 4
	OpDelete Op = 5
	OpPin    Op = 6
	OpPing   Op = 7
	// OpDescribe and OpRelease are the direct-read descriptor leases of
	// co-located clients (describe.go).
	OpDescribe Op = 8
	OpRelease  Op = 9
	// OpRoute is the KV-aware router's query (route.go).
	OpRoute Op = 10
	// OpEndSession ends an agent session (sessionhints.go): count 0, the
	// body a namespace and a u64 session id; the answer, like LOOKUP's,
	// a u32 (the blocks released). Sent only where the hello reply
	// echoed HelloAgentSessions.
	OpEndSession Op = 11
	// OpDeleteIf deletes each key only while the server holds the bytes
	// whose CRC-32C the item names (deleteif.go): a node's shard cleanup
	// never removes a newer version put under the same key since. A
	// server older than it answers MalformedFrame without closing.
	OpDeleteIf Op = 12
)

// Known reports whether o is an opcode of this version.
func (o Op) Known() bool { return o >= OpPut && o <= OpDeleteIf }

// String names the opcode (metrics label and logs).
func (o Op) String() string {
	switch o {
	case OpPut:
		return "put"
	case OpGet:
		return "get"
	case OpExists:
		return "exists"
	case OpLookup:
		return "lookup"
	case OpDelete:
		return "delete"
	case OpPin:
		return "pin"
	case OpPing:
		return "ping"
	case OpDescribe:
		return "describe"
	case OpRelease:
		return "release"
	case OpRoute:
		return "route"
	case OpEndSession:
		return "end_session"
	case OpDeleteIf:
		return "delete_if"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Frame flags.
const (
	// FlagResponse marks a frame sent by the server.
	FlagResponse uint8 = 1 << 0
	// FlagLinearizable asks for a linearizable read (GET, EXISTS, LOOKUP
	// and DESCRIBE requests only): the server first makes its index hold
	// every write acknowledged before the request, through any node of
	// the cluster. Without it a read answers from the node's own index.
	FlagLinearizable uint8 = 1 << 1
	// FlagVerifyAtRest asks the server to verify each block of a GET
	// request at rest before sending it (GET only), even on a connection
	// whose hello declared HelloVerifiesGets. A client sends it when a
	// block it received failed its CRC-32C check, and only to a server that
	// echoed HelloVerifiesGets (an older server closes the connection on
	// an unknown frame flag): a block corrupt at rest is then dropped and
	// answered as missing, and one that only went wrong on the way arrives
	// intact.
	FlagVerifyAtRest uint8 = 1 << 2
	// FlagPutHints marks a PUT whose every item header is followed by a
	// PutHintsSize hint record (agent hints: reuse, retain window), before
	// the item's data. A client sends it only where the hello reply echoed
	// HelloPutHints (an older server closes the connection on an unknown
	// frame flag).
	FlagPutHints uint8 = 1 << 3
	// FlagReadHints marks a GET, LOOKUP or ROUTE whose namespace is followed by
	// a ReadHintsSize record: the caller's retain window (sessionhints.go).
	// Sent only where the hello reply echoed HelloAgentSessions.
	FlagReadHints uint8 = 1 << 4
	// FlagPutSession, beside FlagPutHints on a PUT, extends every item's
	// hint record by a u64 session id (PutSessionHintsSize in all). Sent
	// only where the hello reply echoed HelloAgentSessions.
	FlagPutSession uint8 = 1 << 5
	flagsKnown           = FlagResponse | FlagLinearizable | FlagVerifyAtRest | FlagPutHints | FlagReadHints | FlagPutSession
)

// ReadOp reports whether o reads the block index, so it may carry
// FlagLinearizable.
func (o Op) ReadOp() bool {
	return o == OpGet || o == OpExists || o == OpLookup || o == OpDescribe
}

// Key flags (byte 10 of a key or put item).
const (
	KeyHasPart     uint8 = 1 << 0
	KeyHasPriority uint8 = 1 << 1 // PUT items only
	KeyHasParent   uint8 = 1 << 2 // PUT items only
	// KeyHasShard marks a node-to-node shard key (block.Key.Shard != 0). In a
	// 12-byte key the shard is byte 11 (the pad byte otherwise); in a PUT item
	// it is the low byte of the parent field, which then carries no parent.
	KeyHasShard uint8 = 1 << 3
)

var le = binary.LittleEndian

// Hello flags (the client's handshake, either version).
const (
	// HelloVerifiesGets declares that the client checks every GET block it
	// receives against the CRC-32C in the response (the one recorded at
	// put time) and never uses a block that fails; on a failure it reads
	// the block again with FlagVerifyAtRest. A server that knows the flag
	// echoes it in its reply and then lets its DRAM tier skip the at-rest
	// verification of that connection's GETs: the client's check covers the
	// bytes end to end. A client that sets it MUST verify. A server older
	// than the flag refuses the hello (code MalformedFrame) and closes the
	// connection; the client then connects again without it.
	HelloVerifiesGets uint16 = 1 << 0
	// HelloPutHints asks whether the server reads PUT hint records
	// (FlagPutHints); a server that does echoes it. It promises nothing of
	// the client. A server older than it refuses the hello (MalformedFrame)
	// and the client connects again without it.
	HelloPutHints uint16 = 1 << 1
	// HelloAgentSessions asks whether the server reads read hints
	// (FlagReadHints), session ids on puts (FlagPutSession) and
	// OpEndSession; a server that does echoes it. A server older than it
	// refuses the hello (MalformedFrame) and the client connects again
	// without it.
	HelloAgentSessions uint16 = 1 << 2
	helloFlagsKnown           = HelloVerifiesGets | HelloPutHints | HelloAgentSessions
)

// Hello is the client's handshake.
type Hello struct {
	Version uint16
	Flags   uint16
}

// AppendHello appends the client handshake for version v with hello flags.
func AppendHello(b []byte, v, flags uint16) []byte {
	b = append(b, Magic[:]...)
	b = le.AppendUint16(b, v)
	b = le.AppendUint16(b, flags)
	return le.AppendUint64(b, 0) // reserved
}

// DecodeHello parses a client handshake. A wrong magic, unknown flags or
// non-zero reserved bytes are ErrMalformedFrame; the version is returned as
// sent, for the server to accept or refuse.
func DecodeHello(b []byte) (Hello, error) {
	if len(b) < HelloSize {
		return Hello{}, fmt.Errorf("%w: handshake is %d bytes, want %d", errcode.ErrMalformedFrame, len(b), HelloSize)
	}
	if [4]byte(b[0:4]) != Magic {
		return Hello{}, fmt.Errorf("%w: bad handshake magic %q", errcode.ErrMalformedFrame, b[0:4])
	}
	h := Hello{Version: le.Uint16(b[4:]), Flags: le.Uint16(b[6:])}
	if h.Flags&^helloFlagsKnown != 0 {
		return Hello{}, fmt.Errorf("%w: unknown handshake flags %#04x", errcode.ErrMalformedFrame, h.Flags)
	}
	if le.Uint64(b[8:]) != 0 {
		return Hello{}, fmt.Errorf("%w: handshake reserved bytes must be zero", errcode.ErrMalformedFrame)
	}
	return h, nil
}

// Limits are what the server announces in its handshake reply.
type Limits struct {
	// MaxFrameSize bounds a request frame, header included.
	MaxFrameSize uint32
	// MaxBlockSize bounds one block's bytes.
	MaxBlockSize uint32
	// MaxBatch bounds the items of one request.
	MaxBatch uint32
	// MaxInFlight is how many responses the server queues per connection
	// before it stops reading requests.
	MaxInFlight uint32
	// MaxResponseSize bounds a response frame, header included; a GET batch
	// whose blocks do not fit answers TooLarge for the blocks past the limit.
	MaxResponseSize uint32
}

// HelloReply is the server's handshake reply.
type HelloReply struct {
	Version uint16
	Code    errcode.Code
	Limits  Limits
	// Flags are the hello flags the server accepted and honours (an echo of
	// the client's known ones); 0 from a server older than hello flags.
	Flags uint16
}

// AppendHelloReply appends the server's handshake reply.
func AppendHelloReply(b []byte, r HelloReply) []byte {
	b = append(b, Magic[:]...)
	b = le.AppendUint16(b, r.Version)
	b = le.AppendUint16(b, uint16(r.Code))
	b = le.AppendUint32(b, r.Limits.MaxFrameSize)
	b = le.AppendUint32(b, r.Limits.MaxBlockSize)
	b = le.AppendUint32(b, r.Limits.MaxBatch)
	b = le.AppendUint32(b, r.Limits.MaxInFlight)
	b = le.AppendUint32(b, r.Limits.MaxResponseSize)
	b = le.AppendUint16(b, r.Flags)
	return le.AppendUint16(b, 0) // reserved
}

// DecodeHelloReply parses the server's handshake reply.
func DecodeHelloReply(b []byte) (HelloReply, error) {
	if len(b) < HelloReplySize {
		return HelloReply{}, fmt.Errorf("%w: handshake reply is %d bytes, want %d", errcode.ErrMalformedFrame, len(b), HelloReplySize)
	}
	if [4]byte(b[0:4]) != Magic {
		return HelloReply{}, fmt.Errorf("%w: bad handshake reply magic %q", errcode.ErrMalformedFrame, b[0:4])
	}
	r := HelloReply{
		Version: le.Uint16(b[4:]),
		Code:    errcode.Code(le.Uint16(b[6:])),
		Limits: Limits{
			MaxFrameSize:    le.Uint32(b[8:]),
			MaxBlockSize:    le.Uint32(b[12:]),
			MaxBatch:        le.Uint32(b[16:]),
			MaxInFlight:     le.Uint32(b[20:]),
			MaxResponseSize: le.Uint32(b[24:]),
		},
		Flags: le.Uint16(b[28:]),
	}
	return r, nil
}

// Header is a frame header. The frame is the 24 header bytes followed by
// Length body bytes.
type Header struct {
	Length uint32       // body bytes after the header
	Op     Op           // opcode
	Flags  uint8        // FlagResponse on server frames
	Code   errcode.Code // request-level result (responses); 0 in requests
	ID     uint64       // request id, echoed by the response
	Count  uint32       // items in the body
}

// AppendHeader appends h's 24 bytes.
func AppendHeader(b []byte, h Header) []byte {
	b = le.AppendUint32(b, h.Length)
	b = append(b, byte(h.Op), h.Flags)
	b = le.AppendUint16(b, uint16(h.Code))
	b = le.AppendUint64(b, h.ID)
	b = le.AppendUint32(b, h.Count)
	return le.AppendUint32(b, 0)
}

// PutHeader writes h into b[:HeaderSize].
func PutHeader(b []byte, h Header) {
	_ = b[HeaderSize-1]
	le.PutUint32(b[0:], h.Length)
	b[4], b[5] = byte(h.Op), h.Flags
	le.PutUint16(b[6:], uint16(h.Code))
	le.PutUint64(b[8:], h.ID)
	le.PutUint32(b[16:], h.Count)
	le.PutUint32(b[20:], 0)
}

// DecodeHeader parses a frame header and checks it against maxFrame (the
// largest frame, header included, the receiver accepts). Errors are fatal
// for the connection: after a bad header the stream cannot be resynchronised.
// An unknown opcode is not an error here (the frame can be skipped).
func DecodeHeader(b []byte, maxFrame uint32) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: header is %d bytes, want %d", errcode.ErrMalformedFrame, len(b), HeaderSize)
	}
	h := Header{
		Length: le.Uint32(b[0:]),
		Op:     Op(b[4]),
		Flags:  b[5],
		Code:   errcode.Code(le.Uint16(b[6:])),
		ID:     le.Uint64(b[8:]),
		Count:  le.Uint32(b[16:]),
	}
	if h.Flags&^flagsKnown != 0 {
		return h, fmt.Errorf("%w: unknown header flags %#02x", errcode.ErrMalformedFrame, h.Flags)
	}
	if r := le.Uint32(b[20:]); r != 0 {
		return h, fmt.Errorf("%w: reserved header bytes are %#08x, want 0", errcode.ErrMalformedFrame, r)
	}
	if uint64(h.Length)+HeaderSize > uint64(maxFrame) {
		return h, fmt.Errorf("%w: frame of %d bytes exceeds the maximum frame size %d", block.ErrTooLarge, uint64(h.Length)+HeaderSize, maxFrame)
	}
	return h, nil
}

// AppendKey appends k's hash and part (12 bytes; the namespace travels once per frame).
func AppendKey(b []byte, k block.Key) []byte {
	b = le.AppendUint64(b, k.Hash)
	b = le.AppendUint16(b, k.Part)
	var f uint8
	if k.HasPart {
		f |= KeyHasPart
	}
	if k.Shard != 0 {
		f |= KeyHasShard
	}
	return append(b, f, k.Shard)
}

// decodeKey parses a 12-byte key. A part without the part flag, unknown key
// flags, a non-zero pad byte without the shard flag, or a shard flag with
// shard 0 (or above block.MaxShard) are ErrInvalidKey.
func decodeKey(ns string, b []byte) (block.Key, error) {
	f := b[10]
	k := block.Key{Namespace: ns, Hash: le.Uint64(b), Part: le.Uint16(b[8:]), HasPart: f&KeyHasPart != 0}
	if f&^(KeyHasPart|KeyHasShard) != 0 {
		return k, fmt.Errorf("%w: key flags %#02x (only the part and shard flags are defined)", block.ErrInvalidKey, f)
	}
	if !k.HasPart && k.Part != 0 {
		return k, fmt.Errorf("%w: part %d given without the part flag", block.ErrInvalidKey, k.Part)
	}
	if f&KeyHasShard == 0 {
		if b[11] != 0 {
			return k, fmt.Errorf("%w: key pad %#02x must be zero without the shard flag", block.ErrInvalidKey, b[11])
		}
		return k, nil
	}
	if b[11] == 0 || b[11] > block.MaxShard {
		return k, fmt.Errorf("%w: shard %d out of range 1..%d", block.ErrInvalidKey, b[11], block.MaxShard)
	}
	k.Shard = b[11]
	return k, nil
}

// AppendNamespace appends a namespace name (u8 length + bytes).
func AppendNamespace(b []byte, ns string) []byte {
	b = append(b, byte(len(ns)))
	return append(b, ns...)
}

// PutItem is one block of a PUT request.
type PutItem struct {
	Key  block.Key
	Opts block.PutOptions // Sum is always set on the wire (HasSum true)
	Size uint32
	// Data aliases the request body; it is valid only as long as the body buffer.
	Data []byte
	// Err is the item's own validation error (bad key, bad flags, too
	// large); the item must not be stored and answers with errcode.Of(Err).
	Err error
}

// AppendPutItem appends a PUT item's 32-byte header (the data is sent after it).
func AppendPutItem(b []byte, k block.Key, sum uint32, size uint32, o block.PutOptions) []byte {
	b = le.AppendUint64(b, k.Hash)
	b = le.AppendUint16(b, k.Part)
	var f uint8
	if k.HasPart {
		f |= KeyHasPart
	}
	if o.HasPriority {
		f |= KeyHasPriority
	}
	parent := o.Parent
	if k.Shard != 0 {
		f |= KeyHasShard
		parent = uint64(k.Shard) // a shard has no parent: the field carries the shard
	} else if o.HasParent {
		f |= KeyHasParent
	}
	b = append(b, f, o.Priority)
	b = le.AppendUint32(b, sum)
	b = le.AppendUint32(b, PinTTLMillis(o.PinTTL.Milliseconds()))
	b = le.AppendUint32(b, size)
	return le.AppendUint64(b, parent)
}

// PutHintsSize is the size of a PUT item's hint record (FlagPutHints).
const PutHintsSize = 8

// AppendPutHints appends a PUT item's hint record: u8 reuse (block.Reuse),
// three reserved zero bytes, u32 retain window in milliseconds (rounded up,
// so a window below a millisecond is not lost; clamped to the u32).
func AppendPutHints(b []byte, o block.PutOptions) []byte {
	b = append(b, byte(o.Reuse), 0, 0, 0)
	ms := (o.Retain + time.Millisecond - 1) / time.Millisecond
	return le.AppendUint32(b, PinTTLMillis(int64(ms)))
}

// decodePutHints reads a hint record into o; an undefined reuse value,
// non-zero reserved bytes or a retain window on a reuse-never block are
// block.ErrInvalidArgument (the item's own error).
func decodePutHints(b []byte, o *block.PutOptions) error {
	o.Reuse = block.Reuse(b[0])
	o.Retain = time.Duration(le.Uint32(b[4:])) * time.Millisecond
	if b[1]|b[2]|b[3] != 0 {
		return fmt.Errorf("%w: put hint reserved bytes must be zero", block.ErrInvalidArgument)
	}
	return o.ValidateHints()
}

// PinTTLMillis clamps a millisecond TTL into the u32 PUT field.
func PinTTLMillis(ms int64) uint32 {
	switch {
	case ms <= 0:
		return 0
	case ms > int64(^uint32(0)):
		return ^uint32(0)
	}
	return uint32(ms)
}

// CheckPutItem is a client's check of one block before it is sent in a
// PUT: no larger than the server's MaxBlockSize (block.ErrTooLarge), and
// hints in range.
func CheckPutItem(l Limits, k block.Key, size int, o block.PutOptions) error {
	if uint64(size) > uint64(l.MaxBlockSize) {
		return fmt.Errorf("%w: %s: %d bytes exceeds the server's maximum block size %d", block.ErrTooLarge, k, size, l.MaxBlockSize)
	}
	if err := o.ValidateHints(); err != nil {
		return fmt.Errorf("%s: %w", k, err)
	}
	return nil
}

// CheckPutItems is a client's check of a batch put's n items before they
// are framed: errs[i] is set to item i's CheckPutItem refusal; send lists
// the items that passed, in order; hinted and sessions say whether any of
// them has hints or a session id (the frames then carry hint records, see
// PutItemHead). item(i) returns item i's key, size and options.
func CheckPutItems(l Limits, n int, item func(i int) (block.Key, int, block.PutOptions), errs []error) (send []int, hinted, sessions bool) {
	send = make([]int, 0, n)
	for i := range n {
		k, size, o := item(i)
		if errs[i] = CheckPutItem(l, k, size, o); errs[i] != nil {
			continue
		}
		hinted = hinted || o.HasHints()
		sessions = sessions || o.Session != 0
		send = append(send, i)
	}
	return send, hinted, sessions
}

// PutItemHead is the bytes a PUT item takes in its frame besides the
// block's: the item record, and the hint record (with the session id) when
// the frame carries them.
func PutItemHead(hinted, sessions bool) int64 {
	switch {
	case sessions:
		return PutItemSize + PutSessionHintsSize
	case hinted:
		return PutItemSize + PutHintsSize
	}
	return PutItemSize
}
