package s3api

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
)

// maxKeyLen is S3's object key limit; longer keys are KeyTooLongError.
const maxKeyLen = 1024

// Object metadata headers (HeadObject and GetObject).
const (
	metaPrefix      = "X-Amz-Meta-Ctx-"
	hdrChecksum     = metaPrefix + "Checksum-Crc32c"
	hdrTier         = metaPrefix + "Tier"
	hdrPriority     = metaPrefix + "Priority"
	hdrPinnedUntil  = metaPrefix + "Pinned-Until"
	hdrLastAccess   = metaPrefix + "Last-Access"
	hdrCreated      = metaPrefix + "Created"
	hdrSize         = metaPrefix + "Size"
	hdrPinSeconds   = metaPrefix + "Pin-Seconds" // PutObject hint
	hdrPutPriority  = metaPrefix + "Priority"    // PutObject hint
	hdrChecksumMode = "X-Amz-Checksum-Mode"
)

// hintHeaders are PutObject's agent hints as user metadata: the HTTP API's
// X-Ctxtier-Reuse, -Retain and -Session, parsed by the same code.
var hintHeaders = httpwire.HintHeaders{Reuse: metaPrefix + "Reuse", Retain: metaPrefix + "Retain", Session: metaPrefix + "Session"}

// objectKey parses the request's object key into a block key. A key that is
// not a block name ("<16 lowercase hex>[.<part>]") is 400 InvalidArgument
// (KeyTooLongError past 1024 bytes): such an object can never exist, and
// saying so is more useful than 404.
func objectKey(q *request) (block.Key, error) {
	if len(q.key) > maxKeyLen {
		return block.Key{}, newErr("KeyTooLongError", http.StatusBadRequest, block.ErrInvalidKey, "your key is too long")
	}
	k, err := block.ParseObjectName(q.bucket, q.key)
	if err != nil {
		return block.Key{}, newErr("InvalidArgument", http.StatusBadRequest, err,
			"object key %q is not a block name: want 16 lowercase hex digits, optionally followed by .<part 0..65535>", q.key)
	}
	return k, nil
}

// etag is a block's entity tag: its CRC-32C. The "-1" suffix is the
// multipart form, which tells clients (s3cmd) not to compare it with an MD5.
func etag(sum uint32) string { return fmt.Sprintf("\"%08x-1\"", sum) }

func crc32cBase64(sum uint32) string {
	return base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, sum))
}

func setObjectHeaders(h http.Header, info block.Info) {
	h.Set("Etag", etag(info.Sum))
	h.Set("Last-Modified", info.Created.UTC().Format(http.TimeFormat))
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Accept-Ranges", "bytes")
	h.Set(hdrSize, strconv.FormatInt(info.Size, 10))
	h.Set(hdrChecksum, fmt.Sprintf("%08x", info.Sum))
	h.Set(hdrTier, string(info.Tier))
	h.Set(hdrPriority, strconv.Itoa(int(info.Priority)))
	h.Set(hdrCreated, info.Created.UTC().Format(time.RFC3339Nano))
	if !info.LastAccess.IsZero() {
		h.Set(hdrLastAccess, info.LastAccess.UTC().Format(time.RFC3339Nano))
	}
	if !info.PinnedUntil.IsZero() {
		h.Set(hdrPinnedUntil, info.PinnedUntil.UTC().Format(time.RFC3339Nano))
	}
}

// preconditions applies If-Match and If-None-Match; done reports that the
// response was written.
func preconditions(q *request, tag string) (bool, error) {
	if m := q.r.Header.Get("If-Match"); m != "" && m != "*" && !etagListHas(m, tag) {
		return true, newErr("PreconditionFailed", http.StatusPreconditionFailed, block.ErrInvalidArgument, "at least one of the pre-conditions you specified did not hold")
	}
	if m := q.r.Header.Get("If-None-Match"); m != "" && (m == "*" || etagListHas(m, tag)) {
		return true, q.writeEmpty(http.StatusNotModified)
	}
	return false, nil
}

func etagListHas(list, tag string) bool {
	for _, t := range strings.Split(list, ",") {
		if strings.TrimSpace(t) == tag || strings.Trim(strings.TrimSpace(t), `"`) == strings.Trim(tag, `"`) {
			return true
		}
	}
	return false
}

func (s *Server) headObject(q *request) error {
	k, err := objectKey(q)
	if err != nil {
		return err
	}
	info, err := s.store.Stat(q.r.Context(), k, ctxstore.ReadOptions{Level: readLevel})
	if err != nil {
		return err
	}
	setObjectHeaders(q.w.Header(), info)
	if done, err := preconditions(q, etag(info.Sum)); done || err != nil {
		return err
	}
	if q.r.Header.Get(hdrChecksumMode) == "ENABLED" {
		q.w.Header().Set("X-Amz-Checksum-Crc32c", crc32cBase64(info.Sum))
	}
	q.w.Header().Set("Content-Length", strconv.FormatInt(info.Size, 10))
	q.status = http.StatusOK
	q.w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) getObject(q *request) error {
	k, err := objectKey(q)
	if err != nil {
		return err
	}
	ref, err := s.store.Get(q.r.Context(), k)
	if err != nil {
		return err
	}
	defer ref.Release()
	info, err := s.store.Stat(q.r.Context(), k, ctxstore.ReadOptions{Level: readLevel})
	if err != nil {
		// Evicted between Get and Stat: the lease still holds the bytes.
		info = block.Info{Key: k, Size: int64(len(ref.Data)), Sum: ref.Sum, Tier: ref.Tier}
	}
	h := q.w.Header()
	setObjectHeaders(h, info)
	if done, err := preconditions(q, etag(ref.Sum)); done || err != nil {
		return err
	}
	data := ref.Data
	status := http.StatusOK
	if rh := q.r.Header.Get("Range"); rh != "" {
		first, last, ok, err := parseRange(rh, int64(len(data)))
		if err != nil {
			h.Set("Content-Range", fmt.Sprintf("bytes */%d", len(data)))
			return err
		}
		if ok {
			h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, len(data)))
			data = data[first : last+1]
			status = http.StatusPartialContent
		}
	}
	if status == http.StatusOK && q.r.Header.Get(hdrChecksumMode) == "ENABLED" {
		h.Set("X-Amz-Checksum-Crc32c", crc32cBase64(ref.Sum))
	}
	h.Set("Content-Length", strconv.Itoa(len(data)))
	q.status = status
	q.w.WriteHeader(status)
	n, err := q.w.Write(data)
	q.out += int64(n)
	if err != nil {
		s.log.Debug("s3 get: client went away", "key", k, "err", err)
	}
	return nil
}

