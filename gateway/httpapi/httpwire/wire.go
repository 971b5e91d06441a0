// Package httpwire is the wire vocabulary of ctxtier's HTTP/1.1 API, shared by
// the server (gateway/httpapi) and the Go client (gateway/client): header
// names, the checksum/TTL/priority header encodings, the JSON bodies, and the
// multipart/mixed framing of the batch endpoints with its decoders. It imports
// only ctxstore/block and the standard library, so clients do not pull in the
// server.
package httpwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Header names. Every X-Ctxtier header value is plain ASCII.
const (
	// HeaderCRC carries a block's CRC-32C as 8 hex digits. On PUT it is the
	// sender's checksum, verified before anything is stored; on GET/HEAD it
	// is the checksum of the whole block (also on a 206 partial response).
	HeaderCRC = "X-Ctxtier-Crc32c"
	// HeaderHash names a block (its object name, "hash" or "hash.part") in a
	// batch part.
	HeaderHash = "X-Ctxtier-Hash"
	// HeaderTier says which tier served a block (dram, nvme, s3).
	HeaderTier = "X-Ctxtier-Tier"
	// HeaderPriority is a block's eviction class, 0..7.
	HeaderPriority = "X-Ctxtier-Priority"
	// HeaderPinTTL pins a block at put time: whole seconds ("300") or a Go
	// duration ("5m", "1h30m"). 0 means no pin.
	HeaderPinTTL = "X-Ctxtier-Pin-Ttl"
	// HeaderParent is the previous block's sequence hash (16 hex digits), a
	// hint for eviction policies that keep chain heads.
	HeaderParent = "X-Ctxtier-Parent"
	// HeaderReuse is a put's agent hint of whether the block will be read
	// again: never (reasoning, output: evicted first), session (the
	// session comes back: kept within its retain window) or shared (a
	// prefix shared across sessions: a higher eviction class).
	HeaderReuse = "X-Ctxtier-Reuse"
	// HeaderRetain is a put's retain window, whole seconds or a Go
	// duration: the harness expects to read the block again within it (a
	// soft pin, unlike HeaderPinTTL: yielded when nothing else is
	// evictable).
	HeaderRetain = "X-Ctxtier-Retain"
	// HeaderSession is a put's agent session id (decimal, 1 and up): the
	// session's end (POST /v1/namespaces/{ns}/sessions/{id}/end) releases
	// the blocks put with it.
	HeaderSession = "X-Ctxtier-Session"
	// HeaderPinnedUntil is when a block's pin lapses (RFC 3339), on HEAD/GET
	// of a pinned block.
	HeaderPinnedUntil = "X-Ctxtier-Pinned-Until"
	// HeaderErrorCode carries the errcode name on every error response and on
	// failed batch-get parts, so that HEAD errors (no body) map back too.
	HeaderErrorCode = "X-Ctxtier-Error-Code"
	// HeaderRead chooses the read level of a block read, HEAD, lookup or
	// batch exists/get: ReadLocal (the default: this node's own index, no
	// network hop) or ReadLinearizable (every write acknowledged before the
	// request is seen; in a cluster, one round trip to the leader). Any
	// other value is InvalidArgument.
	HeaderRead = "X-Ctxtier-Read"
	// HeaderReaderVerifies on a GET of a whole block declares that the
	// client checks every byte it receives against HeaderCRC (the CRC-32C
	// recorded at put) and, on a mismatch, reads the block again without
	// this header. The server may then skip the DRAM tier's own pass over
	// the bytes, as for a native client whose hello declared
	// wire.HelloVerifiesGets. Its one value there is ReaderVerifiesCRC32C;
	// any other value, a ranged or conditional GET, and every other request
	// are served verified at rest as before (the header is ignored).
	//
	// On the S3 endpoint's GetObject (gateway/s3api) the same header with
	// ReaderVerifiesXXH3 or ReaderVerifiesSHA256 declares that the client
	// checks every byte of the body, whole or ranged, against a digest of
	// its own (a weights manifest's chunk digest) and, on a mismatch, reads
	// the range again without the header: the object's data blocks are
	// then read with ctxstore.ReadOptions.ReaderVerifies. Any other value
	// (crc32c included: an object has no whole-block sum a client could
	// check) is ignored there.
	HeaderReaderVerifies = "X-Ctxtier-Reader-Verifies"
)

