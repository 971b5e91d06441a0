package s3api

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"hash/crc32"
	"io"
	"net/http"
	"strings"

	"github.com/minio/crc64nvme"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/s3auth"
)

// verifyingBody streams a request body (aws-chunked framing decoded) and
// hashes it as it goes; at its end it checks every digest the client sent
// (x-amz-content-sha256, Content-MD5, x-amz-checksum-* in the headers or
// the trailer) and the length, and returns the first failure in place of
// io.EOF. The object layer deletes what it wrote when a read fails, so a
// bad body leaves nothing behind, as readBody guarantees for whole bodies.
type verifyingBody struct {
	q       *request
	src     io.Reader
	chunked *s3auth.ChunkedReader
	want    int64 // -1: unknown
	n       int64
	sha     hash.Hash // nil unless x-amz-content-sha256 is a digest
	md5     hash.Hash // nil unless Content-MD5 was sent
	sums    map[string]hash.Hash
	done    bool
	err     error
}

// newChecksum returns the hash for an x-amz-checksum-<alg> header.
func newChecksum(alg string) hash.Hash {
	switch alg {
	case "crc32c":
		return crc32.New(crc32.MakeTable(crc32.Castagnoli))
	case "crc32":
		return crc32.NewIEEE()
	case "crc64nvme":
		return crc64nvme.New()
	case "sha1":
		return sha1.New()
	case "sha256":
		return sha256.New()
	}
	return nil
}

// streamBody opens q's body for streaming, at most limit bytes.
func (s *Server) streamBody(q *request, limit int64) (*verifyingBody, error) {
	n, err := bodyLength(q)
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, newErr("MissingContentLength", http.StatusLengthRequired, block.ErrInvalidArgument, "you must provide the Content-Length HTTP header")
	}
	if n > limit {
		return nil, newErr("EntityTooLarge", http.StatusBadRequest, block.ErrTooLarge, "your proposed upload of %d bytes exceeds the maximum allowed size of %d bytes", n, limit)
	}
	v := &verifyingBody{q: q, src: q.r.Body, want: n, sums: map[string]hash.Hash{}}
	if q.auth.Streaming() {
		v.chunked = q.auth.ChunkedBody(q.r.Body, n)
		v.src = v.chunked
	}
	switch q.auth.PayloadHash {
	case s3auth.UnsignedPayload, s3auth.StreamingPayload, s3auth.StreamingTrailer, s3auth.StreamingUnsignedTrailer:
	default:
		v.sha = sha256.New()
	}
	if q.r.Header.Get("Content-Md5") != "" {
		v.md5 = md5.New()
	}
	algs := []string{}
	for name := range q.r.Header {
		if alg, ok := strings.CutPrefix(strings.ToLower(name), "x-amz-checksum-"); ok && alg != "mode" && alg != "type" && alg != "algorithm" {
			algs = append(algs, alg)
		}
	}
	if t, ok := strings.CutPrefix(strings.ToLower(q.auth.Trailer), "x-amz-checksum-"); ok {
		algs = append(algs, t)
	}
	for _, alg := range algs {
		h := newChecksum(alg)
		if h == nil {
			return nil, newErr("InvalidRequest", http.StatusBadRequest, block.ErrInvalidArgument, "checksum algorithm %q is not supported", alg)
		}
		v.sums[alg] = h
	}
	return v, nil
}

func (v *verifyingBody) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if v.done {
		return 0, io.EOF
	}
	if rest := v.want - v.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	var k int
	var err error
	if len(p) > 0 {
		k, err = v.src.Read(p)
	} else {
		err = io.EOF
	}
	v.n += int64(k)
	v.q.in += int64(k)
	for _, h := range []hash.Hash{v.sha, v.md5} {
		if h != nil {
			h.Write(p[:k])
		}
	}
	for _, h := range v.sums {
		h.Write(p[:k])
	}
	if err == io.EOF || (err == nil && v.n == v.want) {
		v.err = v.finish()
		if v.err != nil {
			return k, v.err
		}
		v.done = true
		if k > 0 {
			return k, nil
		}
		return 0, io.EOF
	}
	if err != nil {
		v.err = err
	}
	return k, err
}

// finish drains the framing and checks the length and every digest.
func (v *verifyingBody) finish() error {
	if v.n != v.want {
		return newErr("IncompleteBody", http.StatusBadRequest, block.ErrInvalidArgument, "you did not provide the number of bytes specified by the Content-Length HTTP header")
	}
	if v.chunked != nil {
		if _, err := io.Copy(io.Discard, v.chunked); err != nil {
			return err
		}
	}
	if v.sha != nil {
		if want, _ := hex.DecodeString(v.q.auth.PayloadHash); string(v.sha.Sum(nil)) != string(want) {
			return s3auth.ErrPayloadHash
		}
	}
	if v.md5 != nil {
		want, err := base64.StdEncoding.DecodeString(v.q.r.Header.Get("Content-Md5"))
		if err != nil || len(want) != md5.Size {
			return newErr("InvalidDigest", http.StatusBadRequest, block.ErrInvalidArgument, "the Content-MD5 you specified is not valid")
		}
		if string(v.md5.Sum(nil)) != string(want) {
			return newErr("BadDigest", http.StatusBadRequest, block.ErrChecksum, "the Content-MD5 you specified did not match what we received")
		}
	}
	h := v.q.r.Header
	if v.q.auth.Trailer != "" {
		t := v.chunked.Trailer()
		if t.Get(v.q.auth.Trailer) == "" {
			return newErr("MalformedTrailerError", http.StatusBadRequest, block.ErrInvalidArgument, "the declared trailer %s did not arrive", v.q.auth.Trailer)
		}
		h = h.Clone()
		for k, vs := range t {
			h[k] = vs
		}
	}
	for alg, sum := range v.sums {
		enc := h.Get("X-Amz-Checksum-" + alg)
		want, err := base64.StdEncoding.DecodeString(enc)
		if err != nil || enc == "" {
			return newErr("InvalidArgument", http.StatusBadRequest, block.ErrInvalidArgument, "x-amz-checksum-%s is not valid base64", alg)
		}
		if string(sum.Sum(nil)) != string(want) {
			return newErr("BadDigest", http.StatusBadRequest, block.ErrChecksum, "The %s you specified did not match the calculated checksum.", strings.ToUpper(alg))
		}
	}
	return nil
}

// echoChecksums sets, on a successful upload's response, the checksums the
// client sent (in headers or the trailer) and the server verified, as S3
// returns them.
func (v *verifyingBody) echoChecksums(h http.Header) {
	for alg, sum := range v.sums {
		h.Set("X-Amz-Checksum-"+alg, base64.StdEncoding.EncodeToString(sum.Sum(nil)))
	}
}
