package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
)

const (
	jsonType        = httpwire.ContentTypeJSON
	headerErrorCode = httpwire.HeaderErrorCode
)

type errorBody = httpwire.ErrorBody

func writeJSONBody(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}

// writeJSON sends v with status; a failure to write is a started response.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", jsonType)
	w.WriteHeader(status)
	if err := writeJSONBody(w, v); err != nil {
		return errStarted{err}
	}
	return nil
}

// blockKey parses the {ns} and {hash} path elements.
func blockKey(r *http.Request) (block.Key, error) {
	return block.ParseObjectName(r.PathValue("ns"), r.PathValue("hash"))
}

// maxBlock is the body limit for ns: the namespace's and the server's, whichever is smaller.
func (s *Server) maxBlock(ns block.Namespace) int64 {
	return min(ns.MaxBlockSize, s.cfg.MaxBlockSize)
}

// readBlockBody reads a PUT body of at most max bytes. A declared
// Content-Length over max is refused before a byte is read; a chunked body is
// cut at max+1 by http.MaxBytesReader.
func readBlockBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	if r.ContentLength > max {
		return nil, fmt.Errorf("%w: body of %d bytes exceeds the block limit of %d", block.ErrTooLarge, r.ContentLength, max)
	}
	body := http.MaxBytesReader(w, r.Body, max)
	if r.ContentLength >= 0 {
		buf := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(body, buf); err != nil {
			return nil, bodyErr(err)
		}
		return buf, nil
	}
	buf, err := io.ReadAll(body)
	if err != nil {
		return nil, bodyErr(err)
	}
	return buf, nil
}

func (s *Server) putBlock(w http.ResponseWriter, r *http.Request) error {
	key, err := blockKey(r)
	if err != nil {
		return err
	}
	ns, err := s.store.Namespace(key.Namespace)
	if err != nil {
		return err
	}
	opts, err := httpwire.ParsePutOptions(r.Header)
	if err != nil {
		return err
	}
	max := s.maxBlock(ns)
	if r.ContentLength > max {
		return fmt.Errorf("%w: body of %d bytes exceeds the block limit of %d", block.ErrTooLarge, r.ContentLength, max)
	}
	need := r.ContentLength
	if need < 0 {
		need = max
	}
	release, err := s.budget.Acquire(r.Context(), need)
	if err != nil {
		return err
	}
	defer release()
	data, err := readBlockBody(w, r, max)
	if err != nil {
		return err
	}
	s.metrics.Bytes(proto, int64(len(data)), 0)
	if err := s.store.Put(r.Context(), key, data, opts); err != nil {
		s.metrics.Block(proto, "put", errcode.Of(err))
		return err
	}
	s.metrics.Block(proto, "put", errcode.OK)
	w.Header().Set(httpwire.HeaderCRC, httpwire.FormatSum(block.Checksum(data)))
	w.WriteHeader(http.StatusCreated)
	return nil
}

// setInfoHeaders writes a block's metadata headers.
func setInfoHeaders(h http.Header, size int64, sum uint32, tier block.Tier) {
	h.Set("Content-Type", httpwire.ContentTypeBinary)
	h.Set("Content-Length", strconv.FormatInt(size, 10))
	h.Set(httpwire.HeaderCRC, httpwire.FormatSum(sum))
	h.Set("ETag", `"`+httpwire.FormatSum(sum)+`"`)
	h.Set("Accept-Ranges", "bytes")
	if tier != "" {
		h.Set(httpwire.HeaderTier, string(tier))
	}
}

func (s *Server) getBlock(w http.ResponseWriter, r *http.Request, opts ctxstore.ReadOptions) error {
	key, err := blockKey(r)
	if err != nil {
		return err
	}
	partial := r.Header.Get("Range") != "" || r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Range") != ""
	// The client checks the whole body against the CRC-32C header and
	// reads again without the declaration on a mismatch: the DRAM tier
	// may leave the check to it. A partial body cannot be checked
	// against the whole block's sum, so ranged reads stay verified.
	opts.ReaderVerifies = !partial && r.Header.Get(httpwire.HeaderReaderVerifies) == httpwire.ReaderVerifiesCRC32C
	ref, err := s.store.Read(r.Context(), key, opts)
	s.metrics.Block(proto, "get", errcode.Of(err))
	if err != nil {
		return err
	}
	defer ref.Release()
	setInfoHeaders(w.Header(), int64(len(ref.Data)), ref.Sum, ref.Tier)
	if partial {
		// Partial and conditional reads: net/http implements the RFC 9110
		// rules (206, multi-range, 416, 304). The checksum header still
		// describes the whole block.
		cw := &countingWriter{ResponseWriter: w, method: r.Method, rng: r.Header.Get("Range"), size: len(ref.Data)}
		http.ServeContent(cw, r, "", time.Time{}, bytes.NewReader(ref.Data))
		s.metrics.Bytes(proto, 0, cw.n)
		if cw.unsatisfiable {
			s.metrics.Block(proto, "get_range", errcode.InvalidArgument)
		}
		return nil
	}
	// The whole block: one write straight from the tier's memory.
	w.WriteHeader(http.StatusOK)
	n, err := w.Write(ref.Data)
	s.metrics.Bytes(proto, 0, int64(n))
	if err != nil {
		return errStarted{err}
	}
	return nil
}

