package s3api

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/object"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
)

// Object namespaces (block.KindObject: every bucket created through S3):
// keys are arbitrary S3 object keys, stored through ctxstore/object.

// maxUserMeta is S3's limit on the x-amz-meta-* headers of one object
// (names and values together).
const maxUserMeta = 2 << 10

// storedHeaders are the request headers kept with an object and returned
// with it, beside x-amz-meta-*.
var storedHeaders = []string{"Content-Type", "Content-Encoding", "Content-Disposition", "Content-Language", "Cache-Control", "Expires"}

// defaultContentType is what S3 returns for an object stored without one.
const defaultContentType = "binary/octet-stream"

// byKind dispatches an object operation to the block handler or the object
// handler by the bucket's kind (404 NoSuchBucket when it has none).
func (s *Server) byKind(blockOp, objectOp func(*request) error) func(*request) error {
	return func(q *request) error {
		ns, err := s.store.Namespace(q.bucket)
		if err != nil {
			return err
		}
		if ns.IsObject() {
			return objectOp(q)
		}
		return blockOp(q)
	}
}

// objectsOnly serves an operation only object namespaces have (multipart,
// copy); on a block namespace it is 501 NotImplemented, as before they existed.
func (s *Server) objectsOnly(h func(*request) error) func(*request) error {
	return s.byKind(notImplemented, h)
}

// s3Key checks an object key of an object namespace: at most 1024 bytes of
// UTF-8, no NUL, no ".." path segment.
func s3Key(key string) ([]byte, error) {
	switch {
	case len(key) > maxKeyLen:
		return nil, newErr("KeyTooLongError", http.StatusBadRequest, block.ErrInvalidKey, "Your key is too long")
	case !utf8.ValidString(key):
		return nil, newErr("InvalidArgument", http.StatusBadRequest, block.ErrInvalidKey, "object key is not valid UTF-8")
	case strings.ContainsRune(key, 0):
		return nil, newErr("InvalidArgument", http.StatusBadRequest, block.ErrInvalidKey, "object key contains NUL")
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == ".." {
			return nil, newErr("InvalidArgument", http.StatusBadRequest, block.ErrInvalidKey, "object key %q has a \"..\" path segment", key)
		}
	}
	return []byte(key), nil
}

// objectHeaders collects the headers a PUT (or a multipart create) stores.
func objectHeaders(h http.Header) ([]object.Header, error) {
	var out []object.Header
	for _, name := range storedHeaders {
		if v := h.Get(name); v != "" {
			out = append(out, object.Header{Name: name, Value: v})
		}
	}
	size := 0
	for name, vs := range h {
		if !strings.HasPrefix(name, "X-Amz-Meta-") {
			continue
		}
		v := strings.Join(vs, ",")
		size += len(name) - len("X-Amz-Meta-") + len(v)
		// S3 keeps metadata names lower-case, and clients expect them so.
		out = append(out, object.Header{Name: strings.ToLower(name), Value: v})
	}
	if size > maxUserMeta {
		return nil, newErr("MetadataTooLarge", http.StatusBadRequest, block.ErrTooLarge, "Your metadata headers exceed the maximum allowed metadata size")
	}
	return out, nil
}

// objectHints reads the agent hints of an object namespace's PutObject or
// CreateMultipartUpload from its user metadata (hintHeaders, the same
// parser as a block namespace's PutObject and the HTTP API); they are kept
// as user metadata too (objectHeaders). An invalid one is 400
// InvalidArgument naming the header.
func objectHints(h http.Header) (block.PutOptions, error) {
	var o block.PutOptions
	if err := httpwire.ParseHints(h, hintHeaders, &o); err != nil {
		return o, newErr("InvalidArgument", http.StatusBadRequest, err, "%v", err)
	}
	return o, nil
}

// setMetaHeaders writes an object's metadata into a response.
func setMetaHeaders(h http.Header, m object.Meta) {
	h.Set("Etag", m.ETag)
	h.Set("Last-Modified", m.Modified.UTC().Format(http.TimeFormat))
	h.Set("Accept-Ranges", "bytes")
	h.Set("Content-Type", defaultContentType)
	for _, x := range m.Headers {
		// Set directly: user metadata names stay lower-case, as S3 sends them.
		h[x.Name] = []string{x.Value}
	}
	if m.Parts > 0 {
		h.Set("X-Amz-Mp-Parts-Count", strconv.Itoa(m.Parts))
	}
}

