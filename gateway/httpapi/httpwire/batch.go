package httpwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/textproto"
	"strconv"
	"strings"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
)

// The batch framing is multipart/mixed (RFC 2046): one part per block. A
// batch-put part carries X-Ctxtier-Hash, Content-Length and optionally the
// put headers (X-Ctxtier-Crc32c, -Priority, -Pin-Ttl, -Parent) and the block
// bytes as its body. A batch-get part carries X-Ctxtier-Hash and either
// Content-Length, X-Ctxtier-Crc32c and X-Ctxtier-Tier with the bytes, or
// X-Ctxtier-Error-Code with a JSON ErrorBody.

// Limits bound what a batch decoder accepts. A zero field means no limit
// (MaxBlockSize: block.HardMaxBlockSize).
type Limits struct {
	MaxItems      int
	MaxBlockSize  int64
	MaxTotalBytes int64
}

func (l Limits) blockMax() int64 {
	if l.MaxBlockSize <= 0 || l.MaxBlockSize > block.HardMaxBlockSize {
		return block.HardMaxBlockSize
	}
	return l.MaxBlockSize
}

// Part is one block of a batch put.
type Part struct {
	Key  block.Key
	Data []byte
	Opts block.PutOptions
}

// GetPart is one block of a batch-get response: Data, Sum and Tier when Err is nil.
type GetPart struct {
	Key  block.Key
	Data []byte
	Sum  uint32
	Tier block.Tier
	Err  error
}

// NewBoundary returns a fresh random multipart boundary.
func NewBoundary() string { return multipart.NewWriter(io.Discard).Boundary() }

// MixedContentType is the Content-Type of a batch body with boundary b.
func MixedContentType(b string) string { return ContentTypeMixed + "; boundary=" + b }

func malformed(format string, a ...any) error {
	return fmt.Errorf("%w: malformed multipart batch: %s", block.ErrInvalidArgument, fmt.Sprintf(format, a...))
}

// partErr classifies an error met while reading multipart framing: the body
// reader's own errors (a size limit, a dropped connection) pass through; the
// rest is malformed input.
func partErr(i int, err error) error {
	var re readErr
	if errors.As(err, &re) {
		return re.error
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return malformed("part %d: truncated body", i)
	}
	return malformed("part %d: %v", i, err)
}

// tailReader remembers the last bytes of the body. mime/multipart reports a
// body cut inside a part's header as a clean io.EOF, so the decoders accept
// the end of a batch only when the closing delimiter was really read: either
// the body stopped right after it (optionally followed by line breaks), or
// the reader stopped at it with bytes left unread (an epilogue).
type tailReader struct {
	r     io.Reader
	delim []byte
	tail  []byte
	eof   bool
}

func newTailReader(r io.Reader, boundary string) *tailReader {
	d := []byte("--" + boundary + "--")
	return &tailReader{r: r, delim: d, tail: make([]byte, 0, 2*len(d)+8)}
}

func (t *tailReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		keep := cap(t.tail)
		if n >= keep {
			t.tail = append(t.tail[:0], p[n-keep:n]...)
		} else {
			if len(t.tail)+n > keep {
				drop := len(t.tail) + n - keep
				t.tail = append(t.tail[:0], t.tail[drop:]...)
			}
			t.tail = append(t.tail, p[:n]...)
		}
	}
	if err == io.EOF {
		t.eof = true
	} else if err != nil {
		err = readErr{err}
	}
	return n, err
}

// closed reports whether the closing delimiter ended the body.
func (t *tailReader) closed() bool {
	if !t.eof {
		return true
	}
	return bytes.HasSuffix(bytes.TrimRight(t.tail, " \t\r\n"), t.delim)
}

