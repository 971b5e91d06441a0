package wire

import (
	"fmt"
	"io"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/router/query"
	"github.com/ctxtier/ctxtier/gateway/errcode"
)

// ItemResult is one decoded item of a response.
type ItemResult struct {
	Code    errcode.Code
	Message string
	// Present is EXISTS's answer.
	Present bool
	// Sum, Size and Tier describe a GET block; Data holds its bytes unless
	// Skipped (the destination offered was too small and the bytes were
	// read past).
	Sum     uint32
	Size    uint32
	Tier    uint8
	Data    []byte
	Skipped bool
	// DataSum is the CRC-32C of Data as received, computed while reading
	// (each chunk is summed as it lands, while it is still in cache); the
	// receiver compares it with Sum.
	DataSum uint32
	// Lease is a DESCRIBE item's leased descriptor.
	Lease Lease
}

// Response is a decoded response frame.
type Response struct {
	Header
	// Message is the request-level error message (when Code is not OK).
	Message string
	Items   []ItemResult
	// Present is LOOKUP's leading present count, and END_SESSION's count
	// of released blocks.
	Present uint32
	// Route is a ROUTE's result (Namespace and Hashes are not on the wire).
	Route *query.Result
}

// Dest chooses where GET item i's size bytes go: a slice of at least size
// bytes is filled in place (sliced to size); nil asks for a fresh
// allocation; a shorter non-nil slice skips the bytes (ItemResult.Skipped).
type Dest func(i int, size uint32) []byte

// ReadResponse decodes the body of the response frame h (already accepted by
// DecodeHeader) from r, which must hold exactly h.Length more bytes of this
// frame. GET data is read straight from r into the slices dest picks. An
// error means the stream is broken: the caller must close the connection.
func ReadResponse(r io.Reader, h Header, dest Dest) (*Response, error) {
	br := bodyReader{r: r, left: h.Length}
	resp := &Response{Header: h}
	if h.Flags&FlagResponse == 0 {
		return resp, fmt.Errorf("%w: response without the response flag", errcode.ErrMalformedFrame)
	}
	if h.Code != errcode.OK {
		if h.Count != 0 {
			return resp, fmt.Errorf("%w: failed request carries %d items", errcode.ErrMalformedFrame, h.Count)
		}
		n, err := br.u16()
		if err != nil {
			return resp, err
		}
		if resp.Message, err = br.str(n); err != nil {
			return resp, err
		}
		return resp, br.finish()
	}
	switch h.Op {
	case OpPing:
		if h.Count != 0 {
			return resp, fmt.Errorf("%w: ping response carries items", errcode.ErrMalformedFrame)
		}
		return resp, br.finish()
	case OpLookup, OpEndSession:
		if h.Count != 0 {
			return resp, fmt.Errorf("%w: %s response carries items", errcode.ErrMalformedFrame, h.Op)
		}
		var err error
		if resp.Present, err = br.u32(); err != nil {
			return resp, err
		}
		return resp, br.finish()
	case OpRoute:
		if h.Count != 0 {
			return resp, fmt.Errorf("%w: route response carries items", errcode.ErrMalformedFrame)
		}
		if err := br.readRoute(resp); err != nil {
			return resp, err
		}
		return resp, br.finish()
	case OpPut, OpDelete, OpDeleteIf, OpPin, OpGet, OpExists, OpDescribe, OpRelease:
	default:
		return resp, fmt.Errorf("%w: response for unknown opcode %d", errcode.ErrMalformedFrame, uint8(h.Op))
	}
	// Every item needs at least a status, which bounds the allocation by the body.
	if uint64(h.Count)*StatusSize > uint64(h.Length) {
		return resp, fmt.Errorf("%w: %d items cannot fit in %d bytes", errcode.ErrMalformedFrame, h.Count, h.Length)
	}
	resp.Items = make([]ItemResult, h.Count)
	for i := range resp.Items {
		it := &resp.Items[i]
		c, err := br.u16()
		if err != nil {
			return resp, err
		}
		n, err := br.u16()
		if err != nil {
			return resp, err
		}
		it.Code = errcode.Code(c)
		if n > MaxMessageLen || (it.Code == errcode.OK && n != 0) {
			return resp, fmt.Errorf("%w: item %d: message of %d bytes with code %d", errcode.ErrMalformedFrame, i, n, c)
		}
		if it.Message, err = br.str(n); err != nil {
			return resp, err
		}
		if it.Code != errcode.OK {
			continue
		}
		switch h.Op {
		case OpExists:
			p, err := br.u8()
			if err != nil {
				return resp, err
			}
			if p > 1 {
				return resp, fmt.Errorf("%w: item %d: presence byte %d", errcode.ErrMalformedFrame, i, p)
			}
			it.Present = p == 1
		case OpGet:
			if err := br.getItem(i, it, dest); err != nil {
				return resp, err
			}
		case OpDescribe:
			if err := br.describeItem(i, it); err != nil {
				return resp, err
			}
		}
	}
	return resp, br.finish()
}

// bodyReader reads a frame body, refusing to read past its end.
type bodyReader struct {
	r       io.Reader
	left    uint32
	scratch [GetMetaSize]byte
}

func (b *bodyReader) read(p []byte) error {
	if uint64(len(p)) > uint64(b.left) {
		return fmt.Errorf("%w: response body ends %d bytes early", errcode.ErrMalformedFrame, uint64(len(p))-uint64(b.left))
	}
	if _, err := io.ReadFull(b.r, p); err != nil {
		return fmt.Errorf("%w: reading response: %w", errcode.ErrMalformedFrame, err)
	}
	b.left -= uint32(len(p))
	return nil
}