// readConditions applies If-Match, If-Unmodified-Since, If-None-Match and
// If-Modified-Since to a GET or HEAD (RFC 9110's order, as S3 does); done
// reports that the response was written.
func readConditions(q *request, m object.Meta) (bool, error) {
	h := q.r.Header
	failed := newErr("PreconditionFailed", http.StatusPreconditionFailed, object.ErrPreconditionFailed, "At least one of the pre-conditions you specified did not hold.")
	mod := m.Modified.Truncate(time.Second)
	if v := h.Get("If-Match"); v != "" {
		if !etagListHas(v, m.ETag) && v != "*" {
			return true, failed
		}
	} else if t, err := http.ParseTime(h.Get("If-Unmodified-Since")); err == nil && mod.After(t) {
		return true, failed
	}
	if v := h.Get("If-None-Match"); v != "" {
		if v == "*" || etagListHas(v, m.ETag) {
			return true, q.writeEmpty(http.StatusNotModified)
		}
	} else if t, err := http.ParseTime(h.Get("If-Modified-Since")); err == nil && !mod.After(t) {
		return true, q.writeEmpty(http.StatusNotModified)
	}
	return false, nil
}

// responseOverrides applies GET's response-content-* query parameters.
func responseOverrides(q *request) {
	qs := q.r.URL.Query()
	for param, hdr := range map[string]string{
		"response-content-type": "Content-Type", "response-content-language": "Content-Language",
		"response-expires": "Expires", "response-cache-control": "Cache-Control",
		"response-content-disposition": "Content-Disposition", "response-content-encoding": "Content-Encoding",
	} {
		if qs.Has(param) {
			q.w.Header().Set(hdr, qs.Get(param))
		}
	}
}

// openForRead opens the request's object and applies the read conditions
// and Range; it returns the byte range to send and the status.
func (s *Server) openForRead(q *request) (o *object.Object, first, n int64, status int, done bool, err error) {
	key, err := s3Key(q.key)
	if err != nil {
		return nil, 0, 0, 0, true, err
	}
	pn := 0
	if v := q.r.URL.Query().Get("partNumber"); v != "" {
		if pn, err = partNumber(v); err != nil {
			return nil, 0, 0, 0, true, err
		}
	}
	o, err = s.objs.OpenObject(q.r.Context(), q.bucket, key, readLevel)
	if err != nil {
		return nil, 0, 0, 0, true, err
	}
	h := q.w.Header()
	setMetaHeaders(h, o.Meta)
	if done, err := readConditions(q, o.Meta); done || err != nil {
		return nil, 0, 0, 0, true, err
	}
	first, n, status = 0, o.Size, http.StatusOK
	if pn > 0 {
		if q.r.Header.Get("Range") != "" {
			return nil, 0, 0, 0, true, newErr("InvalidRequest", http.StatusBadRequest, block.ErrInvalidArgument, "Cannot specify both Range header and partNumber query parameter")
		}
		a, l, ok := o.PartRange(pn)
		if !ok {
			return nil, 0, 0, 0, true, newErr("InvalidPartNumber", http.StatusRequestedRangeNotSatisfiable, block.ErrInvalidArgument, "The requested partnumber is not satisfiable.")
		}
		first, n, status = a, l, http.StatusPartialContent
		if l > 0 {
			h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", a, a+l-1, o.Size))
		}
		h.Set("Content-Length", strconv.FormatInt(n, 10))
		return o, first, n, status, false, nil
	}
	// A Range on an empty object is ignored (200, no bytes), as S3 does.
	if rh := q.r.Header.Get("Range"); rh != "" && o.Size > 0 {
		a, b, ok, err := parseRange(rh, o.Size)
		if err != nil {
			h.Set("Content-Range", fmt.Sprintf("bytes */%d", o.Size))
			return nil, 0, 0, 0, true, err
		}
		if ok {
			h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", a, b, o.Size))
			first, n, status = a, b-a+1, http.StatusPartialContent
		}
	}
	h.Set("Content-Length", strconv.FormatInt(n, 10))
	return o, first, n, status, false, nil
}

