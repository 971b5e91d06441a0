package s3auth

import (
	"bytes"
	"errors"
	"net/http"
	"testing"

	"github.com/ctxtier/ctxtier/internal/sigv4"
)

// TestAcceptsSigv4Signer: requests signed by internal/sigv4 (the Go
// client's signer) pass Verify, with a hashed or an unsigned payload, and
// a wrong secret, a changed signed header or a changed path fails it.
func TestAcceptsSigv4Signer(t *testing.T) {
	v := newVerifier(t)
	body := []byte("block bytes")
	sign := func(t *testing.T, secret, method, target string, body []byte, payload string, mut func(*http.Request)) *http.Request {
		t.Helper()
		s, err := sigv4.New(sigv4.Config{AccessKeyID: testKey.AccessKeyID, Secret: secret, Region: "us-east-1", Service: "s3"})
		if err != nil {
			t.Fatal(err)
		}
		c, err := http.NewRequest(method, target, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body == nil {
			c.Body, c.ContentLength = nil, 0
		}
		c.Header.Set("X-Amz-Content-Sha256", payload)
		c.Header.Set("X-Ctxtier-Read", "linearizable")
		if err := s.Sign(c, payload, epoch); err != nil {
			t.Fatal(err)
		}
		if mut != nil {
			mut(c)
		}
		return serverRequest(t, c)
	}
	const target = "http://127.0.0.1:9000/v1/namespaces/a%20b/blocks/00000000000000ff.1?x-id=PutObject&b=2&b=1"
	cases := []struct {
		name    string
		req     func(t *testing.T) *http.Request
		want    error
		payload string
	}{
		{"hashed payload", func(t *testing.T) *http.Request {
			return sign(t, testKey.Secret, "PUT", target, body, sigv4.HashHex(body), nil)
		}, nil, sigv4.HashHex(body)},
		{"unsigned payload", func(t *testing.T) *http.Request {
			return sign(t, testKey.Secret, "PUT", target, body, sigv4.UnsignedPayload, nil)
		}, nil, sigv4.UnsignedPayload},
		{"get without body", func(t *testing.T) *http.Request {
			return sign(t, testKey.Secret, "GET", "http://127.0.0.1:9000/v1/namespaces/a/blocks/00", nil, sigv4.UnsignedPayload, nil)
		}, nil, sigv4.UnsignedPayload},
		{"wrong secret", func(t *testing.T) *http.Request {
			return sign(t, "not-the-secret", "PUT", target, body, sigv4.UnsignedPayload, nil)
		}, ErrSignature, ""},
		{"signed header changed", func(t *testing.T) *http.Request {
			return sign(t, testKey.Secret, "PUT", target, body, sigv4.UnsignedPayload, func(r *http.Request) { r.Header.Set("X-Ctxtier-Read", "local") })
		}, ErrSignature, ""},
		{"path changed", func(t *testing.T) *http.Request {
			return sign(t, testKey.Secret, "PUT", target, body, sigv4.UnsignedPayload, func(r *http.Request) { r.URL.Path += "x"; r.URL.RawPath = "" })
		}, ErrSignature, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, err := v.Verify(tc.req(t))
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify: %v, want %v", err, tc.want)
			}
			if err == nil && (a.Credential.AccessKeyID != testKey.AccessKeyID || a.PayloadHash != tc.payload || a.CheckPayload(body) != nil) {
				t.Fatalf("auth %+v", a)
			}
		})
	}
}