func (b *bodyReader) u8() (uint8, error) {
	err := b.read(b.scratch[:1])
	return b.scratch[0], err
}

func (b *bodyReader) u16() (uint16, error) {
	err := b.read(b.scratch[:2])
	return le.Uint16(b.scratch[:]), err
}

func (b *bodyReader) u32() (uint32, error) {
	err := b.read(b.scratch[:4])
	return le.Uint32(b.scratch[:]), err
}

func (b *bodyReader) str(n uint16) (string, error) {
	if n == 0 {
		return "", nil
	}
	if uint32(n) > b.left {
		return "", fmt.Errorf("%w: message of %d bytes past the body end", errcode.ErrMalformedFrame, n)
	}
	p := make([]byte, n)
	err := b.read(p)
	return string(p), err
}

func (b *bodyReader) getItem(i int, it *ItemResult, dest Dest) error {
	if err := b.read(b.scratch[:GetMetaSize]); err != nil {
		return err
	}
	it.Sum = le.Uint32(b.scratch[0:])
	it.Size = le.Uint32(b.scratch[4:])
	it.Tier = b.scratch[8]
	if it.Size > b.left {
		return fmt.Errorf("%w: item %d: block of %d bytes past the body end (%d left)", errcode.ErrMalformedFrame, i, it.Size, b.left)
	}
	var dst []byte
	if dest != nil {
		dst = dest(i, it.Size)
	}
	switch {
	case dst == nil:
		dst = make([]byte, it.Size)
	case uint64(len(dst)) < uint64(it.Size):
		it.Skipped = true
		return b.skip(it.Size)
	}
	it.Data = dst[:it.Size]
	return b.readSum(it)
}

// readChunk bounds how much block data is read before it is checksummed,
// so the checksum reads the bytes from cache rather than memory.
const readChunk = 128 << 10

// readSum reads it.Data and computes it.DataSum chunk by chunk as it arrives.
func (b *bodyReader) readSum(it *ItemResult) error {
	p := it.Data
	if uint64(len(p)) > uint64(b.left) {
		return fmt.Errorf("%w: response body ends %d bytes early", errcode.ErrMalformedFrame, uint64(len(p))-uint64(b.left))
	}
	var sum uint32
	for off := 0; off < len(p); {
		n, err := b.r.Read(p[off:min(off+readChunk, len(p))])
		if n > 0 {
			sum = block.UpdateChecksum(sum, p[off:off+n])
			off += n
		}
		if err != nil && off < len(p) {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("%w: reading response: %w", errcode.ErrMalformedFrame, err)
		}
	}
	b.left -= uint32(len(p))
	it.DataSum = sum
	return nil
}

func (b *bodyReader) skip(n uint32) error {
	if n > b.left {
		return fmt.Errorf("%w: skip past the body end", errcode.ErrMalformedFrame)
	}
	if _, err := io.CopyN(io.Discard, b.r, int64(n)); err != nil {
		return fmt.Errorf("%w: reading response: %w", errcode.ErrMalformedFrame, err)
	}
	b.left -= n
	return nil
}

func (b *bodyReader) finish() error {
	if b.left != 0 {
		return fmt.Errorf("%w: %d trailing bytes in the response body", errcode.ErrMalformedFrame, b.left)
	}
	return nil
}

// AppendErrorBody appends the body of a failed request's response: the
// message length and message (truncated to MaxMessageLen).
func AppendErrorBody(b []byte, msg string) []byte {
	if len(msg) > MaxMessageLen {
		msg = msg[:MaxMessageLen]
	}
	b = le.AppendUint16(b, uint16(len(msg)))
	return append(b, msg...)
}

// skipBytes is the Dest that reads past every GET block.
func skipBytes(int, uint32) []byte { return []byte{} }

// ReadAnswer reads the next response frame of a pipelined connection from
// r: it decodes the header (against maxFrame), asks match for the request
// with the frame's id (its opcode, item count and GET destination; ok
// false when the connection has no such request) and decodes the body
// into it. It checks that the answer's opcode is the request's and that a
// successful answer has one result per item. A frame for no request is
// an error: a fatal one the server could not attribute (its code and
// message), or a corrupt stream. Any error means the stream is broken and
// the connection must close; h is the header when it was decoded.
func ReadAnswer(r io.Reader, maxFrame uint32, match func(id uint64) (op Op, count uint32, dest Dest, ok bool)) (h Header, resp *Response, err error) {
	var hb [HeaderSize]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return Header{}, nil, err
	}
	if h, err = DecodeHeader(hb[:], maxFrame); err != nil {
		return Header{}, nil, err
	}
	op, count, dest, ok := match(h.ID)
	if !ok {
		msg := fmt.Sprintf("response for unknown request id %d (code %s)", h.ID, h.Code)
		if h.Code == errcode.OK {
			return h, nil, errcode.MalformedFrame.Err(msg)
		}
		if resp, err := ReadResponse(r, h, skipBytes); err == nil {
			msg = resp.Message
		}
		return h, nil, h.Code.Err(msg)
	}
	if h.Op != op {
		return h, nil, fmt.Errorf("%w: response opcode %s for a %s request", errcode.ErrMalformedFrame, h.Op, op)
	}
	if resp, err = ReadResponse(r, h, dest); err != nil {
		return h, nil, err
	}
	if h.Code == errcode.OK && resp.Items != nil && len(resp.Items) != int(count) {
		return h, nil, fmt.Errorf("%w: %d results for %d items", errcode.ErrMalformedFrame, len(resp.Items), count)
	}
	return h, resp, nil
}
