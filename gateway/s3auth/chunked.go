package s3auth

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/ctxtier/ctxtier/internal/sigv4"
)

const (
	// maxChunkHeader bounds one chunk header line ("<hex size>;chunk-signature=<64 hex>").
	maxChunkHeader = 256
	// maxTrailer bounds the trailing header section (one checksum and a signature).
	maxTrailer = 1024
	// trailerSigHeader carries the trailer's signature in StreamingTrailer bodies.
	trailerSigHeader = "x-amz-trailer-signature"
)

// ChunkedReader decodes an aws-chunked body. For the signed modes it
// verifies every chunk's signature as it goes, each chained to the previous
// one starting from the request's own signature; the chunk signatures are
// computed by the SDK's StreamSigner, whose string to sign with an empty
// header block is exactly S3's chunk string to sign. For the trailer modes it
// reads the trailing headers after the last chunk (and, signed, verifies
// x-amz-trailer-signature); Trailer returns them once Read has returned
// io.EOF. The caller verifies the checksum they carry against the bytes.
type ChunkedReader struct {
	a        *Auth
	br       *bufio.Reader
	signer   *v4.StreamSigner // nil for unsigned chunks
	prev     []byte           // the last verified chunk signature
	trailer  bool
	max      int
	buf      []byte
	chunk    []byte // unread verified bytes
	remain   int64  // decoded bytes still expected
	decoded  int64
	trailers http.Header
	done     bool
	err      error
}

// ChunkedBody decodes body according to the request's payload mode
// (StreamingPayload, StreamingTrailer or StreamingUnsignedTrailer). decoded
// is x-amz-decoded-content-length: the reader fails unless exactly that many
// bytes arrive.
func (a *Auth) ChunkedBody(body io.Reader, decoded int64) *ChunkedReader {
	c := &ChunkedReader{
		a:       a,
		br:      bufio.NewReaderSize(body, 4096),
		max:     a.v.cfg.MaxChunkSize,
		remain:  decoded,
		decoded: decoded,
		prev:    a.signature,
		trailer: a.Trailer != "",
	}
	if a.PayloadHash != StreamingUnsignedTrailer {
		creds := aws.Credentials{AccessKeyID: a.Credential.AccessKeyID, SecretAccessKey: a.Credential.Secret}
		c.signer = v4.NewStreamSigner(creds, "s3", a.v.cfg.Region, a.signature)
	}
	return c
}

// Trailer returns the verified trailing headers (nil for StreamingPayload,
// or before the body has been read to io.EOF).
func (c *ChunkedReader) Trailer() http.Header {
	if !c.done {
		return nil
	}
	return c.trailers
}

// Read returns verified decoded bytes.
func (c *ChunkedReader) Read(p []byte) (int, error) {
	for len(c.chunk) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		if c.done {
			return 0, io.EOF
		}
		c.err = c.next()
	}
	n := copy(p, c.chunk)
	c.chunk = c.chunk[n:]
	return n, nil
}

// readLine reads one line ending in '\n', at most limit bytes.
func (c *ChunkedReader) readLine(limit int, what string) ([]byte, error) {
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			if len(line) == 0 {
				return nil, io.EOF
			}
			return nil, fmt.Errorf("%w: body ended inside %s", ErrChunk, what)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("%w: %s too long", ErrChunk, what)
		}
		return nil, err
	}
	if len(line) > limit {
		return nil, fmt.Errorf("%w: %s too long", ErrChunk, what)
	}
	return line, nil
}

