package s3auth

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// maxChunkHeader bounds one chunk header line ("<hex size>;chunk-signature=<64 hex>").
const maxChunkHeader = 256

// ChunkedBody decodes an aws-chunked body (STREAMING-AWS4-HMAC-SHA256-PAYLOAD)
// and verifies every chunk's signature as it goes, each chained to the
// previous one starting from the request's own signature. The chunk
// signatures are computed by the SDK's StreamSigner, whose string to sign
// with an empty header block is exactly S3's chunk string to sign. decoded is
// x-amz-decoded-content-length: the reader fails unless exactly that many
// bytes arrive.
func (a *Auth) ChunkedBody(body io.Reader, decoded int64) io.Reader {
	creds := aws.Credentials{AccessKeyID: a.Credential.AccessKeyID, SecretAccessKey: a.Credential.Secret}
	return &chunkedReader{
		br:      bufio.NewReaderSize(body, 4096),
		signer:  v4.NewStreamSigner(creds, "s3", a.v.cfg.Region, a.signature),
		t:       a.time,
		max:     a.v.cfg.MaxChunkSize,
		remain:  decoded,
		decoded: decoded,
	}
}

type chunkedReader struct {
	br      *bufio.Reader
	signer  *v4.StreamSigner
	t       time.Time
	max     int
	buf     []byte
	chunk   []byte // unread verified bytes
	remain  int64  // decoded bytes still expected
	decoded int64
	done    bool
	err     error
}

func (c *chunkedReader) Read(p []byte) (int, error) {
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

// next reads and verifies one chunk.
func (c *chunkedReader) next() error {
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return fmt.Errorf("%w: body ended before the final chunk", ErrChunk)
		}
		if err == bufio.ErrBufferFull {
			return fmt.Errorf("%w: chunk header too long", ErrChunk)
		}
		return err
	}
	if len(line) > maxChunkHeader || !bytes.HasSuffix(line, []byte("\r\n")) {
		return fmt.Errorf("%w: bad chunk header", ErrChunk)
	}
	sizeHex, sigPart, ok := bytes.Cut(line[:len(line)-2], []byte(";"))
	if !ok || !bytes.HasPrefix(sigPart, []byte("chunk-signature=")) {
		return fmt.Errorf("%w: chunk header %q lacks chunk-signature", ErrChunk, line)
	}
	size, err := strconv.ParseUint(string(sizeHex), 16, 32)
	if err != nil || len(sizeHex) > 8 {
		return fmt.Errorf("%w: chunk size %q", ErrChunk, sizeHex)
	}
	if int(size) > c.max {
		return fmt.Errorf("%w: chunk of %d bytes exceeds %d", ErrChunk, size, c.max)
	}
	if int64(size) > c.remain {
		return fmt.Errorf("%w: chunks exceed x-amz-decoded-content-length %d", ErrChunk, c.decoded)
	}
	sig, err := hex.DecodeString(string(sigPart[len("chunk-signature="):]))
	if err != nil || len(sig) != 32 {
		return fmt.Errorf("%w: chunk signature is not 64 hex digits", ErrChunk)
	}
	if cap(c.buf) < int(size)+2 {
		c.buf = make([]byte, int(size)+2)
	}
	data := c.buf[:int(size)+2]
	if _, err := io.ReadFull(c.br, data); err != nil {
		return fmt.Errorf("%w: body ended inside a chunk", ErrChunk)
	}
	if data[size] != '\r' || data[size+1] != '\n' {
		return fmt.Errorf("%w: chunk data not followed by CRLF", ErrChunk)
	}
	data = data[:size]
	want, err := c.signer.GetSignature(context.Background(), nil, data, c.t)
	if err != nil {
		return err
	}
	if !hmac.Equal(want, sig) {
		return fmt.Errorf("%w: chunk signature", ErrSignature)
	}
	c.remain -= int64(size)
	if size == 0 {
		if c.remain != 0 {
			return fmt.Errorf("%w: %d bytes short of x-amz-decoded-content-length %d", ErrChunk, c.remain, c.decoded)
		}
		// A final CRLF may or may not follow the last chunk.
		if b, err := c.br.Peek(2); err == nil && string(b) == "\r\n" {
			_, _ = c.br.Discard(2)
		}
		c.done = true
		return nil
	}
	c.chunk = data
	return nil
}