// parseRange parses a single "bytes=" range against size. ok is false for
// forms S3 ignores (several ranges, other units): the whole object is sent.
func parseRange(h string, size int64) (first, last int64, ok bool, err error) {
	spec, found := strings.CutPrefix(h, "bytes=")
	if !found || strings.Contains(spec, ",") {
		return 0, 0, false, nil
	}
	invalid := newErr("InvalidRange", http.StatusRequestedRangeNotSatisfiable, block.ErrInvalidArgument, "the requested range %q is not satisfiable for %d bytes", h, size)
	a, b, found := strings.Cut(strings.TrimSpace(spec), "-")
	if !found {
		return 0, 0, false, nil
	}
	switch {
	case a == "" && b == "":
		return 0, 0, false, nil
	case a == "": // suffix: the last b bytes
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil {
			return 0, 0, false, nil //nolint:nilerr // an unparseable Range is ignored: the whole object (RFC 9110)
		}
		if n == 0 {
			return 0, 0, false, invalid
		}
		return max(size-n, 0), size - 1, true, nil
	}
	first, err1 := strconv.ParseInt(a, 10, 64)
	if err1 != nil {
		return 0, 0, false, nil //nolint:nilerr // an unparseable Range is ignored: the whole object (RFC 9110)
	}
	last = size - 1
	if b != "" {
		l, err := strconv.ParseInt(b, 10, 64)
		if err != nil || l < first {
			return 0, 0, false, nil //nolint:nilerr // an unparseable Range is ignored: the whole object (RFC 9110)
		}
		last = min(l, size-1)
	}
	if first >= size {
		return 0, 0, false, invalid
	}
	return first, last, true, nil
}

func (s *Server) putObject(q *request) error {
	k, err := objectKey(q)
	if err != nil {
		return err
	}
	ns, err := s.store.Namespace(q.bucket)
	if err != nil {
		return err
	}
	var opts block.PutOptions
	if v := q.r.Header.Get(hdrPutPriority); v != "" {
		p, err := strconv.ParseUint(v, 10, 8)
		if err != nil || p > block.MaxPriority {
			return newErr("InvalidArgument", http.StatusBadRequest, block.ErrInvalidArgument, "%s must be 0..%d", hdrPutPriority, block.MaxPriority)
		}
		opts.Priority, opts.HasPriority = uint8(p), true
	}
	if v := q.r.Header.Get(hdrPinSeconds); v != "" {
		p, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return newErr("InvalidArgument", http.StatusBadRequest, block.ErrInvalidArgument, "%s must be a number of seconds", hdrPinSeconds)
		}
		opts.PinTTL = time.Duration(p) * time.Second
	}
	hints, err := objectHints(q.r.Header)
	if err != nil {
		return err
	}
	opts.Reuse, opts.Retain, opts.Session = hints.Reuse, hints.Retain, hints.Session
	limit := min(s.cfg.MaxObjectSize, ns.MaxBlockSize)
	// The body is read only within the node's in-flight budget (a body of
	// unknown length takes the limit).
	need := q.r.ContentLength
	if need < 0 || need > limit {
		need = limit
	}
	release, err := s.cfg.Budget.Acquire(q.r.Context(), need)
	if err != nil {
		return err
	}
	defer release()
	bp, _ := s.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	defer s.bufs.Put(bp)
	data, err := s.readBody(q, limit, *bp, true)
	if err != nil {
		return err
	}
	if cap(data) > cap(*bp) {
		*bp = data[:0]
	}
	if err := s.store.Put(q.r.Context(), k, data, opts); err != nil {
		return err
	}
	// The store computed the checksum; read it back rather than hash twice.
	info, err := s.store.Stat(q.r.Context(), k, ctxstore.ReadOptions{Level: readLevel})
	if err != nil {
		info.Sum = block.Checksum(data) // evicted already: recompute
	}
	h := q.w.Header()
	h.Set("Etag", etag(info.Sum))
	if q.r.Header.Get("X-Amz-Checksum-Crc32c") != "" {
		h.Set("X-Amz-Checksum-Crc32c", crc32cBase64(info.Sum))
	}
	return q.writeEmpty(http.StatusOK)
}

func (s *Server) deleteObject(q *request) error {
	k, err := objectKey(q)
	if err != nil {
		return err
	}
	if err := s.store.Delete(q.r.Context(), k); err != nil && !errors.Is(err, block.ErrNotFound) {
		return err
	}
	// Deleting an absent object succeeds, as in S3.
	return q.writeEmpty(http.StatusNoContent)
}
