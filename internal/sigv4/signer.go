package sigv4

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Config configures a Signer.
type Config struct {
	// AccessKeyID and Secret are the credential.
	AccessKeyID, Secret string
	// Region and Service complete the credential scope.
	Region, Service string
}

// DefaultConfig returns us-east-1 and service s3, without a credential.
func DefaultConfig() Config {
	return Config{Region: "us-east-1", Service: "s3"}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.AccessKeyID == "" || c.Secret == "":
		return fmt.Errorf("%w: access key id and secret are required", ErrConfig)
	case strings.ContainsAny(c.AccessKeyID, "/, \t\r\n"):
		return fmt.Errorf("%w: access key id %q has a separator in it", ErrConfig, c.AccessKeyID)
	case c.Region == "" || c.Service == "" || strings.Contains(c.Region+c.Service, "/"):
		return fmt.Errorf("%w: region and service must be non-empty and without '/'", ErrConfig)
	}
	return nil
}

// Signer signs HTTP requests in the Authorization header. It is safe for
// concurrent use.
type Signer struct {
	cfg Config
	// key is the last day's signing key: deriving it is four HMACs, and a
	// day's requests all use the same one.
	key atomic.Pointer[dayKey]
}

// dayKey is the signing key of one date (DateFormat).
type dayKey struct {
	date string
	key  []byte
}

// signingKey returns the signing key of date, derived once per date.
func (s *Signer) signingKey(date string) []byte {
	if k := s.key.Load(); k != nil && k.date == date {
		return k.key
	}
	k := &dayKey{date: date, key: SigningKey(s.cfg.Secret, date, s.cfg.Region, s.cfg.Service)}
	s.key.Store(k)
	return k.key
}

// New returns a signer for cfg.
func New(cfg Config) (*Signer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Signer{cfg: cfg}, nil
}

// Sign signs r as made at t over payloadHash (a hex SHA-256 of the body,
// or UnsignedPayload): it sets X-Amz-Date and Authorization, replacing
// earlier ones. It does not set X-Amz-Content-Sha256; a service that wants
// it (S3 does) needs it set before Sign so that it is signed. A host with
// its scheme's default port (:80 for http, :443 for https) is signed, and
// sent, without it.
func (s *Signer) Sign(r *http.Request, payloadHash string, t time.Time) error {
	if payloadHash == "" {
		return fmt.Errorf("%w: empty payload hash", ErrRequest)
	}
	if r.URL == nil {
		return fmt.Errorf("%w: no URL", ErrRequest)
	}
	if r.Header == nil {
		r.Header = http.Header{}
	}
	stripDefaultPort(r)
	r.Header.Del("Authorization")
	r.Header.Set("X-Amz-Date", t.UTC().Format(TimeFormat))
	c, err := CanonicalRequest(r, payloadHash)
	if err != nil {
		return err
	}
	date := t.UTC().Format(DateFormat)
	scope := Scope(date, s.cfg.Region, s.cfg.Service)
	sig := HMAC(s.signingKey(date), []byte(StringToSign(Algorithm, t, scope, HashHex([]byte(c.Request)))))
	r.Header.Set("Authorization", Algorithm+" Credential="+s.cfg.AccessKeyID+"/"+scope+
		", SignedHeaders="+c.SignedHeaders+", Signature="+hex.EncodeToString(sig))
	return nil
}

// stripDefaultPort sets r.Host to its host without the port when that port
// is the default of r's scheme, as HTTP clients send it.
func stripDefaultPort(r *http.Request) {
	host := r.Host
	if host == "" {
		host = r.URL.Host
	}
	var def string
	switch strings.ToLower(r.URL.Scheme) {
	case "http":
		def = ":80"
	case "https":
		def = ":443"
	default:
		return
	}
	if h, ok := strings.CutSuffix(host, def); ok && h != "" && (!strings.HasPrefix(h, "[") || strings.HasSuffix(h, "]")) {
		r.Host = h
	}
}
