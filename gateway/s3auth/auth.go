// Package s3auth verifies AWS Signature Version 4 on incoming S3 requests:
// the Authorization header form, presigned URLs (query form), payload hashes
// (x-amz-content-sha256) and aws-chunked streaming uploads
// (STREAMING-AWS4-HMAC-SHA256-PAYLOAD). Canonicalization and signing are done
// by aws-sdk-go-v2's signer: this package only parses what the client
// claims, rebuilds the request from the headers the client says it signed,
// has the SDK sign that, and compares in constant time.
package s3auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
)

// Payload hash values a client may send in x-amz-content-sha256.
const (
	UnsignedPayload  = "UNSIGNED-PAYLOAD"
	StreamingPayload = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
	// EmptySHA256 is the hex SHA-256 of no bytes.
	EmptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

	algorithm  = "AWS4-HMAC-SHA256"
	timeFormat = "20060102T150405Z"
	dateFormat = "20060102"
)

// Sentinel errors. Each wraps a block sentinel so errcode maps them too; the
// S3 server maps each to its S3 error code.
var (
	// ErrAnonymous: no Authorization header and no presigned query.
	ErrAnonymous = fmt.Errorf("%w: anonymous request", block.ErrUnauthenticated)
	// ErrMalformed: an Authorization header or presigned query that cannot be parsed.
	ErrMalformed = fmt.Errorf("%w: malformed authorization", block.ErrInvalidArgument)
	// ErrUnsupported: a signature version or payload mode this server does not accept.
	ErrUnsupported = fmt.Errorf("%w: unsupported authorization", block.ErrInvalidArgument)
	// ErrSigV2: a Signature Version 2 request (header or presigned), which is refused.
	ErrSigV2 = fmt.Errorf("%w: signature version 2 is not accepted; use SigV4", ErrUnsupported)
	// ErrUnknownKey: the access key id does not exist (or was revoked).
	ErrUnknownKey = fmt.Errorf("%w: unknown access key", block.ErrUnauthenticated)
	// ErrSignature: the signature does not match.
	ErrSignature = fmt.Errorf("%w: signature does not match", block.ErrUnauthenticated)
	// ErrSkewed: the request time is too far from the server's clock.
	ErrSkewed = fmt.Errorf("%w: request time too skewed", block.ErrUnauthenticated)
	// ErrExpired: a presigned URL past its expiry (or not yet valid).
	ErrExpired = fmt.Errorf("%w: request has expired", block.ErrUnauthenticated)
	// ErrPayloadHash: the body does not hash to x-amz-content-sha256.
	ErrPayloadHash = fmt.Errorf("%w: x-amz-content-sha256 does not match the body", block.ErrChecksum)
	// ErrChunk: a malformed aws-chunked body.
	ErrChunk = fmt.Errorf("%w: malformed aws-chunked body", block.ErrInvalidArgument)
)

// Config configures a Verifier.
type Config struct {
	// Region is the only region accepted in credential scopes.
	Region string
	// MaxSkew bounds |server clock - request time| for header-signed requests.
	MaxSkew time.Duration
	// MaxPresignExpiry bounds X-Amz-Expires (S3's limit is 7 days).
	MaxPresignExpiry time.Duration
	// MaxChunkSize bounds one aws-chunked chunk.
	MaxChunkSize int
}

// DefaultConfig returns us-east-1, 15 minutes of skew, 7-day presigned URLs
// and 16 MiB chunks.
func DefaultConfig() Config {
	return Config{Region: "us-east-1", MaxSkew: 15 * time.Minute, MaxPresignExpiry: 7 * 24 * time.Hour, MaxChunkSize: 16 << 20}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.Region == "":
		return fmt.Errorf("%w: s3auth: empty region", block.ErrInvalidArgument)
	case c.MaxSkew <= 0 || c.MaxPresignExpiry <= 0:
		return fmt.Errorf("%w: s3auth: skew and presign expiry must be positive", block.ErrInvalidArgument)
	case c.MaxChunkSize < 8<<10:
		return fmt.Errorf("%w: s3auth: max chunk size below 8 KiB", block.ErrInvalidArgument)
	}
	return nil
}

