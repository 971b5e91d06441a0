package s3api

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/minio/crc64nvme"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/s3auth"
)

// bodyLength returns the number of body bytes the request will deliver
// (x-amz-decoded-content-length for aws-chunked bodies), or -1 when unknown.
func bodyLength(q *request) (int64, error) {
	if q.auth.Streaming() {
		v := q.r.Header.Get("X-Amz-Decoded-Content-Length")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, newErr("MissingContentLength", http.StatusLengthRequired, block.ErrInvalidArgument,
				"aws-chunked uploads need a valid x-amz-decoded-content-length (got %q)", v)
		}
		return n, nil
	}
	return q.r.ContentLength, nil
}

// readBody reads the whole body into buf (grown as needed), at most limit
// bytes, decoding aws-chunked framing, and verifies every digest the client
// sent: x-amz-content-sha256, Content-MD5 and x-amz-checksum-*. Nothing is
// stored before this returns nil, so a bad body changes nothing.
func (s *Server) readBody(q *request, limit int64, buf []byte, needLength bool) ([]byte, error) {
	n, err := bodyLength(q)
	if err != nil {
		return nil, err
	}
	if n < 0 && needLength {
		return nil, newErr("MissingContentLength", http.StatusLengthRequired, block.ErrInvalidArgument, "you must provide the Content-Length HTTP header")
	}
	if n > limit {
		return nil, newErr("EntityTooLarge", http.StatusBadRequest, block.ErrTooLarge, "your proposed upload of %d bytes exceeds the maximum allowed size of %d bytes", n, limit)
	}
	var src io.Reader = q.r.Body
	var chunked *s3auth.ChunkedReader
	if q.auth.Streaming() {
		chunked = q.auth.ChunkedBody(q.r.Body, n)
		src = chunked
	}
	if n >= 0 {
		if int64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(src, buf); err != nil {
			if err == io.ErrUnexpectedEOF || err == io.EOF {
				return nil, newErr("IncompleteBody", http.StatusBadRequest, block.ErrInvalidArgument, "you did not provide the number of bytes specified by the Content-Length HTTP header")
			}
			return nil, err
		}
		if chunked != nil {
			// Drain to the final zero-length chunk (and the trailer).
			if _, err := io.Copy(io.Discard, src); err != nil {
				return nil, err
			}
		}
	} else {
		b, err := io.ReadAll(io.LimitReader(src, limit+1))
		if err != nil {
			return nil, err
		}
		if int64(len(b)) > limit {
			return nil, newErr("EntityTooLarge", http.StatusBadRequest, block.ErrTooLarge, "body exceeds %d bytes", limit)
		}
		buf = b
	}
	q.in += int64(len(buf))
	if err := q.auth.CheckPayload(buf); err != nil {
		return nil, err
	}
	if err := checkDigests(q.r.Header, buf); err != nil {
		return nil, err
	}
	if q.auth.Trailer != "" {
		// The chunked reader verified the trailer's form (and signature);
		// its checksum is checked against the bytes like a header's.
		t := chunked.Trailer()
		if t.Get(q.auth.Trailer) == "" {
			return nil, newErr("MalformedTrailerError", http.StatusBadRequest, block.ErrInvalidArgument, "the declared trailer %s did not arrive", q.auth.Trailer)
		}
		if err := checkDigests(t, buf); err != nil {
			return nil, err
		}
	}
	return buf, nil
}

// checkDigests verifies Content-MD5 and the x-amz-checksum-* headers.
func checkDigests(h http.Header, b []byte) error {
	if v := h.Get("Content-Md5"); v != "" {
		want, err := base64.StdEncoding.DecodeString(v)
		if err != nil || len(want) != md5.Size {
			return newErr("InvalidDigest", http.StatusBadRequest, block.ErrInvalidArgument, "the Content-MD5 you specified is not valid")
		}
		if sum := md5.Sum(b); string(sum[:]) != string(want) {
			return newErr("BadDigest", http.StatusBadRequest, block.ErrChecksum, "the Content-MD5 you specified did not match what we received")
		}
	}
	for name, vals := range h {
		lname := strings.ToLower(name)
		alg, ok := strings.CutPrefix(lname, "x-amz-checksum-")
		if !ok || alg == "mode" || alg == "type" || alg == "algorithm" {
			continue
		}
		want, err := base64.StdEncoding.DecodeString(vals[0])
		if err != nil {
			return newErr("InvalidArgument", http.StatusBadRequest, block.ErrInvalidArgument, "%s is not valid base64", lname)
		}
		var got []byte
		switch alg {
		case "crc32c":
			got = binary.BigEndian.AppendUint32(nil, block.Checksum(b))
		case "crc32":
			got = binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(b))
		case "crc64nvme":
			got = binary.BigEndian.AppendUint64(nil, crc64nvme.Checksum(b))
		case "sha1":
			s := sha1.Sum(b)
			got = s[:]
		case "sha256":
			s := sha256.Sum256(b)
			got = s[:]
		default:
			return newErr("InvalidRequest", http.StatusBadRequest, block.ErrInvalidArgument, "checksum algorithm %q is not supported", alg)
		}
		if string(got) != string(want) {
			return newErr("BadDigest", http.StatusBadRequest, block.ErrChecksum, "the %s you specified did not match the calculated checksum", alg)
		}
	}
	return nil
}
