// Package s3auth verifies AWS Signature Version 4 on incoming S3 requests:
// the Authorization header form, presigned URLs (query form), payload hashes
// (x-amz-content-sha256) and aws-chunked streaming uploads, signed
// (STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]) or unsigned with a trailing
// checksum (STREAMING-UNSIGNED-PAYLOAD-TRAILER). Canonicalization and signing are done
// by aws-sdk-go-v2's signer: this package only parses what the client
// claims, rebuilds the request from the headers the client says it signed,
// has the SDK sign that, and compares in constant time. Signing keys,
// strings to sign and the signatures the SDK has no form for (trailers, a
// signed content-length of 0) come from internal/sigv4, the signer the Go
// client uses.
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
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/internal/sigv4"
)

// Payload hash values a client may send in x-amz-content-sha256.
const (
	UnsignedPayload  = sigv4.UnsignedPayload
	StreamingPayload = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
	// StreamingTrailer is StreamingPayload followed by signed trailing headers
	// (a checksum named by x-amz-trailer) and x-amz-trailer-signature.
	StreamingTrailer = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
	// StreamingUnsignedTrailer is aws-chunked framing without chunk
	// signatures, followed by a trailing checksum (what the AWS SDKs send
	// over HTTPS by default).
	StreamingUnsignedTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
	// EmptySHA256 is the hex SHA-256 of no bytes.
	EmptySHA256 = sigv4.EmptySHA256

	algorithm  = sigv4.Algorithm
	timeFormat = sigv4.TimeFormat
	dateFormat = sigv4.DateFormat
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
	// ErrPayloadMalformed: x-amz-content-sha256 is neither a SHA-256 nor a
	// known payload mode (AWS answers 400 InvalidArgument).
	ErrPayloadMalformed = fmt.Errorf("%w: x-amz-content-sha256 must be UNSIGNED-PAYLOAD, a STREAMING-* mode or a SHA-256", block.ErrInvalidArgument)
	// ErrChunk: a malformed aws-chunked body.
	ErrChunk = fmt.Errorf("%w: malformed aws-chunked body", block.ErrInvalidArgument)
	// ErrDate: a header-signed request without a valid x-amz-date (AWS
	// answers 403 AccessDenied).
	ErrDate = fmt.Errorf("%w: AWS authentication requires a valid Date or x-amz-date header", block.ErrUnauthenticated)
	// ErrQuery: a presigned URL whose X-Amz-* query parameters cannot be
	// parsed or do not match this server (AWS's AuthorizationQueryParametersError).
	ErrQuery = fmt.Errorf("%w: malformed presigned query", block.ErrInvalidArgument)
	// ErrUnsignedHeaders: x-amz-* headers the signature does not cover.
	// Errors carrying it are *HeadersNotSignedError, which names them.
	ErrUnsignedHeaders = fmt.Errorf("%w: there were headers present in the request which were not signed", block.ErrPermissionDenied)
	// ErrTrailer: a missing, undeclared or malformed trailing header.
	ErrTrailer = fmt.Errorf("%w: malformed trailing headers", block.ErrInvalidArgument)
	// ErrTrailerValue: an x-amz-trailer naming no supported checksum.
	ErrTrailerValue = fmt.Errorf("%w: unsupported x-amz-trailer", ErrUnsupported)
	// ErrAuthType: an Authorization header of an unknown scheme.
	ErrAuthType = fmt.Errorf("%w: unsupported authorization type", block.ErrInvalidArgument)
)

// HeadersNotSignedError names the x-amz-* headers a request carried
// without signing them. It matches ErrUnsignedHeaders.
type HeadersNotSignedError struct {
	Headers []string // lower case, sorted
}

func (e *HeadersNotSignedError) Error() string {
	return ErrUnsignedHeaders.Error() + ": " + strings.Join(e.Headers, ", ")
}

// Unwrap returns ErrUnsignedHeaders.
func (e *HeadersNotSignedError) Unwrap() error { return ErrUnsignedHeaders }