func (s *Server) headObjectNS(q *request) error {
	_, _, _, status, done, err := s.openForRead(q)
	if done || err != nil {
		return err
	}
	q.status = status
	q.w.WriteHeader(status)
	return nil
}

// readerVerifies reports whether a GetObject declares that its client
// checks every byte of the body against a digest of its own and reads
// again without the declaration on a mismatch (httpwire.HeaderReaderVerifies
// with an object digest's value): the data blocks may then be read without
// the DRAM tier's at-rest check.
func readerVerifies(h http.Header) bool {
	switch h.Get(httpwire.HeaderReaderVerifies) {
	case httpwire.ReaderVerifiesXXH3, httpwire.ReaderVerifiesSHA256:
		return true
	}
	return false
}

func (s *Server) getObjectNS(q *request) error {
	base := q.w.Header().Clone()
	for try := 0; ; try++ {
		o, first, n, status, done, err := s.openForRead(q)
		if done || err != nil {
			return err
		}
		responseOverrides(q)
		q.status = status
		lw := &lazyStatus{w: q.w, status: status}
		wrote, err := o.WriteRange(q.r.Context(), lw, first, n, object.RangeOptions{ReaderVerifies: readerVerifies(q.r.Header)})
		if err != nil && !lw.sent && try < 2 && errors.Is(err, object.ErrObjectChanged) {
			// Replaced before its first byte was sent: answer with the
			// version that replaced it (its own headers only).
			h := q.w.Header()
			clear(h)
			maps.Copy(h, base)
			continue
		}
		if err != nil && !lw.sent {
			// Nothing sent yet (a data block is gone for good, e.g. evicted
			// from the last tier): answer the error, not a 200 whose body
			// ends at once.
			h := q.w.Header()
			clear(h)
			maps.Copy(h, base)
			q.status = 0
			return err
		}
		if !lw.sent {
			q.w.WriteHeader(status)
		}
		q.out += wrote
		if err != nil {
			// The status is sent: the short body (Content-Length was promised)
			// makes the server close the connection, so the client sees a
			// failed download, never bytes of two versions.
			s.log.Debug("s3 get: stream ended early", "bucket", q.bucket, "key", q.key, "err", err)
		}
		return nil
	}
}

// lazyStatus sends the response's status with its first byte, so a GET
// whose version was replaced before then can still start over.
type lazyStatus struct {
	w      http.ResponseWriter
	status int
	sent   bool
}

func (l *lazyStatus) Write(p []byte) (int, error) {
	if !l.sent {
		l.sent = true
		l.w.WriteHeader(l.status)
	}
	return l.w.Write(p)
}

// writeConditions reads a PUT's or Complete's If-None-Match / If-Match.
func writeConditions(q *request) (ifAbsent bool, ifMatch string, err error) {
	if v := q.r.Header.Get("If-None-Match"); v != "" {
		if v != "*" {
			// AWS's answer: only "*" is supported on writes.
			return false, "", newErr("NotImplemented", http.StatusNotImplemented, block.ErrInvalidArgument, "A header you provided implies functionality that is not implemented.")
		}
		ifAbsent = true
	}
	return ifAbsent, q.r.Header.Get("If-Match"), nil
}

func (s *Server) putObjectNS(q *request) error {
	key, err := s3Key(q.key)
	if err != nil {
		return err
	}
	ifAbsent, ifMatch, err := writeConditions(q)
	if err != nil {
		return err
	}
	hdrs, err := objectHeaders(q.r.Header)
	if err != nil {
		return err
	}
	hints, err := objectHints(q.r.Header)
	if err != nil {
		return err
	}
	body, err := s.streamBody(q, s.cfg.MaxPutSize)
	if err != nil {
		return err
	}
	m, err := s.objs.PutObject(q.r.Context(), q.bucket, key, body, object.PutObjectOptions{IfAbsent: ifAbsent, IfMatch: ifMatch, Limit: s.cfg.MaxPutSize, Headers: hdrs, Hints: hints})
	if err != nil {
		return err
	}
	q.w.Header().Set("Etag", m.ETag)
	q.w.Header().Set("X-Amz-Object-Size", strconv.FormatInt(m.Size, 10))
	body.echoChecksums(q.w.Header())
	return q.writeEmpty(http.StatusOK)
}