// HeaderReaderVerifies values.
const (
	// ReaderVerifiesCRC32C: the HTTP API's whole-block GET, checked
	// against HeaderCRC.
	ReaderVerifiesCRC32C = "crc32c"
	// ReaderVerifiesXXH3 and ReaderVerifiesSHA256: an S3 GetObject whose
	// body the client checks against its own XXH3-128 or SHA-256 digests.
	ReaderVerifiesXXH3   = "xxh3-128"
	ReaderVerifiesSHA256 = "sha256"
)

// HeaderRead values.
const (
	ReadLocal        = "local"
	ReadLinearizable = "linearizable"
)

// Content types.
const (
	ContentTypeJSON   = "application/json"
	ContentTypeBinary = "application/octet-stream"
	// ContentTypeMixed is the media type of batch-put requests and batch-get
	// responses; the boundary parameter is required.
	ContentTypeMixed = "multipart/mixed"
)

// ErrorBody is every error response's JSON body: an errcode name and a message.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// HashesRequest is the body of batch/exists, batch/get and batch/delete: block
// object names ("hash" or "hash.part") in one namespace.
type HashesRequest struct {
	Hashes []string `json:"hashes"`
}

// LookupRequest asks for the present prefix of a chain, given either the
// chain's block hashes or its token ids (exactly one of the two).
type LookupRequest struct {
	Hashes []string `json:"hashes,omitempty"`
	Tokens []uint32 `json:"tokens,omitempty"`
}

// LookupResponse says how many leading blocks are present.
type LookupResponse struct {
	// Prefix is the number of leading blocks present (stopping at the first miss).
	Prefix int `json:"prefix"`
	// Blocks is the number of blocks asked about.
	Blocks int `json:"blocks"`
	// PrefixTokens is Prefix times the namespace's block_tokens (token input only).
	PrefixTokens int `json:"prefix_tokens,omitempty"`
	// Hashes are the chain's block hashes computed from the tokens (token input only).
	Hashes []string `json:"hashes,omitempty"`
}

// ExistsResponse answers batch/exists, positionally.
type ExistsResponse struct {
	Exists []bool `json:"exists"`
}

// ItemResult is one item's outcome in a batch response: Code is "OK" or an
// errcode name.
type ItemResult struct {
	Hash    string `json:"hash"`
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

// BatchResponse answers batch/put and batch/delete, positionally, with the
// number of failed items.
type BatchResponse struct {
	Results []ItemResult `json:"results"`
	Failed  int          `json:"failed"`
}

// PinRequest is the optional JSON body of the pin endpoint.
type PinRequest struct {
	TTLSeconds int64 `json:"ttl_seconds"`
}

// NamespaceStatus answers GET /v1/namespaces/{ns} and PUT
// /v1/namespaces/{ns}/quota: the definition, and the bytes the namespace
// holds in each tier of the node that answered (Usage, when it counts them).
type NamespaceStatus struct {
	block.Namespace
	Usage map[block.Tier]int64 `json:"usage,omitempty"`
}

// NamespaceList answers GET /v1/namespaces.
type NamespaceList struct {
	Namespaces []block.Namespace `json:"namespaces"`
}

// FormatSum renders a checksum as 8 lowercase hex digits.
func FormatSum(sum uint32) string {
	const digits = "0123456789abcdef"
	var b [8]byte
	for i := 7; i >= 0; i-- {
		b[i] = digits[sum&0xf]
		sum >>= 4
	}
	return string(b[:])
}

// ParseSum parses exactly 8 hex digits (either case).
func ParseSum(s string) (uint32, error) {
	if len(s) != 8 {
		return 0, fmt.Errorf("%w: %s %q must be 8 hex digits", block.ErrInvalidArgument, HeaderCRC, s)
	}
	var v uint32
	for i := 0; i < len(s); i++ {
		c := s[i]
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, fmt.Errorf("%w: %s %q must be 8 hex digits", block.ErrInvalidArgument, HeaderCRC, s)
		}
		v = v<<4 | uint32(d)
	}
	return v, nil
}

// MaxPinTTL bounds the TTL a header may name (the store caps pins further).
const MaxPinTTL = 365 * 24 * time.Hour

// ParsePinTTL parses whole seconds ("300") or a Go duration ("5m"). Negative,
// fractional-second or absurd values are ErrInvalidArgument.
func ParsePinTTL(s string) (time.Duration, error) { return parseDuration("pin TTL", s, MaxPinTTL) }

// ParseRetain parses HeaderRetain as ParsePinTTL does, up to block.MaxRetain.
func ParseRetain(s string) (time.Duration, error) {
	return parseDuration(HeaderRetain, s, block.MaxRetain)
}