// awsError is a verification error carrying the message AWS gives clients
// for it, so S3 tools and conformance suites see AWS's words.
type awsError struct {
	base   error
	msg    string
	fields [][2]string // extra elements of AWS's error body (name, value)
}

func (e *awsError) Error() string { return e.base.Error() + ": " + e.msg }
func (e *awsError) Unwrap() error { return e.base }

func awsErr(base error, format string, a ...any) error {
	return &awsError{base: base, msg: fmt.Sprintf(format, a...)}
}

// withFields adds extra error-body elements (AWS's ArgumentName, Region,
// AWSAccessKeyId, ServerTime...) to an awsError.
func withFields(err error, kv ...string) error {
	ae := err.(*awsError) //nolint:errorlint // err is always a fresh awsErr(...): anything else is a programming error
	for i := 0; i+1 < len(kv); i += 2 {
		ae.fields = append(ae.fields, [2]string{kv[i], kv[i+1]})
	}
	return ae
}

// Message returns the client-facing S3 error message of err, when s3auth
// gave it one.
func Message(err error) (string, bool) {
	var ae *awsError
	if errors.As(err, &ae) {
		return ae.msg, true
	}
	return "", false
}

// Fields returns the extra elements AWS puts in the error body for err
// (name, value pairs), if any. They never include a secret or signature.
func Fields(err error) [][2]string {
	var ae *awsError
	if errors.As(err, &ae) {
		return ae.fields
	}
	return nil
}

// Messages AWS gives for these failures.
const (
	msgHeaderMalformed = "The authorization header is malformed; "
	msgQueryCredential = "Error parsing the X-Amz-Credential parameter; "
	msgQueryRequired   = "Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters."
	msgPayloadHash     = "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-UNSIGNED-PAYLOAD-TRAILER, STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER, STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD, STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD-TRAILER or a valid sha256 value."
)

// errSignature is ErrSignature with AWS's message.
var errSignature = awsErr(ErrSignature, "The request signature we calculated does not match the signature you provided. Check your key and signing method.")

// trailerChecksums are the trailing headers x-amz-trailer may declare.
var trailerChecksums = map[string]bool{
	"x-amz-checksum-crc32": true, "x-amz-checksum-crc32c": true, "x-amz-checksum-crc64nvme": true,
	"x-amz-checksum-sha1": true, "x-amz-checksum-sha256": true,
}

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
	// UnsignedPayload, StreamingPayload, StreamingTrailer or
	// StreamingUnsignedTrailer.
	PayloadHash string
	// Trailer is the trailing checksum header x-amz-trailer declares (lower
	// case), for the two trailer payload modes.
	Trailer   string
	Presigned bool

	v         *Verifier
	signature []byte // the request signature, seed of the chunk chain
	time      time.Time
}