// next reads and verifies one chunk (and, after the last, the trailer).
// Errors never quote the chunk header: it carries a signature.
func (c *ChunkedReader) next() error {
	line, err := c.readLine(maxChunkHeader, "a chunk header")
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: body ended before the final chunk", ErrChunk)
	}
	if err != nil {
		return err
	}
	if !bytes.HasSuffix(line, []byte("\r\n")) {
		return fmt.Errorf("%w: chunk header does not end in CRLF", ErrChunk)
	}
	sizeHex, sigPart, hasExt := bytes.Cut(line[:len(line)-2], []byte(";"))
	var sig []byte
	if c.signer != nil {
		if !hasExt || !bytes.HasPrefix(sigPart, []byte("chunk-signature=")) {
			return fmt.Errorf("%w: chunk header lacks chunk-signature", ErrChunk)
		}
		sig, err = hex.DecodeString(string(sigPart[len("chunk-signature="):]))
		if err != nil || len(sig) != sha256.Size {
			return fmt.Errorf("%w: chunk signature is not 64 hex digits", ErrChunk)
		}
	} else if hasExt {
		return fmt.Errorf("%w: unsigned chunks carry no extensions", ErrChunk)
	}
	size, err := strconv.ParseUint(string(sizeHex), 16, 32)
	if err != nil || len(sizeHex) > 8 {
		return fmt.Errorf("%w: chunk size is not 1..8 hex digits", ErrChunk)
	}
	if int(size) > c.max {
		return fmt.Errorf("%w: chunk of %d bytes exceeds %d", ErrChunk, size, c.max)
	}
	if int64(size) > c.remain {
		return fmt.Errorf("%w: chunks exceed x-amz-decoded-content-length %d", ErrChunk, c.decoded)
	}
	var data []byte
	if size > 0 {
		if cap(c.buf) < int(size)+2 {
			c.buf = make([]byte, int(size)+2)
		}
		data = c.buf[:int(size)+2]
		if _, err := io.ReadFull(c.br, data); err != nil {
			return fmt.Errorf("%w: body ended inside a chunk", ErrChunk)
		}
		if data[size] != '\r' || data[size+1] != '\n' {
			return fmt.Errorf("%w: chunk data not followed by CRLF", ErrChunk)
		}
		data = data[:size]
	}
	if c.signer != nil {
		want, err := c.signer.GetSignature(context.Background(), nil, data, c.a.time)
		if err != nil {
			return err
		}
		if !hmac.Equal(want, sig) {
			return fmt.Errorf("%w: chunk signature", ErrSignature)
		}
		c.prev = want
	}
	c.remain -= int64(size)
	if size > 0 {
		c.chunk = data
		return nil
	}
	if c.remain != 0 {
		return fmt.Errorf("%w: %d bytes short of x-amz-decoded-content-length %d", ErrChunk, c.remain, c.decoded)
	}
	if c.trailer {
		if err := c.readTrailer(); err != nil {
			return err
		}
	} else if b, err := c.br.Peek(2); err == nil && string(b) == "\r\n" {
		// A final CRLF may or may not follow the last chunk.
		_, _ = c.br.Discard(2)
	}
	c.done = true
	return nil
}

// readTrailer reads the trailing headers: "name:value" lines (CRLF or LF),
// the declared checksum exactly once, then for the signed mode
// x-amz-trailer-signature, ended by an empty line or the end of the body.
func (c *ChunkedReader) readTrailer() error {
	signed := c.signer != nil
	hdrs := http.Header{}
	var canon []byte // "name:value\n" per trailing header, the signed form
	var sig []byte
	complete := func() bool { return len(hdrs) > 0 && (!signed || sig != nil) }
	total := 0
	for {
		line, err := c.readLine(maxTrailer, "the trailer")
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if total += len(line); total > maxTrailer {
			return fmt.Errorf("%w: trailer longer than %d bytes", ErrTrailer, maxTrailer)
		}
		s := strings.TrimSuffix(strings.TrimSuffix(string(line), "\n"), "\r")
		if s == "" {
			if complete() {
				break
			}
			continue
		}
		name, val, ok := strings.Cut(s, ":")
		if !ok {
			return fmt.Errorf("%w: trailer line is not name:value", ErrTrailer)
		}
		name, val = strings.ToLower(strings.TrimSpace(name)), strings.TrimSpace(val)
		if val == "" {
			return fmt.Errorf("%w: trailing header %q has no value", ErrTrailer, printable(name))
		}
		switch {
		case name == trailerSigHeader && signed && sig == nil && len(hdrs) > 0:
			if sig, err = hex.DecodeString(val); err != nil || len(sig) != sha256.Size {
				return fmt.Errorf("%w: %s is not 64 hex digits", ErrTrailer, trailerSigHeader)
			}
		case name == c.a.Trailer && sig == nil && len(hdrs) == 0:
			hdrs.Set(name, val)
			canon = append(canon, name+":"+val+"\n"...)
		default:
			return fmt.Errorf("%w: unexpected trailing header %q (x-amz-trailer declared %q)", ErrTrailer, printable(name), c.a.Trailer)
		}
	}
	if !complete() {
		return fmt.Errorf("%w: the body ended without the declared %s trailer", ErrTrailer, c.a.Trailer)
	}
	if signed {
		if want := c.trailerSignature(canon); !hmac.Equal(want, sig) {
			return fmt.Errorf("%w: trailer signature", ErrSignature)
		}
	}
	c.trailers = hdrs
	return nil
}

// trailerSignature is the signature of the trailing headers: the SigV4
// signing key over "AWS4-HMAC-SHA256-TRAILER", the request time, the
// credential scope, the last chunk's signature and the SHA-256 of the
// headers' canonical form. The SDK's StreamSigner has no trailer form.
func (c *ChunkedReader) trailerSignature(canon []byte) []byte {
	date := c.a.time.Format(dateFormat)
	region := c.a.v.cfg.Region
	sts := sigv4.StringToSign("AWS4-HMAC-SHA256-TRAILER", c.a.time, sigv4.Scope(date, region, "s3"),
		hex.EncodeToString(c.prev), sigv4.HashHex(canon))
	return sigv4.HMAC(sigv4.SigningKey(c.a.Credential.Secret, date, region, "s3"), []byte(sts))
}