// countingWriter counts body bytes written through it, and turns
// net/http's plain-text 416 into the API's JSON error (code
// InvalidArgument in X-Ctxtier-Error-Code), keeping its Content-Range.
type countingWriter struct {
	http.ResponseWriter
	n             int64
	method, rng   string
	size          int
	unsatisfiable bool
}

func (c *countingWriter) WriteHeader(status int) {
	if status != http.StatusRequestedRangeNotSatisfiable {
		c.ResponseWriter.WriteHeader(status)
		return
	}
	c.unsatisfiable = true
	h := c.Header()
	for _, k := range []string{"Content-Length", "ETag", "Last-Modified", httpwire.HeaderCRC} {
		h.Del(k)
	}
	h.Set("Content-Type", jsonType)
	h.Set(headerErrorCode, errcode.InvalidArgument.String())
	h.Set("X-Content-Type-Options", "nosniff")
	c.ResponseWriter.WriteHeader(status)
	if c.method != http.MethodHead {
		msg := fmt.Sprintf("%v: range %q is not satisfiable for a block of %d bytes", block.ErrInvalidArgument, c.rng, c.size)
		_ = writeJSONBody(c.ResponseWriter, errorBody{Code: errcode.InvalidArgument.String(), Message: msg})
	}
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.unsatisfiable {
		return len(p), nil // net/http's own text body: replaced above
	}
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	return n, err
}

func (s *Server) headBlock(w http.ResponseWriter, r *http.Request, opts ctxstore.ReadOptions) error {
	key, err := blockKey(r)
	if err != nil {
		return err
	}
	info, err := s.store.Stat(r.Context(), key, opts)
	if err != nil {
		return err
	}
	h := w.Header()
	setInfoHeaders(h, info.Size, info.Sum, info.Tier)
	h.Set(httpwire.HeaderPriority, strconv.Itoa(int(info.Priority)))
	if !info.Created.IsZero() {
		h.Set("Last-Modified", info.Created.UTC().Format(http.TimeFormat))
	}
	if !info.PinnedUntil.IsZero() {
		h.Set(httpwire.HeaderPinnedUntil, info.PinnedUntil.UTC().Format(time.RFC3339Nano))
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) deleteBlock(w http.ResponseWriter, r *http.Request) error {
	key, err := blockKey(r)
	if err != nil {
		return err
	}
	err = s.store.Delete(r.Context(), key)
	s.metrics.Block(proto, "delete", errcode.Of(err))
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// maxPinBody bounds the pin endpoint's JSON body.
const maxPinBody = 4 << 10

// pinBlock pins a block for ?ttl= (seconds or a duration) or the JSON body's ttl_seconds.
func (s *Server) pinBlock(w http.ResponseWriter, r *http.Request) error {
	key, err := blockKey(r)
	if err != nil {
		return err
	}
	var ttl time.Duration
	if q := r.URL.Query().Get("ttl"); q != "" {
		if ttl, err = httpwire.ParsePinTTL(q); err != nil {
			return err
		}
	} else {
		var req httpwire.PinRequest
		if err := httpwire.DecodeJSONBody(http.MaxBytesReader(w, r.Body, maxPinBody), &req); err != nil {
			return fmt.Errorf("pin needs ?ttl= or a body {\"ttl_seconds\": n}: %w", bodyErr(err))
		}
		if req.TTLSeconds <= 0 || req.TTLSeconds > int64(httpwire.MaxPinTTL/time.Second) {
			return fmt.Errorf("%w: ttl_seconds %d out of range 1..%d", block.ErrInvalidArgument, req.TTLSeconds, int64(httpwire.MaxPinTTL/time.Second))
		}
		ttl = time.Duration(req.TTLSeconds) * time.Second
	}
	if ttl <= 0 {
		return fmt.Errorf("%w: pin TTL must be positive", block.ErrInvalidArgument)
	}
	err = s.store.Pin(r.Context(), key, ttl)
	s.metrics.Block(proto, "pin", errcode.Of(err))
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