// readPartData reads one part's bytes, at most max of them, preallocating
// from a Content-Length header when present. It never allocates more than max.
func readPartData(p *multipart.Part, i int, max int64) ([]byte, error) {
	if cl := p.Header.Get("Content-Length"); cl != "" {
		n, err := strconv.ParseInt(cl, 10, 64)
		if err != nil || n < 0 {
			return nil, malformed("part %d: Content-Length %q", i, cl)
		}
		if n > max {
			return nil, fmt.Errorf("%w: part %d: %d bytes exceeds the limit of %d", block.ErrTooLarge, i, n, max)
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(p, buf); err != nil {
			return nil, partErr(i, err)
		}
		var one [1]byte
		if m, err := p.Read(one[:]); m > 0 {
			return nil, malformed("part %d: body longer than its Content-Length %d", i, n)
		} else if err != nil && !errors.Is(err, io.EOF) {
			return nil, partErr(i, err)
		}
		return buf, nil
	}
	data, err := io.ReadAll(io.LimitReader(p, max+1))
	if err != nil {
		return nil, partErr(i, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w: part %d: more than %d bytes", block.ErrTooLarge, i, max)
	}
	return data, nil
}

// ReadBatchPut decodes a batch-put body of namespace ns. It reads the whole
// body before returning, so a malformed, truncated or oversized batch fails
// as a whole and nothing of it is stored. Errors wrap block.ErrInvalidArgument
// (framing, headers), block.ErrInvalidKey (a hash) or block.ErrTooLarge (a
// limit); errors of r itself pass through unchanged.
func ReadBatchPut(r io.Reader, boundary, ns string, lim Limits) ([]Part, error) {
	if boundary == "" {
		return nil, malformed("missing boundary parameter")
	}
	tr := newTailReader(r, boundary)
	mr := multipart.NewReader(tr, boundary)
	var parts []Part
	var total int64
	for i := 0; ; i++ {
		p, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			if !tr.closed() {
				return nil, malformed("part %d: truncated body (no closing delimiter)", i)
			}
			break
		}
		if err != nil {
			return nil, partErr(i, err)
		}
		if lim.MaxItems > 0 && len(parts) >= lim.MaxItems {
			return nil, fmt.Errorf("%w: batch has more than %d items", block.ErrTooLarge, lim.MaxItems)
		}
		name := p.Header.Get(HeaderHash)
		if name == "" {
			return nil, malformed("part %d: missing %s header", i, HeaderHash)
		}
		key, err := block.ParseObjectName(ns, name)
		if err != nil {
			return nil, fmt.Errorf("part %d: %w", i, err)
		}
		opts, err := ParsePutOptions(p.Header)
		if err != nil {
			return nil, fmt.Errorf("part %d (%s): %w", i, name, err)
		}
		max := lim.blockMax()
		if lim.MaxTotalBytes > 0 && lim.MaxTotalBytes-total < max {
			max = lim.MaxTotalBytes - total
		}
		data, err := readPartData(p, i, max)
		if err != nil {
			if errors.Is(err, block.ErrTooLarge) && max < lim.blockMax() {
				return nil, fmt.Errorf("%w: batch exceeds the limit of %d bytes in total", block.ErrTooLarge, lim.MaxTotalBytes)
			}
			return nil, err
		}
		total += int64(len(data))
		parts = append(parts, Part{Key: key, Data: data, Opts: opts})
	}
	return parts, nil
}

// EncodeBatchPut frames parts as a batch-put body with the given boundary. The
// returned reader points at the parts' bytes without copying them; size is
// its exact length, for Content-Length. All keys should share one namespace
// (the URL's); only their object names are sent.
func EncodeBatchPut(boundary string, parts []Part) (body io.Reader, size int64) {
	readers := make([]io.Reader, 0, 2*len(parts)+1)
	var hdr strings.Builder
	for i, p := range parts {
		hdr.Reset()
		if i > 0 {
			hdr.WriteString("\r\n")
		}
		hdr.WriteString("--" + boundary + "\r\n")
		h := textproto.MIMEHeader{}
		h.Set(HeaderHash, p.Key.ObjectName())
		h.Set("Content-Length", strconv.Itoa(len(p.Data)))
		h.Set("Content-Type", ContentTypeBinary)
		SetPutOptions(h, p.Opts)
		writeHeader(&hdr, h)
		hdr.WriteString("\r\n")
		s := hdr.String()
		readers = append(readers, strings.NewReader(s), bytes.NewReader(p.Data))
		size += int64(len(s) + len(p.Data))
	}
	end := "--" + boundary + "--\r\n"
	if len(parts) > 0 {
		end = "\r\n" + end
	}
	readers = append(readers, strings.NewReader(end))
	size += int64(len(end))
	return io.MultiReader(readers...), size
}

func writeHeader(b *strings.Builder, h textproto.MIMEHeader) {
	for k, vs := range h {
		for _, v := range vs {
			b.WriteString(k + ": " + v + "\r\n")
		}
	}
}

// GetPartHeader is the header of a successful batch-get part.
func GetPartHeader(key block.Key, size int, sum uint32, tier block.Tier) textproto.MIMEHeader {
	h := textproto.MIMEHeader{}
	h.Set(HeaderHash, key.ObjectName())
	h.Set("Content-Type", ContentTypeBinary)
	h.Set("Content-Length", strconv.Itoa(size))
	h.Set(HeaderCRC, FormatSum(sum))
	if tier != "" {
		h.Set(HeaderTier, string(tier))
	}
	return h
}

// ErrorPart returns the header and body of a failed batch-get part.
func ErrorPart(key block.Key, err error) (textproto.MIMEHeader, []byte) {
	code := errcode.Of(err)
	h := textproto.MIMEHeader{}
	h.Set(HeaderHash, key.ObjectName())
	h.Set("Content-Type", ContentTypeJSON)
	h.Set(HeaderErrorCode, code.String())
	body, _ := json.Marshal(ErrorBody{Code: code.String(), Message: err.Error()})
	return h, body
}

// maxErrorBody bounds the JSON of a failed part.
const maxErrorBody = 64 << 10

// ReadBatchGet decodes a batch-get response of namespace ns. Every block's
// bytes are verified against its checksum header; a mismatch is that item's
// block.ErrChecksum (its bytes are dropped), as is a failed item's error
// mapped back through errcode. Framing errors fail the whole response.
func ReadBatchGet(r io.Reader, boundary, ns string, lim Limits) ([]GetPart, error) {
	if boundary == "" {
		return nil, malformed("missing boundary parameter")
	}
	tr := newTailReader(r, boundary)
	mr := multipart.NewReader(tr, boundary)
	var parts []GetPart
	var total int64
	for i := 0; ; i++ {
		p, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			if !tr.closed() {
				return nil, malformed("part %d: truncated body (no closing delimiter)", i)
			}
			break
		}
		if err != nil {
			return nil, partErr(i, err)
		}
		if lim.MaxItems > 0 && len(parts) >= lim.MaxItems {
			return nil, fmt.Errorf("%w: response has more than %d items", block.ErrTooLarge, lim.MaxItems)
		}
		name := p.Header.Get(HeaderHash)
		key, err := block.ParseObjectName(ns, name)
		if err != nil {
			return nil, malformed("part %d: %v", i, err)
		}
		if code := p.Header.Get(HeaderErrorCode); code != "" {
			b, err := io.ReadAll(io.LimitReader(p, maxErrorBody))
			if err != nil {
				return nil, partErr(i, err)
			}
			var eb ErrorBody
			msg := code
			if json.Unmarshal(b, &eb) == nil && eb.Message != "" {
				msg = eb.Message
			}
			c := errcode.FromName(code)
			if c == errcode.OK {
				c = errcode.Internal
			}
			parts = append(parts, GetPart{Key: key, Err: c.Err(msg)})
			continue
		}
		sum, err := ParseSum(p.Header.Get(HeaderCRC))
		if err != nil {
			return nil, malformed("part %d: %v", i, err)
		}
		max := lim.blockMax()
		if lim.MaxTotalBytes > 0 && lim.MaxTotalBytes-total < max {
			max = lim.MaxTotalBytes - total
		}
		data, err := readPartData(p, i, max)
		if err != nil {
			return nil, err
		}
		total += int64(len(data))
		gp := GetPart{Key: key, Data: data, Sum: sum, Tier: block.Tier(p.Header.Get(HeaderTier))}
		if got := block.Checksum(data); got != sum {
			gp = GetPart{Key: key, Err: fmt.Errorf("%w: %s: header says %08x, bytes are %08x", block.ErrChecksum, key, sum, got)}
		}
		parts = append(parts, gp)
	}
	return parts, nil
}