// Streaming reports whether the body is aws-chunked (decode it with ChunkedBody).
func (a *Auth) Streaming() bool {
	switch a.PayloadHash {
	case StreamingPayload, StreamingTrailer, StreamingUnsignedTrailer:
		return true
	}
	return false
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

// parseScope splits "<key>/<date>/<region>/<service>/aws4_request" and
// checks each part. base is the sentinel its errors wrap (ErrMalformed or
// ErrQuery) and prefix AWS's message prefix for it.
func (v *Verifier) parseScope(s string, base error, prefix string) (scope, error) {
	p := strings.Split(s, "/")
	if len(p) != 5 || p[0] == "" {
		return scope{}, awsErr(base, "%sthe Credential is mal-formed; expecting \"<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request\".", prefix)
	}
	sc := scope{id: p[0], date: p[1], region: p[2], service: p[3]}
	// The order AWS checks the parts in.
	if p[4] != "aws4_request" {
		return scope{}, awsErr(base, "%sincorrect terminal %q. This endpoint uses \"aws4_request\".", prefix, printable(p[4]))
	}
	if sc.service != "s3" {
		return scope{}, awsErr(base, "%sincorrect service %q. This endpoint belongs to \"s3\".", prefix, printable(sc.service))
	}
	if sc.region != v.cfg.Region {
		return scope{}, withFields(awsErr(base, "%sthe region %q is wrong; expecting %q", prefix, printable(sc.region), v.cfg.Region), "Region", v.cfg.Region)
	}
	if _, err := time.Parse(dateFormat, sc.date); err != nil || len(sc.date) != 8 {
		return scope{}, awsErr(base, "%sincorrect date format %q. This date in the credential must be in the format \"yyyyMMdd\".", prefix, printable(sc.date))
	}
	return sc, nil
}

// checkDate requires the scope's date to be the request's.
func checkDate(sc scope, t time.Time, base error, prefix string) error {
	if sc.date != t.Format(dateFormat) {
		return awsErr(base, "%sInvalid credential date %q. This date is not the same as X-Amz-Date: %q.", prefix, sc.date, t.Format(dateFormat))
	}
	return nil
}

func (v *Verifier) lookup(id string) (credential.Credential, error) {
	c, err := v.keys.Lookup(id)
	if err != nil {
		if errors.Is(err, block.ErrUnauthenticated) {
			return credential.Credential{}, withFields(awsErr(ErrUnknownKey, "The AWS Access Key Id you provided does not exist in our records."), "AWSAccessKeyId", bounded(id, 128))
		}
		return credential.Credential{}, err
	}
	return c, nil
}

// parseAuthorization splits "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...".
// Its errors never quote the signature.
func parseAuthorization(h string) (cred, signed, sig string, err error) {
	alg, rest, ok := strings.Cut(h, " ")
	if !ok {
		return "", "", "", withFields(awsErr(ErrAuthType, "Authorization header is invalid -- one and only one ' ' (space) required."),
			"ArgumentName", "Authorization", "ArgumentValue", printable(h))
	}
	if alg != algorithm {
		if alg == "AWS" {
			return "", "", "", ErrSigV2
		}
		return "", "", "", withFields(awsErr(ErrAuthType, "Unsupported Authorization Type"), "ArgumentName", "Authorization", "ArgumentValue", printable(alg))
	}
	parts := strings.Split(rest, ",")
	if len(parts) < 3 {
		return "", "", "", awsErr(ErrMalformed, "%sthe authorization header requires three components: Credential, SignedHeaders, and Signature.", msgHeaderMalformed)
	}
	malformed := ""
	for _, part := range parts {
		part = strings.TrimSpace(part)
		k, val, ok := strings.Cut(part, "=")
		switch {
		case !ok:
			if malformed == "" {
				malformed = part
			}
		case k == "Credential":
			cred = val
		case k == "SignedHeaders":
			signed = val
		case k == "Signature":
			sig = val
		}
	}
	switch {
	case malformed != "":
		if strings.HasPrefix(malformed, "Signature") {
			malformed = "Signature..." // never echo a signature
		}
		return "", "", "", awsErr(ErrMalformed, "%sthe authorization component %q is malformed.", msgHeaderMalformed, printable(malformed))
	case cred == "":
		return "", "", "", awsErr(ErrMalformed, "%smissing Credential.", msgHeaderMalformed)
	case signed == "":
		return "", "", "", awsErr(ErrMalformed, "%smissing SignedHeaders.", msgHeaderMalformed)
	case sig == "":
		return "", "", "", awsErr(ErrMalformed, "%smissing Signature.", msgHeaderMalformed)
	}
	return cred, signed, sig, nil
}

// printable bounds a client-supplied token quoted in an error.
func printable(s string) string { return bounded(s, 32) }

func bounded(s string, n int) string {
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}

func parseSignature(sig string, base error) ([]byte, error) {
	b, err := hex.DecodeString(sig)
	if err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("%w: signature must be 64 hex digits", base)
	}
	return b, nil
}

func validPayloadHash(h string) error {
	switch h {
	case UnsignedPayload, StreamingPayload, StreamingTrailer, StreamingUnsignedTrailer:
		return nil
	case "":
		return fmt.Errorf("%w: x-amz-content-sha256 is required", ErrMalformed)
	}
	if strings.HasPrefix(h, "STREAMING-AWS4-ECDSA-") {
		return fmt.Errorf("%w: payload mode %q (SigV4A) is not supported", ErrUnsupported, printable(h))
	}
	if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
		return withFields(awsErr(ErrPayloadMalformed, "%s", msgPayloadHash), "ArgumentName", "x-amz-content-sha256", "ArgumentValue", printable(h))
	}
	return nil
}

