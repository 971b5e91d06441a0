// Package sigv4 computes AWS Signature Version 4 (AWS4-HMAC-SHA256): the
// signing key, the string to sign, and the canonical request and
// Authorization header of a header-signed HTTP request. It depends on the
// standard library only, so the Go client (gateway/client) signs with it
// without the AWS SDK, and the server's verifier (gateway/s3auth) derives
// its signing keys, strings to sign and chunk/trailer signatures with the
// same code.
//
// The signer covers what the client needs: requests signed in the
// Authorization header, with a payload hash the caller chooses (a hex
// SHA-256 or UNSIGNED-PAYLOAD), S3-style paths (the escaped path as sent,
// not escaped a second time). Presigned URLs and streaming (aws-chunked)
// signing are not built here.
package sigv4

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SigV4's names and formats.
const (
	// Algorithm names HMAC-SHA256 signing in the Authorization header and
	// the first line of the string to sign.
	Algorithm = "AWS4-HMAC-SHA256"
	// TimeFormat is X-Amz-Date's form (ISO 8601 basic, UTC).
	TimeFormat = "20060102T150405Z"
	// DateFormat is the credential scope's date.
	DateFormat = "20060102"
	// UnsignedPayload is the payload hash of a body the signature does not cover.
	UnsignedPayload = "UNSIGNED-PAYLOAD"
	// EmptySHA256 is the hex SHA-256 of no bytes.
	EmptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	// terminal ends every credential scope.
	terminal = "aws4_request"
)

// Sentinel errors.
var (
	// ErrRequest is returned for a request the signer cannot sign.
	ErrRequest = errors.New("sigv4: request cannot be signed")
	// ErrConfig is returned for an invalid Config.
	ErrConfig = errors.New("sigv4: invalid configuration")
)

// ignored are the headers never signed: they may change on the way
// (hop-by-hop, proxies, tracing) or carry the signature itself. Verifiers
// reject a SignedHeaders list naming them, so the signer must leave them
// out.
var ignored = map[string]bool{
	"authorization": true, "user-agent": true, "x-amzn-trace-id": true,
	"expect": true, "transfer-encoding": true,
}

// HMAC returns HMAC-SHA256 of data under key.
func HMAC(key, data []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(data)
	return m.Sum(nil)
}

// HashHex returns the lower-case hex SHA-256 of b.
func HashHex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// SigningKey derives the key that signs one day's requests for a region
// and service from a secret access key.
func SigningKey(secret, date, region, service string) []byte {
	k := HMAC([]byte("AWS4"+secret), []byte(date))
	k = HMAC(k, []byte(region))
	k = HMAC(k, []byte(service))
	return HMAC(k, []byte(terminal))
}

// Scope is the credential scope "<date>/<region>/<service>/aws4_request".
func Scope(date, region, service string) string {
	return date + "/" + region + "/" + service + "/" + terminal
}

// StringToSign joins the algorithm line, the request time (TimeFormat,
// UTC), the scope and the remaining lines: for a request, the hex SHA-256
// of its canonical request; for a chunk or trailer, the previous signature
// followed by its own hashes.
func StringToSign(algorithm string, t time.Time, scope string, rest ...string) string {
	var b strings.Builder
	b.WriteString(algorithm)
	b.WriteByte('\n')
	b.WriteString(t.UTC().Format(TimeFormat))
	b.WriteByte('\n')
	b.WriteString(scope)
	for _, r := range rest {
		b.WriteByte('\n')
		b.WriteString(r)
	}
	return b.String()
}

// Signature is the signature of a canonical request made at t, as raw
// bytes: HMAC of its string to sign under the day's signing key.
func Signature(secret, region, service string, t time.Time, canonical string) []byte {
	date := t.UTC().Format(DateFormat)
	sts := StringToSign(Algorithm, t, Scope(date, region, service), HashHex([]byte(canonical)))
	return HMAC(SigningKey(secret, date, region, service), []byte(sts))
}

// Canonical is a request's canonical form.
type Canonical struct {
	// Request is the canonical request: method, URI, query, one
	// "name:value" line per signed header, a blank line, the signed header
	// list and the payload hash, joined by newlines.
	Request string
	// SignedHeaders is the ";"-joined, sorted, lower-case list of signed
	// header names.
	SignedHeaders string
}