// deleteConditions applies a DELETE's If-Match, x-amz-if-match-size and
// x-amz-if-match-last-modified-time: each must hold for the object to go.
func (s *Server) deleteConditions(q *request, key []byte) error {
	h := q.r.Header
	im, sz, lm := h.Get("If-Match"), h.Get("X-Amz-If-Match-Size"), h.Get("X-Amz-If-Match-Last-Modified-Time")
	if im == "" && sz == "" && lm == "" {
		return nil
	}
	m, err := s.objs.StatObject(q.r.Context(), q.bucket, key, readLevel)
	if err != nil {
		return err
	}
	failed := newErr("PreconditionFailed", http.StatusPreconditionFailed, object.ErrPreconditionFailed, "At least one of the pre-conditions you specified did not hold.")
	if im != "" && !etagListHas(im, m.ETag) && im != "*" {
		return failed
	}
	if sz != "" && sz != strconv.FormatInt(m.Size, 10) {
		return failed
	}
	if lm != "" {
		t, err := http.ParseTime(lm)
		if err != nil {
			t, err = time.Parse(time.RFC3339, lm)
		}
		if err != nil || !t.Equal(m.Modified.Truncate(time.Second)) {
			return failed
		}
	}
	return nil
}

func (s *Server) deleteObjectNS(q *request) error {
	key, err := s3Key(q.key)
	if err != nil {
		return err
	}
	if err := s.deleteConditions(q, key); err != nil {
		return err
	}
	if err := s.objs.DeleteObject(q.r.Context(), q.bucket, key); err != nil {
		return err
	}
	return q.writeEmpty(http.StatusNoContent)
}

// copySource opens the object x-amz-copy-source names ("/bucket/key" or
// "bucket/key", URL-encoded), checking the key's scope and the
// x-amz-copy-source-if-* conditions.
func (s *Server) copySource(q *request) (*object.Object, string, string, error) {
	src := q.r.Header.Get("X-Amz-Copy-Source")
	if i := strings.Index(src, "?"); i >= 0 {
		src = src[:i] // versionId: objects have one version
	}
	src, err := url.PathUnescape(strings.TrimPrefix(src, "/"))
	bucket, key, ok := strings.Cut(src, "/")
	if err != nil || !ok || bucket == "" || key == "" {
		return nil, "", "", newErr("InvalidArgument", http.StatusBadRequest, block.ErrInvalidArgument, "Copy Source must mention the source bucket and key: sourcebucket/sourcekey")
	}
	if !q.auth.Credential.Allows(bucket) {
		return nil, "", "", errAccessDenied(bucket)
	}
	ns, err := s.store.Namespace(bucket)
	if err != nil {
		return nil, "", "", err
	}
	if !ns.IsObject() {
		return nil, "", "", errNotImplemented("copying from a block namespace")
	}
	k, err := s3Key(key)
	if err != nil {
		return nil, "", "", err
	}
	o, err := s.objs.OpenObject(q.r.Context(), bucket, k, readLevel)
	if err != nil {
		return nil, "", "", err
	}
	h := q.r.Header
	failed := newErr("PreconditionFailed", http.StatusPreconditionFailed, object.ErrPreconditionFailed, "At least one of the pre-conditions you specified did not hold.")
	mod := o.Modified.Truncate(time.Second)
	if v := h.Get("X-Amz-Copy-Source-If-Match"); v != "" && !etagListHas(v, o.ETag) {
		return nil, "", "", failed
	}
	if v := h.Get("X-Amz-Copy-Source-If-None-Match"); v != "" && (v == "*" || etagListHas(v, o.ETag)) {
		return nil, "", "", failed
	}
	if t, err := http.ParseTime(h.Get("X-Amz-Copy-Source-If-Unmodified-Since")); err == nil && mod.After(t) && h.Get("X-Amz-Copy-Source-If-Match") == "" {
		return nil, "", "", failed
	}
	if t, err := http.ParseTime(h.Get("X-Amz-Copy-Source-If-Modified-Since")); err == nil && !mod.After(t) && h.Get("X-Amz-Copy-Source-If-None-Match") == "" {
		return nil, "", "", failed
	}
	return o, bucket, key, nil
}