// trailerName checks x-amz-trailer for the trailer payload modes: none, or
// one checksum header.
func trailerName(r *http.Request, payload string) (string, error) {
	vals := r.Header.Values("X-Amz-Trailer")
	if payload != StreamingTrailer && payload != StreamingUnsignedTrailer {
		if len(vals) > 0 {
			return "", awsErr(ErrTrailer, "The request contained trailing data that was not well-formed or did not conform to our published schema.")
		}
		return "", nil
	}
	if len(vals) == 0 {
		return "", nil // no trailer: the body ends with the last chunk
	}
	if len(vals) > 1 {
		return "", awsErr(ErrTrailerValue, "The value specified in the x-amz-trailer header is not supported")
	}
	name := strings.ToLower(strings.TrimSpace(vals[0]))
	if !trailerChecksums[name] {
		return "", awsErr(ErrTrailerValue, "The value specified in the x-amz-trailer header is not supported")
	}
	return name, nil
}

// unsignedAmzHeaders returns the x-amz-* headers of r that signed (a
// SignedHeaders list) does not name. For presigned URLs the query's own
// X-Amz-* parameters are signed and not headers.
func unsignedAmzHeaders(r *http.Request, signed string) error {
	names := map[string]bool{}
	for _, h := range strings.Split(signed, ";") {
		names[h] = true
	}
	var missing []string
	for k := range r.Header {
		lk := strings.ToLower(k)
		if strings.HasPrefix(lk, "x-amz-") && !names[lk] {
			missing = append(missing, lk)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	sort.Strings(missing)
	return &HeadersNotSignedError{Headers: missing}
}

func (v *Verifier) verifyHeader(r *http.Request, h string) (*Auth, error) {
	credStr, signedStr, sigStr, err := parseAuthorization(h)
	if err != nil {
		return nil, err
	}
	sig, err := parseSignature(sigStr, ErrMalformed)
	if err != nil {
		return nil, err
	}
	sc, err := v.parseScope(credStr, ErrMalformed, msgHeaderMalformed)
	if err != nil {
		return nil, err
	}
	amzDate := r.Header.Get("X-Amz-Date")
	t, err := time.Parse(timeFormat, amzDate)
	if err != nil {
		return nil, awsErr(ErrDate, "AWS authentication requires a valid Date or x-amz-date header.")
	}
	if err := checkDate(sc, t, ErrMalformed, msgHeaderMalformed); err != nil {
		return nil, err
	}
	if d := v.now().Sub(t); d > v.cfg.MaxSkew || d < -v.cfg.MaxSkew {
		return nil, awsErr(ErrSkewed, "The difference between the request time (%s) and the server's time (%s) is too large.", t.Format(timeFormat), v.now().UTC().Format(timeFormat))
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if err := validPayloadHash(payload); err != nil {
		return nil, err
	}
	trailer, err := trailerName(r, payload)
	if err != nil {
		return nil, err
	}
	if err := unsignedAmzHeaders(r, signedStr); err != nil {
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
	if zeroLengthSigned(r, signedStr) {
		gotSigned, want, err := v.signZeroLength(r.Context(), creds, req, payload, t)
		if err != nil {
			return nil, err
		}
		if gotSigned != signedStr || !hmac.Equal(want, sig) {
			return nil, errSignature
		}
		return &Auth{Credential: c, PayloadHash: payload, Trailer: trailer, v: v, signature: sig, time: t}, nil
	}
	if err := v.signer.SignHTTP(r.Context(), creds, req, payload, "s3", v.cfg.Region, t); err != nil {
		return nil, fmt.Errorf("%w: signing failed", ErrSignature)
	}
	_, gotSigned, gotSig, err := parseAuthorization(req.Header.Get("Authorization"))
	if err != nil {
		return nil, err
	}
	want, _ := hex.DecodeString(gotSig)
	if gotSigned != signedStr || !hmac.Equal(want, sig) {
		return nil, errSignature
	}
	return &Auth{Credential: c, PayloadHash: payload, Trailer: trailer, v: v, signature: sig, time: t}, nil
}

func (v *Verifier) verifyQuery(r *http.Request) (*Auth, error) {
	q := r.URL.Query()
	for _, p := range []string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Signature", "X-Amz-Date", "X-Amz-SignedHeaders", "X-Amz-Expires"} {
		if q.Get(p) == "" {
			return nil, awsErr(ErrQuery, "%s", msgQueryRequired)
		}
	}
	if q.Get("X-Amz-Algorithm") != algorithm {
		return nil, awsErr(ErrQuery, "X-Amz-Algorithm only supports %q", algorithm)
	}
	sig, err := parseSignature(q.Get("X-Amz-Signature"), ErrQuery)
	if err != nil {
		return nil, err
	}
	sc, err := v.parseScope(q.Get("X-Amz-Credential"), ErrQuery, msgQueryCredential)
	if err != nil {
		return nil, err
	}
	t, err := time.Parse(timeFormat, q.Get("X-Amz-Date"))
	if err != nil {
		return nil, awsErr(ErrQuery, "X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"")
	}
	exp, err := strconv.ParseInt(q.Get("X-Amz-Expires"), 10, 64)
	switch {
	case err != nil:
		return nil, awsErr(ErrQuery, "X-Amz-Expires should be a number")
	case exp < 0:
		return nil, awsErr(ErrQuery, "X-Amz-Expires must be non-negative")
	case time.Duration(exp)*time.Second > v.cfg.MaxPresignExpiry:
		return nil, awsErr(ErrQuery, "X-Amz-Expires must be less than a week (in seconds); that is, the given X-Amz-Expires must be less than %d seconds", int64(v.cfg.MaxPresignExpiry/time.Second))
	}
	signedStr := q.Get("X-Amz-SignedHeaders")
	if err := checkDate(sc, t, ErrQuery, ""); err != nil {
		return nil, err
	}
	now := v.now()
	if now.Before(t.Add(-v.cfg.MaxSkew)) {
		return nil, awsErr(ErrExpired, "Request is not valid yet.")
	}
	if !now.Before(t.Add(time.Duration(exp) * time.Second)) {
		return nil, withFields(awsErr(ErrExpired, "Request has expired."), "X-Amz-Expires", strconv.FormatInt(exp, 10),
			"Expires", t.Add(time.Duration(exp)*time.Second).UTC().Format(time.RFC3339), "ServerTime", now.UTC().Format(time.RFC3339))
	}
	payload := UnsignedPayload
	if p := q.Get("X-Amz-Content-Sha256"); p != "" {
		payload = p
	}
	if strings.HasPrefix(payload, "STREAMING-") {
		return nil, fmt.Errorf("%w: streaming payloads need header signing", ErrUnsupported)
	}
	if err := validPayloadHash(payload); err != nil {
		return nil, err
	}
	if err := unsignedAmzHeaders(r, signedStr); err != nil {
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
		return nil, fmt.Errorf("%w: signing failed", ErrSignature)
	}
	u, err := url.Parse(signedURL)
	if err != nil {
		return nil, fmt.Errorf("%w: signed URL does not parse", ErrSignature)
	}
	uq := u.Query()
	want, _ := hex.DecodeString(uq.Get("X-Amz-Signature"))
	if uq.Get("X-Amz-SignedHeaders") != signedStr || !hmac.Equal(want, sig) {
		return nil, errSignature
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
				return nil, fmt.Errorf("%w: signed header %q is missing", ErrSignature, printable(h))
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
	case UnsignedPayload, StreamingPayload, StreamingTrailer, StreamingUnsignedTrailer:
		return nil
	}
	sum := sha256.Sum256(body)
	want, _ := hex.DecodeString(a.PayloadHash)
	if !hmac.Equal(sum[:], want) {
		return ErrPayloadHash
	}
	return nil
}