// CanonicalRequest returns r's canonical request over payloadHash. It signs
// host (r.Host, else r.URL.Host), content-length when r.ContentLength is
// above zero, and every header of r except the ignored ones (Authorization,
// User-Agent, X-Amzn-Trace-Id, Expect, Transfer-Encoding) and a
// Content-Length header (the length comes from r.ContentLength). The URI is
// the escaped path as sent, not escaped again (S3's rule).
func CanonicalRequest(r *http.Request, payloadHash string) (Canonical, error) {
	if r.URL == nil {
		return Canonical{}, fmt.Errorf("%w: no URL", ErrRequest)
	}
	if r.URL.Opaque != "" {
		return Canonical{}, fmt.Errorf("%w: opaque URL %q", ErrRequest, r.URL.Opaque)
	}
	host := r.Host
	if host == "" {
		host = r.URL.Host
	}
	if host == "" {
		return Canonical{}, fmt.Errorf("%w: no host", ErrRequest)
	}
	query, err := canonicalQuery(r.URL.RawQuery)
	if err != nil {
		return Canonical{}, err
	}
	values := map[string][]string{"host": {host}}
	if r.ContentLength > 0 {
		values["content-length"] = []string{strconv.FormatInt(r.ContentLength, 10)}
	}
	for k, vs := range r.Header {
		lk := strings.ToLower(k)
		if ignored[lk] || lk == "host" || lk == "content-length" {
			continue
		}
		values[lk] = append(values[lk], vs...)
	}
	names := make([]string, 0, len(values))
	for k := range values {
		names = append(names, k)
	}
	slices.Sort(names)
	uri := r.URL.EscapedPath()
	if uri == "" {
		uri = "/"
	}

	var b strings.Builder
	b.WriteString(r.Method)
	b.WriteByte('\n')
	b.WriteString(uri)
	b.WriteByte('\n')
	b.WriteString(query)
	b.WriteByte('\n')
	for _, k := range names {
		b.WriteString(k)
		b.WriteByte(':')
		for i, v := range values[k] {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(trimValue(v))
		}
		b.WriteByte('\n')
	}
	signed := strings.Join(names, ";")
	b.WriteByte('\n')
	b.WriteString(signed)
	b.WriteByte('\n')
	b.WriteString(payloadHash)
	return Canonical{Request: b.String(), SignedHeaders: signed}, nil
}

// trimValue drops leading and trailing white space and folds each run of
// spaces inside a header value into one.
func trimValue(v string) string {
	v = strings.Trim(v, " ")
	if !strings.Contains(v, "  ") {
		return strings.TrimSpace(v)
	}
	var b strings.Builder
	b.Grow(len(v))
	space := false
	for i := 0; i < len(v); i++ {
		if v[i] == ' ' {
			if space {
				continue
			}
			space = true
		} else {
			space = false
		}
		b.WriteByte(v[i])
	}
	return strings.TrimSpace(b.String())
}

// canonicalQuery sorts the query's parameters by name, then value, each
// percent-encoded with only the unreserved characters (A-Z a-z 0-9 - _ . ~)
// left as they are.
func canonicalQuery(raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return "", fmt.Errorf("%w: query: %w", ErrRequest, err)
	}
	pairs := make([]string, 0, len(q))
	for k, vs := range q {
		ek := escape(k)
		for _, v := range vs {
			pairs = append(pairs, ek+"="+escape(v))
		}
	}
	// Sorting "name=value" strings sorts by name first only when no name
	// is a prefix of another followed by a character below '='; compare
	// the parts instead.
	slices.SortFunc(pairs, func(a, b string) int {
		an, av, _ := strings.Cut(a, "=")
		bn, bv, _ := strings.Cut(b, "=")
		if c := strings.Compare(an, bn); c != 0 {
			return c
		}
		return strings.Compare(av, bv)
	})
	return strings.Join(pairs, "&"), nil
}

// escape percent-encodes every byte of s but the unreserved ones, with
// upper-case hex digits.
func escape(s string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}