// Auth is a verified request's identity and what the body must satisfy.
type Auth struct {
	Credential credential.Credential
	// PayloadHash is the claimed x-amz-content-sha256: 64 hex digits,
	// UnsignedPayload or StreamingPayload.
	PayloadHash string
	Presigned   bool

	v         *Verifier
	signature []byte // the request signature, seed of the chunk chain
	time      time.Time
}

// Verifier checks SigV4 signatures against a credential store.
type Verifier struct {
	cfg    Config
	keys   credential.Lookuper
	signer *v4.Signer
	now    func() time.Time
}

// New returns a verifier over keys.
func New(cfg Config, keys credential.Lookuper) (*Verifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Verifier{cfg: cfg, keys: keys, now: time.Now,
		signer: v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })}, nil
}

// SetClock replaces the verifier's clock (tests).
func (v *Verifier) SetClock(now func() time.Time) { v.now = now }

// Verify authenticates r. It does not read the body: hex payload hashes are
// checked by Auth.CheckPayload, streaming bodies by Auth.ChunkedBody.
func (v *Verifier) Verify(r *http.Request) (*Auth, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		return v.verifyHeader(r, h)
	}
	if r.URL.Query().Has("X-Amz-Signature") || r.URL.Query().Has("X-Amz-Credential") {
		return v.verifyQuery(r)
	}
	if r.URL.Query().Has("Signature") || r.URL.Query().Has("AWSAccessKeyId") {
		return nil, ErrSigV2
	}
	return nil, ErrAnonymous
}

// scope is a parsed credential scope.
type scope struct {
	id, date, region, service string
}

func parseScope(s string) (scope, error) {
	p := strings.Split(s, "/")
	if len(p) != 5 || p[4] != "aws4_request" || p[0] == "" {
		return scope{}, fmt.Errorf("%w: credential %q is not <key>/<date>/<region>/s3/aws4_request", ErrMalformed, s)
	}
	return scope{id: p[0], date: p[1], region: p[2], service: p[3]}, nil
}

func (v *Verifier) checkScope(sc scope, t time.Time) error {
	if sc.date != t.Format(dateFormat) {
		return fmt.Errorf("%w: credential date %q does not match request date %s", ErrMalformed, sc.date, t.Format(timeFormat))
	}
	if sc.region != v.cfg.Region {
		return fmt.Errorf("%w: the region %q is wrong; expecting %q", ErrMalformed, sc.region, v.cfg.Region)
	}
	if sc.service != "s3" {
		return fmt.Errorf("%w: service %q is wrong; expecting \"s3\"", ErrMalformed, sc.service)
	}
	return nil
}

func (v *Verifier) lookup(id string) (credential.Credential, error) {
	c, err := v.keys.Lookup(id)
	if err != nil {
		if errors.Is(err, block.ErrUnauthenticated) {
			return credential.Credential{}, fmt.Errorf("%w: %q", ErrUnknownKey, id)
		}
		return credential.Credential{}, err
	}
	return c, nil
}

// parseAuthorization splits "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...".
func parseAuthorization(h string) (cred, signed, sig string, err error) {
	alg, rest, ok := strings.Cut(h, " ")
	if !ok || alg != algorithm {
		if strings.HasPrefix(h, "AWS ") {
			return "", "", "", ErrSigV2
		}
		return "", "", "", fmt.Errorf("%w: algorithm must be %s", ErrUnsupported, algorithm)
	}
	for _, part := range strings.Split(rest, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return "", "", "", fmt.Errorf("%w: %q is not key=value", ErrMalformed, part)
		}
		switch k {
		case "Credential":
			cred = val
		case "SignedHeaders":
			signed = val
		case "Signature":
			sig = val
		default:
			return "", "", "", fmt.Errorf("%w: unknown component %q", ErrMalformed, k)
		}
	}
	if cred == "" || signed == "" || sig == "" {
		return "", "", "", fmt.Errorf("%w: Credential, SignedHeaders and Signature are all required", ErrMalformed)
	}
	return cred, signed, sig, nil
}

func parseSignature(sig string) ([]byte, error) {
	b, err := hex.DecodeString(sig)
	if err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("%w: signature must be 64 hex digits", ErrMalformed)
	}
	return b, nil
}