// pipeRange streams bytes [first, first+n) of o into a reader.
func pipeRange(ctx context.Context, o *object.Object, first, n int64) *io.PipeReader {
	pr, pw := io.Pipe()
	go func() {
		// The bytes are copied into another object here, not checked by
		// anyone: the tiers verify them.
		_, err := o.WriteRange(ctx, pw, first, n, object.RangeOptions{})
		pw.CloseWithError(err)
	}()
	return pr
}

type copyObjectResult struct {
	XMLName      xml.Name `xml:"CopyObjectResult"`
	Xmlns        string   `xml:"xmlns,attr"`
	LastModified string   `xml:"LastModified"`
	ETag         string   `xml:"ETag"`
}

func (s *Server) copyObject(q *request) error {
	key, err := s3Key(q.key)
	if err != nil {
		return err
	}
	ifAbsent, ifMatch, err := writeConditions(q)
	if err != nil {
		return err
	}
	o, sb, sk, err := s.copySource(q)
	if err != nil {
		return err
	}
	hdrs := o.Headers
	switch d := q.r.Header.Get("X-Amz-Metadata-Directive"); d {
	case "", "COPY":
		if sb == q.bucket && sk == q.key {
			return newErr("InvalidRequest", http.StatusBadRequest, block.ErrInvalidArgument, "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.")
		}
	case "REPLACE":
		if hdrs, err = objectHeaders(q.r.Header); err != nil {
			return err
		}
	default:
		return newErr("InvalidArgument", http.StatusBadRequest, block.ErrInvalidArgument, "Unknown metadata directive.")
	}
	ctx, cancel := context.WithCancel(q.r.Context())
	defer cancel()
	body := pipeRange(ctx, o, 0, o.Size)
	defer body.Close()
	m, err := s.objs.PutObject(ctx, q.bucket, key, body, object.PutObjectOptions{IfAbsent: ifAbsent, IfMatch: ifMatch, Headers: hdrs})
	if err != nil {
		return err
	}
	return q.writeXML(copyObjectResult{Xmlns: s3NS, LastModified: m.Modified.Format(time.RFC3339Nano), ETag: m.ETag})
}

// listObjectsNS lists an object namespace like list does a block namespace.
func (s *Server) listObjectsNS(q *request, prefix, delim, cursor string, maxKeys int) (listing, error) {
	var out listing
	if maxKeys == 0 {
		return out, nil
	}
	es, err := s.objs.ListObjects(q.r.Context(), q.bucket, prefix, readLevel)
	if err != nil {
		return out, err
	}
	lastPrefix := ""
	for _, e := range es {
		if e.Key <= cursor {
			continue
		}
		if delim != "" {
			if i := strings.Index(e.Key[len(prefix):], delim); i >= 0 {
				cp := e.Key[:len(prefix)+i+len(delim)]
				if cp == lastPrefix || cp == cursor {
					continue
				}
				if len(out.objects)+len(out.prefixes) == maxKeys {
					out.truncated = true
					return out, nil
				}
				out.prefixes = append(out.prefixes, xmlPrefix{Prefix: cp})
				lastPrefix, out.next = cp, cp
				continue
			}
		}
		if len(out.objects)+len(out.prefixes) == maxKeys {
			out.truncated = true
			return out, nil
		}
		out.objects = append(out.objects, xmlObject{Key: e.Key, LastModified: e.Modified.UTC().Format(time.RFC3339Nano),
			ETag: e.ETag, Size: e.Size, StorageClass: "STANDARD"})
		out.next = e.Key
	}
	return out, nil
}

// deleteObjectNS deletes one key of a DeleteObjects request.
func (s *Server) deleteKeyNS(ctx context.Context, bucket, key string) error {
	k, err := s3Key(key)
	if err != nil {
		return err
	}
	err = s.objs.DeleteObject(ctx, bucket, k)
	if errors.Is(err, block.ErrNotFound) {
		return nil
	}
	return err
}