func parseDuration(what, s string, maxD time.Duration) (time.Duration, error) {
	bad := func() (time.Duration, error) {
		return 0, fmt.Errorf("%w: %s %q must be whole seconds or a duration like 5m, 0..%s", block.ErrInvalidArgument, what, s, maxD)
	}
	if s == "" {
		return bad()
	}
	var d time.Duration
	if n, err := strconv.ParseUint(s, 10, 64); err == nil {
		if n > uint64(maxD/time.Second) {
			return bad()
		}
		d = time.Duration(n) * time.Second
	} else {
		pd, err := time.ParseDuration(s)
		if err != nil || pd < 0 || pd > maxD {
			return bad()
		}
		d = pd
	}
	return d, nil
}

// FormatPinTTL renders d for HeaderPinTTL: whole seconds when exact, else a Go duration.
func FormatPinTTL(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10)
	}
	return d.String()
}

// ParsePriority parses an eviction class 0..block.MaxPriority.
func ParsePriority(s string) (uint8, error) {
	n, err := strconv.ParseUint(s, 10, 8)
	if err != nil || n > block.MaxPriority {
		return 0, fmt.Errorf("%w: %s %q must be 0..%d", block.ErrInvalidArgument, HeaderPriority, s, block.MaxPriority)
	}
	return uint8(n), nil
}

// HeaderGetter is http.Header or textproto.MIMEHeader.
type HeaderGetter interface{ Get(string) string }

// HeaderSetter is http.Header or textproto.MIMEHeader.
type HeaderSetter interface{ Set(key, value string) }

// ParsePutOptions reads the optional put headers (checksum, priority, pin
// TTL, parent). Absent headers leave their fields unset.
func ParsePutOptions(h HeaderGetter) (block.PutOptions, error) {
	var o block.PutOptions
	if v := h.Get(HeaderCRC); v != "" {
		s, err := ParseSum(v)
		if err != nil {
			return o, err
		}
		o.Sum, o.HasSum = s, true
	}
	if v := h.Get(HeaderPriority); v != "" {
		p, err := ParsePriority(v)
		if err != nil {
			return o, err
		}
		o.Priority, o.HasPriority = p, true
	}
	if v := h.Get(HeaderPinTTL); v != "" {
		d, err := ParsePinTTL(v)
		if err != nil {
			return o, err
		}
		o.PinTTL = d
	}
	if v := h.Get(HeaderParent); v != "" {
		p, err := block.ParseHash(v)
		if err != nil {
			return o, fmt.Errorf("%s: %w", HeaderParent, err)
		}
		o.Parent, o.HasParent = p, true
	}
	return o, ParseHints(h, PutHintHeaders, &o)
}

// HintHeaders names the headers that carry a put's agent hints: the HTTP
// API's own (PutHintHeaders), or the S3 endpoint's user metadata.
type HintHeaders struct {
	// Reuse: never, session or shared (block.ParseReuse).
	Reuse string
	// Retain: the retain window, whole seconds or a Go duration.
	Retain string
	// Session: the agent session id, decimal, 1 and up.
	Session string
}

// PutHintHeaders are the HTTP API's hint headers.
var PutHintHeaders = HintHeaders{Reuse: HeaderReuse, Retain: HeaderRetain, Session: HeaderSession}

// ParseHints reads the agent hints of a put from the headers names gives
// into o (absent ones leave their fields unset) and checks them together
// (block.PutOptions.ValidateHints). Errors wrap block.ErrInvalidArgument
// and name the header.
func ParseHints(h HeaderGetter, names HintHeaders, o *block.PutOptions) error {
	if v, ok := headerValue(h, names.Reuse); ok {
		r, err := block.ParseReuse(v)
		if err != nil || r == block.ReuseUnknown {
			return fmt.Errorf("%w: %s %q must be never, session or shared", block.ErrInvalidArgument, names.Reuse, v)
		}
		o.Reuse = r
	}
	if v, ok := headerValue(h, names.Retain); ok {
		d, err := parseDuration(names.Retain, v, block.MaxRetain)
		if err != nil {
			return err
		}
		o.Retain = d
	}
	if v, ok := headerValue(h, names.Session); ok {
		id, err := ParseSession(v)
		if err != nil {
			return fmt.Errorf("%s: %w", names.Session, err)
		}
		o.Session = id
	}
	return o.ValidateHints()
}