func validPayloadHash(h string) error {
	switch h {
	case UnsignedPayload, StreamingPayload:
		return nil
	case "":
		return fmt.Errorf("%w: x-amz-content-sha256 is required", ErrMalformed)
	}
	if strings.HasPrefix(h, "STREAMING-") {
		return fmt.Errorf("%w: payload mode %q (use %s or %s)", ErrUnsupported, h, StreamingPayload, UnsignedPayload)
	}
	if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
		return fmt.Errorf("%w: x-amz-content-sha256 %q is not a SHA-256", ErrMalformed, h)
	}
	return nil
}

func (v *Verifier) verifyHeader(r *http.Request, h string) (*Auth, error) {
	credStr, signedStr, sigStr, err := parseAuthorization(h)
	if err != nil {
		return nil, err
	}
	sig, err := parseSignature(sigStr)
	if err != nil {
		return nil, err
	}
	sc, err := parseScope(credStr)
	if err != nil {
		return nil, err
	}
	amzDate := r.Header.Get("X-Amz-Date")
	if amzDate == "" {
		return nil, fmt.Errorf("%w: x-amz-date is required", ErrMalformed)
	}
	t, err := time.Parse(timeFormat, amzDate)
	if err != nil {
		return nil, fmt.Errorf("%w: x-amz-date %q is not %s", ErrMalformed, amzDate, timeFormat)
	}
	if err := v.checkScope(sc, t); err != nil {
		return nil, err
	}
	if d := v.now().Sub(t); d > v.cfg.MaxSkew || d < -v.cfg.MaxSkew {
		return nil, fmt.Errorf("%w: request time %s, server time %s", ErrSkewed, t.Format(timeFormat), v.now().UTC().Format(timeFormat))
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if err := validPayloadHash(payload); err != nil {
		return nil, err
	}
	c, err := v.lookup(sc.id)
	if err != nil {
		return nil, err
	}
	req, err := rebuild(r, signedStr, false)
	if err != nil {
		return nil, err
	}
	creds := aws.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.Secret}
	if err := v.signer.SignHTTP(r.Context(), creds, req, payload, "s3", v.cfg.Region, t); err != nil {
		return nil, fmt.Errorf("%w: signing: %v", ErrSignature, err)
	}
	_, gotSigned, gotSig, err := parseAuthorization(req.Header.Get("Authorization"))
	if err != nil {
		return nil, err
	}
	want, _ := hex.DecodeString(gotSig)
	if gotSigned != signedStr || !hmac.Equal(want, sig) {
		return nil, ErrSignature
	}
	return &Auth{Credential: c, PayloadHash: payload, v: v, signature: sig, time: t}, nil
}

func (v *Verifier) verifyQuery(r *http.Request) (*Auth, error) {
	q := r.URL.Query()
	if alg := q.Get("X-Amz-Algorithm"); alg != algorithm {
		return nil, fmt.Errorf("%w: X-Amz-Algorithm %q (want %s)", ErrUnsupported, alg, algorithm)
	}
	sig, err := parseSignature(q.Get("X-Amz-Signature"))
	if err != nil {
		return nil, err
	}
	sc, err := parseScope(q.Get("X-Amz-Credential"))
	if err != nil {
		return nil, err
	}
	t, err := time.Parse(timeFormat, q.Get("X-Amz-Date"))
	if err != nil {
		return nil, fmt.Errorf("%w: X-Amz-Date %q is not %s", ErrMalformed, q.Get("X-Amz-Date"), timeFormat)
	}
	exp, err := strconv.ParseInt(q.Get("X-Amz-Expires"), 10, 64)
	if err != nil || exp < 1 || time.Duration(exp)*time.Second > v.cfg.MaxPresignExpiry {
		return nil, fmt.Errorf("%w: X-Amz-Expires %q must be 1..%d seconds", ErrMalformed, q.Get("X-Amz-Expires"), int64(v.cfg.MaxPresignExpiry/time.Second))
	}
	signedStr := q.Get("X-Amz-SignedHeaders")
	if signedStr == "" {
		return nil, fmt.Errorf("%w: X-Amz-SignedHeaders is required", ErrMalformed)
	}
	if err := v.checkScope(sc, t); err != nil {
		return nil, err
	}
	now := v.now()
	if now.Before(t.Add(-v.cfg.MaxSkew)) {
		return nil, fmt.Errorf("%w: presigned URL not valid before %s", ErrExpired, t.Format(timeFormat))
	}
	if now.After(t.Add(time.Duration(exp) * time.Second)) {
		return nil, fmt.Errorf("%w: presigned URL expired at %s", ErrExpired, t.Add(time.Duration(exp)*time.Second).UTC().Format(timeFormat))
	}
	payload := UnsignedPayload
	if p := q.Get("X-Amz-Content-Sha256"); p != "" {
		payload = p
	}
	if payload == StreamingPayload {
		return nil, fmt.Errorf("%w: streaming payloads need header signing", ErrUnsupported)
	}
	if err := validPayloadHash(payload); err != nil {
		return nil, err
	}
	c, err := v.lookup(sc.id)
	if err != nil {
		return nil, err
	}
	req, err := rebuild(r, signedStr, true)
	if err != nil {
		return nil, err
	}
	creds := aws.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.Secret}
	signedURL, _, err := v.signer.PresignHTTP(r.Context(), creds, req, payload, "s3", v.cfg.Region, t,
		func(o *v4.SignerOptions) { o.DisableHeaderHoisting = true })
	if err != nil {
		return nil, fmt.Errorf("%w: signing: %v", ErrSignature, err)
	}
	u, err := url.Parse(signedURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSignature, err)
	}
	uq := u.Query()
	want, _ := hex.DecodeString(uq.Get("X-Amz-Signature"))
	if uq.Get("X-Amz-SignedHeaders") != signedStr || !hmac.Equal(want, sig) {
		return nil, ErrSignature
	}
	return &Auth{Credential: c, PayloadHash: payload, Presigned: true, v: v, signature: sig, time: t}, nil
}

