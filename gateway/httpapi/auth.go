package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strings"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/gateway/s3auth"
)

// WithAuth makes every block-API request (everything but /healthz, /readyz
// and /metrics) carry credentials of keys, and lets a request touch only the
// namespaces its key allows. Two forms are accepted:
//
//   - AWS Signature V4 (the Authorization header or a presigned URL), checked
//     by sigv4 — nil uses s3auth.DefaultConfig() (region us-east-1, service
//     s3), so `curl --aws-sigv4 aws:amz:us-east-1:s3` and S3 SDK signers work;
//   - `Authorization: Bearer <accessKeyID>:<secret>`, for simple clients. The
//     secret travels in the clear: use it only over TLS or loopback.
//
// Missing or bad credentials answer 401 Unauthenticated; a namespace outside
// the key's scope answers 403 PermissionDenied whether or not it exists.
func WithAuth(keys credential.Lookuper, sigv4 *s3auth.Verifier) Option {
	return func(s *Server) {
		if sigv4 == nil {
			v, err := s3auth.New(s3auth.DefaultConfig(), keys)
			if err != nil {
				panic(fmt.Sprintf("httpapi: default SigV4 config: %v", err)) // DefaultConfig is valid
			}
			sigv4 = v
		}
		s.keys, s.sigv4 = keys, sigv4
	}
}

// identityKey is the context key of an authenticated request's credential.
type identityKey struct{}

// identity returns the request's credential; ok is false when
// authentication is off (everything is allowed).
func identity(ctx context.Context) (credential.Credential, bool) {
	c, ok := ctx.Value(identityKey{}).(credential.Credential)
	return c, ok
}

// allows reports whether the request may touch namespace ns.
func allows(ctx context.Context, ns string) bool {
	c, ok := identity(ctx)
	return !ok || c.Allows(ns)
}

// denied is the answer for a namespace outside the key's scope: the same
// whether or not the namespace exists, so a key cannot probe for it.
func denied(ns string) error {
	return fmt.Errorf("%w: namespace %q is outside this access key's scope", block.ErrPermissionDenied, ns)
}

var (
	errNoCredentials = fmt.Errorf("%w: credentials required: sign the request with AWS SigV4 or send Authorization: Bearer <accessKeyID>:<secret>", block.ErrUnauthenticated)
	errBadBearer     = fmt.Errorf("%w: Bearer credentials must be <accessKeyID>:<secret>", block.ErrUnauthenticated)
	errStreaming     = fmt.Errorf("%w: aws-chunked (%s) bodies are not accepted by the block API; sign with UNSIGNED-PAYLOAD or the body's SHA-256", block.ErrInvalidArgument, s3auth.StreamingPayload)
)

// authenticate checks r's credentials and returns r carrying the identity
// (and, for a SigV4 hex payload hash, a body that fails unless it hashes to
// it). Every credential failure wraps block.ErrUnauthenticated.
func (s *Server) authenticate(r *http.Request) (*http.Request, error) {
	h := r.Header.Get("Authorization")
	var cred credential.Credential
	if scheme, rest, _ := strings.Cut(h, " "); strings.EqualFold(scheme, "Bearer") {
		c, err := s.bearer(strings.TrimSpace(rest))
		if err != nil {
			return nil, err
		}
		cred = c
	} else {
		a, err := s.sigv4.Verify(r)
		switch {
		case errors.Is(err, s3auth.ErrAnonymous):
			return nil, errNoCredentials
		case err != nil && !errors.Is(err, block.ErrUnauthenticated):
			// A malformed or unsupported signature is still a credential
			// failure: 401, whatever the reason.
			return nil, fmt.Errorf("%w: %v", block.ErrUnauthenticated, err)
		case err != nil:
			return nil, err
		}
		switch a.PayloadHash {
		case s3auth.UnsignedPayload:
		case s3auth.StreamingPayload, s3auth.StreamingTrailer, s3auth.StreamingUnsignedTrailer:
			return nil, errStreaming
		default:
			want, _ := hex.DecodeString(a.PayloadHash) // Verify checked the form
			r.Body = &hashCheckBody{rc: r.Body, h: sha256.New(), want: want, expect: r.ContentLength}
		}
		cred = a.Credential
	}
	return r.WithContext(context.WithValue(r.Context(), identityKey{}, cred)), nil
}

// bearer checks "<accessKeyID>:<secret>", comparing the secret in constant time.
func (s *Server) bearer(tok string) (credential.Credential, error) {
	id, secret, ok := strings.Cut(tok, ":")
	if !ok || id == "" || secret == "" {
		return credential.Credential{}, errBadBearer
	}
	c, err := s.keys.Lookup(id)
	if err != nil {
		return credential.Credential{}, err
	}
	// Hash both sides so the comparison's time does not depend on the
	// length either.
	got, want := sha256.Sum256([]byte(secret)), sha256.Sum256([]byte(c.Secret))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		return credential.Credential{}, fmt.Errorf("%w: wrong secret for access key %q", block.ErrUnauthenticated, id)
	}
	return c, nil
}

// guard authenticates r when authentication is on and authorizes the
// namespace of its path, before the handler (and so the store) sees it.
func (s *Server) guard(r *http.Request) (*http.Request, error) {
	if s.keys == nil {
		return r, nil
	}
	r, err := s.authenticate(r)
	if err != nil {
		return nil, err
	}
	if ns := r.PathValue("ns"); ns != "" && !allows(r.Context(), ns) {
		return nil, denied(ns)
	}
	return r, nil
}

// Authenticate checks that r carries a valid access key's credentials
// (SigV4 or Bearer, as the block API takes them), whatever the key's
// scope; it is nil when authentication is off. A surface that
// authenticates its callers itself (MountOwnAuth) uses it to let clients
// in with their access keys where it would otherwise ask for the cluster
// secret: the cluster API's status read, which cluster-aware clients need
// to route.
func (s *Server) Authenticate(r *http.Request) error {
	if s.keys == nil {
		return nil
	}
	_, err := s.authenticate(r)
	return err
}

// guardAll wraps a mounted surface (routing, KV events): with
// authentication on it needs a key scoped to "*", since those endpoints
// name namespaces in their bodies, where the gateway cannot check them.
func (s *Server) guardAll(h http.Handler) http.Handler {
	if s.keys == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ar, err := s.authenticate(r)
		if err == nil {
			if c, _ := identity(ar.Context()); !c.AllowsAll() {
				err = fmt.Errorf("%w: %s needs an access key scoped to %q", block.ErrPermissionDenied, r.URL.Path, credential.ScopeAll)
			}
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		h.ServeHTTP(w, ar)
	})
}

// hashCheckBody fails a body that does not hash to the SigV4 payload hash
// the client signed. The check runs when the body ends (EOF, or the last
// byte of a declared Content-Length), and a mismatch withholds that last
// read, so a reader sees an error before it has the whole body.
type hashCheckBody struct {
	rc     io.ReadCloser
	h      hash.Hash
	want   []byte
	n      int64
	expect int64 // Content-Length, -1 when unknown
	done   bool
	err    error
}

func (b *hashCheckBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.rc.Read(p)
	if b.done {
		return n, err
	}
	b.h.Write(p[:n])
	b.n += int64(n)
	if err == io.EOF || (b.expect >= 0 && b.n >= b.expect) {
		b.done = true
		if !bytes.Equal(b.h.Sum(nil), b.want) {
			b.err = s3auth.ErrPayloadHash
			return 0, b.err
		}
	}
	return n, err
}

func (b *hashCheckBody) Close() error { return b.rc.Close() }
