package s3auth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/minio/minio-go/v7/pkg/signer"

	"github.com/ctxtier/ctxtier/ctxstore/credential"
)

var (
	testKey = credential.Credential{AccessKeyID: "CTXTESTKEY0000000001", Secret: "secret-secret-secret-secret-secret-secre", Namespaces: []string{"*"}}
	keys    = credential.Static{testKey.AccessKeyID: testKey}
	epoch   = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
)

func newVerifier(t *testing.T) *Verifier {
	t.Helper()
	v, err := New(DefaultConfig(), keys)
	if err != nil {
		t.Fatal(err)
	}
	v.SetClock(func() time.Time { return epoch })
	return v
}

// serverRequest turns a client request into what a server handler sees.
func serverRequest(t *testing.T, c *http.Request) *http.Request {
	t.Helper()
	var body io.Reader = http.NoBody
	if c.Body != nil {
		body = c.Body
	}
	r := httptest.NewRequest(c.Method, c.URL.String(), body)
	r.Host = c.URL.Host
	for k, v := range c.Header {
		r.Header[k] = v
	}
	r.ContentLength = c.ContentLength
	return r
}

func signed(t *testing.T, method, target string, body []byte, secret string, at time.Time, mut func(*http.Request)) *http.Request {
	t.Helper()
	c, _ := http.NewRequest(method, target, bytes.NewReader(body))
	sum := sha256.Sum256(body)
	c.Header.Set("X-Amz-Content-Sha256", hex.EncodeToString(sum[:]))
	if mut != nil {
		mut(c)
	}
	s := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	creds := aws.Credentials{AccessKeyID: testKey.AccessKeyID, SecretAccessKey: secret}
	if err := s.SignHTTP(context.Background(), creds, c, c.Header.Get("X-Amz-Content-Sha256"), "s3", "us-east-1", at); err != nil {
		t.Fatal(err)
	}
	return serverRequest(t, c)
}

func TestVerifyHeader(t *testing.T) {
	v := newVerifier(t)
	body := []byte("block bytes")
	target := "http://127.0.0.1:9000/ns/00000000000000ff.1?x-id=PutObject"
	cases := []struct {
		name string
		req  func() *http.Request
		want error
	}{
		{"good", func() *http.Request { return signed(t, "PUT", target, body, testKey.Secret, epoch, nil) }, nil},
		{"anonymous", func() *http.Request { return httptest.NewRequest("GET", "/", nil) }, ErrAnonymous},
		{"wrong secret", func() *http.Request { return signed(t, "PUT", target, body, "nope", epoch, nil) }, ErrSignature},
		{"skewed", func() *http.Request {
			return signed(t, "PUT", target, body, testKey.Secret, epoch.Add(-16*time.Minute), nil)
		}, ErrSkewed},
		{"tampered path", func() *http.Request {
			r := signed(t, "PUT", target, body, testKey.Secret, epoch, nil)
			r.URL.Path = "/ns/00000000000000fe.1"
			return r
		}, ErrSignature},
		{"tampered signed header", func() *http.Request {
			r := signed(t, "PUT", target, body, testKey.Secret, epoch, func(c *http.Request) { c.Header.Set("X-Amz-Meta-A", "1") })
			r.Header.Set("X-Amz-Meta-A", "2")
			return r
		}, ErrSignature},
		{"unknown key", func() *http.Request {
			r := signed(t, "PUT", target, body, testKey.Secret, epoch, nil)
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), testKey.AccessKeyID, "CTXNOSUCHKEY00000000", 1))
			return r
		}, ErrUnknownKey},
		{"sigv2", func() *http.Request {
			r := httptest.NewRequest("GET", "/", nil)
			r.Header.Set("Authorization", "AWS key:sig")
			return r
		}, ErrSigV2},
		{"garbage", func() *http.Request {
			r := httptest.NewRequest("GET", "/", nil)
			r.Header.Set("Authorization", "AWS4-HMAC-SHA256 junk")
			return r
		}, ErrMalformed},
	}
	for _, tc := range cases {
		a, err := v.Verify(tc.req())
		if !errors.Is(err, tc.want) || (tc.want == nil) != (a != nil) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
			continue
		}
		if a != nil {
			if err := a.CheckPayload(body); err != nil {
				t.Errorf("%s: payload: %v", tc.name, err)
			}
			if err := a.CheckPayload([]byte("other")); !errors.Is(err, ErrPayloadHash) {
				t.Errorf("%s: wrong payload accepted: %v", tc.name, err)
			}
		}
	}
}