// rebuild makes the request the client signed: same method, path, query
// (without X-Amz-Signature for presigned URLs) and host, and only the headers
// the client listed in SignedHeaders, so the SDK signer (which signs every
// header it is given) reproduces the client's canonical request.
func rebuild(r *http.Request, signedStr string, presign bool) (*http.Request, error) {
	u := &url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
	if presign {
		q := r.URL.Query()
		q.Del("X-Amz-Signature")
		u.RawQuery = q.Encode()
	}
	req := &http.Request{Method: r.Method, URL: u, Host: r.Host, Header: http.Header{}}
	req = req.WithContext(context.WithoutCancel(r.Context()))
	hasHost, hasDate := false, presign
	for _, h := range strings.Split(signedStr, ";") {
		switch h {
		case "host":
			hasHost = true
		case "content-length":
			if r.ContentLength < 0 {
				return nil, fmt.Errorf("%w: content-length is signed but the request has none", ErrSignature)
			}
			req.ContentLength = r.ContentLength
		case "authorization", "user-agent", "x-amzn-trace-id", "expect", "transfer-encoding":
			// The SDK signer never signs these; a client that did cannot be
			// verified by it (documented in docs/s3.md).
			return nil, fmt.Errorf("%w: signing header %q is not supported", ErrUnsupported, h)
		case "":
			return nil, fmt.Errorf("%w: empty name in SignedHeaders", ErrMalformed)
		default:
			if h == "x-amz-date" {
				hasDate = true
			}
			if strings.ToLower(h) != h {
				return nil, fmt.Errorf("%w: SignedHeaders must be lower case", ErrMalformed)
			}
			vals := r.Header.Values(h)
			if len(vals) == 0 {
				return nil, fmt.Errorf("%w: signed header %q is missing", ErrSignature, h)
			}
			req.Header[textproto.CanonicalMIMEHeaderKey(h)] = vals
		}
	}
	if !hasHost {
		return nil, fmt.Errorf("%w: host must be signed", ErrMalformed)
	}
	if !hasDate {
		return nil, fmt.Errorf("%w: x-amz-date must be signed", ErrMalformed)
	}
	return req, nil
}

// CheckPayload verifies body against a hex x-amz-content-sha256 (a no-op
// for UNSIGNED-PAYLOAD). Streaming bodies are verified by ChunkedBody.
func (a *Auth) CheckPayload(body []byte) error {
	switch a.PayloadHash {
	case UnsignedPayload, StreamingPayload:
		return nil
	}
	sum := sha256.Sum256(body)
	want, _ := hex.DecodeString(a.PayloadHash)
	if !hmac.Equal(sum[:], want) {
		return ErrPayloadHash
	}
	return nil
}