// ParseSession parses an agent session id: a decimal u64, not 0.
func ParseSession(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("%w: session %q must be a decimal number from 1 to %d", block.ErrInvalidArgument, s, uint64(1<<64-1))
	}
	return id, nil
}

// ParseReadRetain reads a read's HeaderRetain: ok is false when it was not
// sent; a window that is not positive is ErrInvalidArgument.
func ParseReadRetain(h HeaderGetter) (d time.Duration, ok bool, err error) {
	v, ok := headerValue(h, HeaderRetain)
	if !ok {
		return 0, false, nil
	}
	if d, err = ParseRetain(v); err == nil {
		err = block.ValidateRetain(d)
	}
	return d, err == nil, err
}

// EndSessionResponse is the body of a session's end: how many blocks the
// node released.
type EndSessionResponse struct {
	Released int `json:"released"`
}

// headerValue is h's value of name, and whether it was sent at all (an
// empty value of a sent header is an error for the hint headers, not
// their absence).
func headerValue(h HeaderGetter, name string) (string, bool) {
	if hv, ok := h.(interface{ Values(string) []string }); ok {
		vs := hv.Values(name)
		if len(vs) == 0 {
			return "", false
		}
		return vs[0], true
	}
	v := h.Get(name)
	return v, v != ""
}

// SetPutOptions writes the put headers for o (the inverse of ParsePutOptions).
func SetPutOptions(h HeaderSetter, o block.PutOptions) {
	if o.HasSum {
		h.Set(HeaderCRC, FormatSum(o.Sum))
	}
	if o.HasPriority {
		h.Set(HeaderPriority, strconv.FormatUint(uint64(o.Priority), 10))
	}
	if o.PinTTL > 0 {
		h.Set(HeaderPinTTL, FormatPinTTL(o.PinTTL))
	}
	if o.HasParent {
		h.Set(HeaderParent, block.FormatHash(o.Parent))
	}
	if o.Reuse != block.ReuseUnknown {
		h.Set(HeaderReuse, o.Reuse.String())
	}
	if o.Retain > 0 {
		h.Set(HeaderRetain, FormatPinTTL(o.Retain))
	}
	if o.Session != 0 {
		h.Set(HeaderSession, strconv.FormatUint(o.Session, 10))
	}
}

// DecodeJSON decodes exactly one JSON value from r into v, refusing unknown
// fields and trailing data. Errors wrap block.ErrInvalidArgument, except that
// an error of r itself (a size limit, say) is wrapped as is.
func DecodeJSON(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonErr(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil {
			return jsonErr(err)
		}
		return fmt.Errorf("%w: trailing data after the JSON body", block.ErrInvalidArgument)
	}
	return nil
}

// readErr marks an error that came from the body reader, not from the JSON.
type readErr struct{ error }

func (e readErr) Unwrap() error { return e.error }

// errReader tags the reader's own errors so DecodeJSON can tell them apart.
type errReader struct{ r io.Reader }

func (e errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		err = readErr{err}
	}
	return n, err
}

func jsonErr(err error) error {
	var re readErr
	if errors.As(err, &re) {
		return re.error
	}
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: empty JSON body", block.ErrInvalidArgument)
	}
	return fmt.Errorf("%w: JSON body: %v", block.ErrInvalidArgument, err)
}

// DecodeJSONBody is DecodeJSON over a request body, keeping the body's own
// read errors (such as *http.MaxBytesError) distinguishable from bad JSON.
func DecodeJSONBody(r io.Reader, v any) error { return DecodeJSON(errReader{r}, v) }

// ParseKeys parses object names of namespace ns, at most maxItems of them
// (maxItems <= 0: no limit). A malformed name fails the whole list, naming its
// index, so a batch with bad input changes nothing.
func ParseKeys(ns string, names []string, maxItems int) ([]block.Key, error) {
	if maxItems > 0 && len(names) > maxItems {
		return nil, fmt.Errorf("%w: batch of %d items exceeds the limit of %d", block.ErrTooLarge, len(names), maxItems)
	}
	keys := make([]block.Key, len(names))
	for i, n := range names {
		k, err := block.ParseObjectName(ns, n)
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		keys[i] = k
	}
	return keys, nil
}

// ObjectNames renders keys as object names.
func ObjectNames(keys []block.Key) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.ObjectName()
	}
	return out
}

// EncodeJSON renders v as JSON (for request bodies).
func EncodeJSON(v any) (*bytes.Reader, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return bytes.NewReader(b), nil
}