func TestVerifyPresigned(t *testing.T) {
	v := newVerifier(t)
	presign := func(target string, at time.Time, expires string) *http.Request {
		c, _ := http.NewRequest("GET", target+"?X-Amz-Expires="+expires, nil)
		s := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
		u, _, err := s.PresignHTTP(context.Background(), aws.Credentials{AccessKeyID: testKey.AccessKeyID, SecretAccessKey: testKey.Secret},
			c, UnsignedPayload, "s3", "us-east-1", at)
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("GET", u, nil)
		r.Host = c.URL.Host
		return r
	}
	target := "http://127.0.0.1:9000/ns/00000000000000ff"
	if _, err := v.Verify(presign(target, epoch.Add(-time.Minute), "300")); err != nil {
		t.Fatalf("good presign: %v", err)
	}
	if _, err := v.Verify(presign(target, epoch.Add(-10*time.Minute), "300")); !errors.Is(err, ErrExpired) {
		t.Fatalf("expired presign: %v", err)
	}
	if _, err := v.Verify(presign(target, epoch, "999999999")); !errors.Is(err, ErrQuery) {
		t.Fatalf("over-long expiry: %v", err)
	}
	r := presign(target, epoch, "300")
	r.URL.Path = "/ns/00000000000000fe"
	if _, err := v.Verify(r); !errors.Is(err, ErrSignature) {
		t.Fatalf("tampered presign: %v", err)
	}
}

func TestChunkedBody(t *testing.T) {
	v := newVerifier(t)
	payload := bytes.Repeat([]byte("0123456789abcdef"), 20000) // 320000 bytes: several 64 KiB chunks
	build := func() *http.Request {
		c, _ := http.NewRequest("PUT", "http://127.0.0.1:9000/ns/00000000000000ff", bytes.NewReader(payload))
		c.ContentLength = int64(len(payload))
		// minio-go's client-side streaming signer produces the body.
		c = signer.StreamingSignV4(c, testKey.AccessKeyID, testKey.Secret, "", "us-east-1", int64(len(payload)), epoch, closingHash{sha256.New()})
		wire, err := io.ReadAll(c.Body)
		if err != nil {
			t.Fatal(err)
		}
		c.Body = io.NopCloser(bytes.NewReader(wire))
		c.ContentLength = int64(len(wire))
		return serverRequest(t, c)
	}
	r := build()
	a, err := v.Verify(r)
	if err != nil {
		t.Fatal(err)
	}
	if a.PayloadHash != StreamingPayload {
		t.Fatalf("payload mode %q", a.PayloadHash)
	}
	got, err := io.ReadAll(a.ChunkedBody(r.Body, int64(len(payload))))
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("decoded %d bytes, %v", len(got), err)
	}

	// A flipped data byte breaks that chunk's signature.
	r = build()
	wire, _ := io.ReadAll(r.Body)
	wire[200] ^= 1
	a, _ = v.Verify(r)
	if _, err := io.ReadAll(a.ChunkedBody(bytes.NewReader(wire), int64(len(payload)))); !errors.Is(err, ErrSignature) {
		t.Fatalf("tampered chunk: %v", err)
	}
	// A wrong decoded length is refused.
	r = build()
	a, _ = v.Verify(r)
	if _, err := io.ReadAll(a.ChunkedBody(r.Body, int64(len(payload))-1)); !errors.Is(err, ErrChunk) {
		t.Fatalf("short decoded length: %v", err)
	}
}

// closingHash adapts hash.Hash to minio-go's md5simd.Hasher.
type closingHash struct{ hash.Hash }

func (closingHash) Close() {}

// FuzzChunkedBody feeds arbitrary bytes to the aws-chunked decoder: it must
// never panic, and must never yield bytes that were not covered by a valid
// chunk signature (random input never carries one).
func FuzzChunkedBody(f *testing.F) {
	f.Add([]byte("5;chunk-signature=" + strings.Repeat("0", 64) + "\r\nhello\r\n0;chunk-signature=" + strings.Repeat("0", 64) + "\r\n\r\n"))
	f.Add([]byte("fffffffff;chunk-signature=x\r\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, _ := New(DefaultConfig(), keys)
		a := &Auth{Credential: testKey, PayloadHash: StreamingPayload, v: v, signature: make([]byte, 32), time: epoch}
		got, err := io.ReadAll(a.ChunkedBody(bytes.NewReader(b), 5))
		if err == nil || len(got) > 0 {
			t.Fatalf("unsigned input accepted: %q, %v", got, err)
		}
	})
}
