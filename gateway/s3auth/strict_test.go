package s3auth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/minio/minio-go/v7/pkg/signer"
)

// TestVerifyHeaderStrict covers what a header-signed request must carry:
// a valid x-amz-date, every x-amz-* header signed, a known payload mode and,
// for trailer modes, one declared checksum trailer.
func TestVerifyHeaderStrict(t *testing.T) {
	v := newVerifier(t)
	target := "http://127.0.0.1:9000/ns/00000000000000ff"
	body := []byte("bytes")
	// after signing, mutate what the server sees
	cases := []struct {
		name     string
		sign     func(*http.Request) // before signing
		after    func(*http.Request) // after signing
		want     error
		unsigned []string
	}{
		{name: "good, extra non-amz headers unsigned", after: func(r *http.Request) {
			r.Header.Set("Content-Type", "text/plain")
			r.Header.Set("X-Custom-Header", "v")
		}},
		{name: "missing x-amz-date", after: func(r *http.Request) { r.Header.Del("X-Amz-Date") }, want: ErrDate},
		{name: "empty x-amz-date", after: func(r *http.Request) { r.Header.Set("X-Amz-Date", "") }, want: ErrDate},
		{name: "bad x-amz-date", after: func(r *http.Request) { r.Header.Set("X-Amz-Date", "03032006") }, want: ErrDate},
		{name: "unsigned x-amz-meta", after: func(r *http.Request) { r.Header.Set("X-Amz-Meta-Owner", "eve") },
			want: ErrUnsignedHeaders, unsigned: []string{"x-amz-meta-owner"}},
		{name: "two unsigned x-amz headers", after: func(r *http.Request) {
			r.Header.Set("X-Amz-Tagging", "a=b")
			r.Header.Set("X-Amz-Copy-Source", "b/k")
		}, want: ErrUnsignedHeaders, unsigned: []string{"x-amz-copy-source", "x-amz-tagging"}},
		{name: "signed x-amz-meta", sign: func(r *http.Request) { r.Header.Set("X-Amz-Meta-Owner", "bob") }},
		{name: "malformed payload hash", sign: func(r *http.Request) { r.Header.Set("X-Amz-Content-Sha256", "invalid_sha256") },
			want: ErrPayloadMalformed},
		{name: "unknown streaming mode", sign: func(r *http.Request) {
			r.Header.Set("X-Amz-Content-Sha256", "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD")
		}, want: ErrUnsupported},
		{name: "trailer mode without x-amz-trailer (no trailer follows)", sign: func(r *http.Request) {
			r.Header.Set("X-Amz-Content-Sha256", StreamingUnsignedTrailer)
		}},
		{name: "x-amz-trailer naming a non-checksum", sign: func(r *http.Request) {
			r.Header.Set("X-Amz-Content-Sha256", StreamingUnsignedTrailer)
			r.Header.Set("X-Amz-Trailer", "x-amz-meta-a")
		}, want: ErrTrailerValue},
		{name: "x-amz-trailer without a trailer mode", sign: func(r *http.Request) {
			r.Header.Set("X-Amz-Trailer", "x-amz-checksum-crc32")
		}, want: ErrTrailer},
		{name: "trailer mode", sign: func(r *http.Request) {
			r.Header.Set("X-Amz-Content-Sha256", StreamingTrailer)
			r.Header.Set("X-Amz-Trailer", "x-amz-checksum-crc32c")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := signed(t, "PUT", target, body, testKey.Secret, epoch, tc.sign)
			if tc.after != nil {
				tc.after(r)
			}
			a, err := v.Verify(r)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (a != nil) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			var hns *HeadersNotSignedError
			if tc.unsigned != nil && (!errors.As(err, &hns) || strings.Join(hns.Headers, ",") != strings.Join(tc.unsigned, ",")) {
				t.Fatalf("unsigned headers %v, want %v", hns, tc.unsigned)
			}
		})
	}
}

// TestVerifyPresignedStrict: presigned-URL query errors are ErrQuery
// (AuthorizationQueryParametersError), expiry is ErrExpired, and x-amz-*
// headers the URL does not sign are refused.
func TestVerifyPresignedStrict(t *testing.T) {
	v := newVerifier(t)
	good := func() url.Values {
		c, _ := http.NewRequest("GET", "http://127.0.0.1:9000/ns/00000000000000ff?X-Amz-Expires=300", nil)
		s := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
		u, _, err := s.PresignHTTP(context.Background(), aws.Credentials{AccessKeyID: testKey.AccessKeyID, SecretAccessKey: testKey.Secret},
			c, UnsignedPayload, "s3", "us-east-1", epoch.Add(-time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		pu, _ := url.Parse(u)
		return pu.Query()
	}
	cases := []struct {
		name   string
		mut    func(url.Values)
		header func(*http.Request)
		want   error
	}{
		{name: "good"},
		{name: "bad algorithm", mut: func(q url.Values) { q.Set("X-Amz-Algorithm", "AWS4-HMAC-SHA1") }, want: ErrQuery},
		{name: "bad credential", mut: func(q url.Values) { q.Set("X-Amz-Credential", "junk") }, want: ErrQuery},
		{name: "wrong region", mut: func(q url.Values) {
			q.Set("X-Amz-Credential", strings.Replace(q.Get("X-Amz-Credential"), "us-east-1", "eu-west-1", 1))
		}, want: ErrQuery},
		{name: "missing date", mut: func(q url.Values) { q.Del("X-Amz-Date") }, want: ErrQuery},
		{name: "bad date", mut: func(q url.Values) { q.Set("X-Amz-Date", "yesterday") }, want: ErrQuery},
		{name: "expires not a number", mut: func(q url.Values) { q.Set("X-Amz-Expires", "soon") }, want: ErrQuery},
		{name: "negative expires", mut: func(q url.Values) { q.Set("X-Amz-Expires", "-1") }, want: ErrQuery},
		{name: "expires over a week", mut: func(q url.Values) { q.Set("X-Amz-Expires", "604801") }, want: ErrQuery},
		{name: "bad signature", mut: func(q url.Values) { q.Set("X-Amz-Signature", "zz") }, want: ErrQuery},
		{name: "no signed headers", mut: func(q url.Values) { q.Del("X-Amz-SignedHeaders") }, want: ErrQuery},
		{name: "expired", mut: func(q url.Values) {
			q.Set("X-Amz-Date", epoch.Add(-6*time.Minute).Format(timeFormat))
		}, want: ErrExpired},
		{name: "wrong signature", mut: func(q url.Values) { q.Set("X-Amz-Signature", strings.Repeat("ab", 32)) }, want: ErrSignature},
		{name: "unsigned x-amz header", header: func(r *http.Request) { r.Header.Set("X-Amz-Meta-A", "1") }, want: ErrUnsignedHeaders},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := good()
			if tc.mut != nil {
				tc.mut(q)
			}
			r := httptest.NewRequest("GET", "http://127.0.0.1:9000/ns/00000000000000ff?"+q.Encode(), nil)
			r.Host = "127.0.0.1:9000"
			if tc.header != nil {
				tc.header(r)
			}
			a, err := v.Verify(r)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (a != nil) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func crc32cB64(b []byte) string {
	return base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))))
}

// minioTrailerRequest builds a STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER
// upload with minio-go's own streaming signer, trailer value as given, and
// returns the server's view of it and the wire body.
func minioTrailerRequest(t *testing.T, payload []byte, trailerValue string) (*http.Request, []byte) {
	t.Helper()
	c, _ := http.NewRequest("PUT", "http://127.0.0.1:9000/ns/00000000000000ff", bytes.NewReader(payload))
	c.ContentLength = int64(len(payload))
	c.Trailer = http.Header{"X-Amz-Checksum-Crc32c": {trailerValue}}
	c = signer.StreamingSignV4(c, testKey.AccessKeyID, testKey.Secret, "", "us-east-1", int64(len(payload)), epoch, closingHash{sha256.New()})
	wire, err := io.ReadAll(c.Body)
	if err != nil {
		t.Fatal(err)
	}
	c.Body = io.NopCloser(bytes.NewReader(wire))
	c.ContentLength = int64(len(wire))
	return serverRequest(t, c), wire
}

func TestChunkedSignedTrailer(t *testing.T) {
	v := newVerifier(t)
	payload := bytes.Repeat([]byte("kv-cache block "), 10000) // 150000 bytes: three chunks
	r, wire := minioTrailerRequest(t, payload, crc32cB64(payload))
	a, err := v.Verify(r)
	if err != nil {
		t.Fatal(err)
	}
	if a.PayloadHash != StreamingTrailer || a.Trailer != "x-amz-checksum-crc32c" {
		t.Fatalf("mode %q trailer %q", a.PayloadHash, a.Trailer)
	}
	cr := a.ChunkedBody(bytes.NewReader(wire), int64(len(payload)))
	if cr.Trailer() != nil {
		t.Fatal("trailer before the body was read")
	}
	got, err := io.ReadAll(cr)
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("decoded %d bytes, %v", len(got), err)
	}
	if cr.Trailer().Get("x-amz-checksum-crc32c") != crc32cB64(payload) {
		t.Fatalf("trailer %v", cr.Trailer())
	}

	tamper := []struct {
		name string
		mut  func([]byte) []byte
		want error
	}{
		{"trailer value changed", func(w []byte) []byte {
			return bytes.Replace(w, []byte(crc32cB64(payload)), []byte("AAAAAA=="), 1)
		}, ErrSignature},
		{"trailer signature changed", func(w []byte) []byte {
			i := bytes.Index(w, []byte(trailerSigHeader+":")) + len(trailerSigHeader) + 1
			w[i] ^= 1
			if w[i] == ':' || w[i] > 'f' {
				w[i] = '0'
			}
			return w
		}, ErrSignature},
		{"trailer dropped", func(w []byte) []byte {
			return w[:bytes.Index(w, []byte("x-amz-checksum-crc32c:"))]
		}, ErrTrailer},
		{"trailer signature dropped", func(w []byte) []byte {
			return w[:bytes.Index(w, []byte(trailerSigHeader))]
		}, ErrTrailer},
		{"other trailer", func(w []byte) []byte {
			return bytes.Replace(w, []byte("x-amz-checksum-crc32c:"), []byte("x-amz-checksum-sha1c:"), 1)
		}, ErrTrailer},
	}
	for _, tc := range tamper {
		t.Run(tc.name, func(t *testing.T) {
			w := tc.mut(append([]byte(nil), wire...))
			_, err := io.ReadAll(a.ChunkedBody(bytes.NewReader(w), int64(len(payload))))
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// unsignedTrailerBody frames payload as aws-chunked without signatures, in
// chunks of size, followed by the trailer lines (the AWS SDKs' format).
func unsignedTrailerBody(payload []byte, size int, trailer string) []byte {
	var b bytes.Buffer
	for len(payload) > 0 {
		n := min(size, len(payload))
		fmt.Fprintf(&b, "%x\r\n", n)
		b.Write(payload[:n])
		b.WriteString("\r\n")
		payload = payload[n:]
	}
	b.WriteString("0\r\n" + trailer + "\r\n")
	return b.Bytes()
}

func unsignedTrailerAuth(t *testing.T, v *Verifier) *Auth {
	t.Helper()
	r := signed(t, "PUT", "http://127.0.0.1:9000/ns/00000000000000ff", nil, testKey.Secret, epoch, func(r *http.Request) {
		r.Header.Set("X-Amz-Content-Sha256", StreamingUnsignedTrailer)
		r.Header.Set("X-Amz-Trailer", "x-amz-checksum-crc32c")
	})
	a, err := v.Verify(r)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestChunkedUnsignedTrailer(t *testing.T) {
	v := newVerifier(t)
	a := unsignedTrailerAuth(t, v)
	payload := bytes.Repeat([]byte("0123456789"), 7000)
	good := "x-amz-checksum-crc32c:" + crc32cB64(payload) + "\r\n"
	cases := []struct {
		name string
		body []byte
		n    int64
		want error
	}{
		{"good", unsignedTrailerBody(payload, 16384, good), int64(len(payload)), nil},
		{"LF-terminated trailer", unsignedTrailerBody(payload, 65536, "x-amz-checksum-crc32c:"+crc32cB64(payload)+"\n"), int64(len(payload)), nil},
		{"no trailer", unsignedTrailerBody(payload, 16384, ""), int64(len(payload)), ErrTrailer},
		{"undeclared trailer", unsignedTrailerBody(payload, 16384, "x-amz-checksum-crc32:AAAAAA==\r\n"), int64(len(payload)), ErrTrailer},
		{"two trailers", unsignedTrailerBody(payload, 16384, good+good), int64(len(payload)), ErrTrailer},
		{"signature in unsigned mode", unsignedTrailerBody(payload, 16384, good+trailerSigHeader+":"+strings.Repeat("0", 64)+"\r\n"), int64(len(payload)), ErrTrailer},
		{"short", unsignedTrailerBody(payload, 16384, good), int64(len(payload)) + 1, ErrChunk},
		{"chunk extension", bytes.Replace(unsignedTrailerBody(payload, 16384, good), []byte("4000\r\n"), []byte("4000;x=y\r\n"), 1), int64(len(payload)), ErrChunk},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cr := a.ChunkedBody(bytes.NewReader(tc.body), tc.n)
			got, err := io.ReadAll(cr)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if tc.want == nil && (!bytes.Equal(got, payload) || cr.Trailer().Get("x-amz-checksum-crc32c") != crc32cB64(payload)) {
				t.Fatalf("decoded %d bytes, trailer %v", len(got), cr.Trailer())
			}
		})
	}
}

func TestChunkedUnsignedNoTrailer(t *testing.T) {
	v := newVerifier(t)
	a := unsignedTrailerAuth(t, v)
	a.Trailer = "" // x-amz-trailer absent: the body ends with the last chunk
	payload := []byte("no trailer at all")
	for _, end := range []string{"", "\r\n"} {
		body := append(unsignedTrailerBody(payload, 5, "")[:0:0], unsignedTrailerBody(payload, 5, "")...)
		body = append(body[:len(body)-2], end...) // drop the trailer section's blank line, maybe put it back
		cr := a.ChunkedBody(bytes.NewReader(body), int64(len(payload)))
		got, err := io.ReadAll(cr)
		if err != nil || !bytes.Equal(got, payload) || len(cr.Trailer()) != 0 {
			t.Fatalf("end %q: %q %v %v", end, got, err, cr.Trailer())
		}
	}
}

// TestAWSMessages: the client-facing messages are AWS's, and none echoes
// a signature.
func TestAWSMessages(t *testing.T) {
	v := newVerifier(t)
	sig := strings.Repeat("5a", 32)
	cred := testKey.AccessKeyID + "/20260301/us-east-1/s3/aws4_request"
	header := func(h string) *http.Request {
		r := httptest.NewRequest("GET", "http://127.0.0.1:9000/", nil)
		r.Header.Set("Authorization", h)
		r.Header.Set("X-Amz-Date", epoch.Format(timeFormat))
		r.Header.Set("X-Amz-Content-Sha256", UnsignedPayload)
		return r
	}
	cases := []struct {
		auth, want string
	}{
		{"AWS4-HMAC-SHA256 Credential=" + cred + ", SignedHeaders=host;x-amz-date, Sig=" + sig, "The authorization header is malformed; missing Signature."},
		{"AWS4-HMAC-SHA256 Creds=x, SignedHeaders=host, Signature=" + sig, "The authorization header is malformed; missing Credential."},
		{"AWS4-HMAC-SHA256 Credential=" + cred + ", SignedHeaders=host, Signature:" + sig, `The authorization header is malformed; the authorization component "Signature..." is malformed.`},
		{"AWS4-HMAC-SHA256 Credential=" + strings.Replace(cred, "aws4_request", "aws_request", 1) + ", SignedHeaders=host, Signature=" + sig,
			`The authorization header is malformed; incorrect terminal "aws_request". This endpoint uses "aws4_request".`},
		{"AWS4-HMAC-SHA256 Credential=" + strings.Replace(cred, "/s3/", "/ec2/", 1) + ", SignedHeaders=host, Signature=" + sig,
			`The authorization header is malformed; incorrect service "ec2". This endpoint belongs to "s3".`},
		{"AWS4-HMAC-SHA256 Credential=" + strings.Replace(cred, "20260301", "2026031", 1) + ", SignedHeaders=host, Signature=" + sig,
			`The authorization header is malformed; incorrect date format "2026031". This date in the credential must be in the format "yyyyMMdd".`},
		{"AWS4-HMAC-SHA256 Credential=" + strings.Replace(cred, "20260301", "20260302", 1) + ", SignedHeaders=host, Signature=" + sig,
			`The authorization header is malformed; Invalid credential date "20260302". This date is not the same as X-Amz-Date: "20260301".`},
		{"AWS4-HMAC-SHA256 Credential=a/b, SignedHeaders=host, Signature=" + sig,
			`The authorization header is malformed; the Credential is mal-formed; expecting "<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request".`},
		{"Bearer x", "Unsupported Authorization Type"},
		{"AWS4-HMAC-SHA256 Credential=" + cred + ",Signature=" + sig,
			"The authorization header is malformed; the authorization header requires three components: Credential, SignedHeaders, and Signature."},
		{"invalid_header", "Authorization header is invalid -- one and only one ' ' (space) required."},
	}
	for _, tc := range cases {
		_, err := v.Verify(header(tc.auth))
		msg, ok := Message(err)
		if !ok || msg != tc.want || strings.Contains(err.Error(), sig) {
			t.Errorf("%s:\n got %q (%v)\nwant %q", tc.auth, msg, err, tc.want)
		}
	}
}

// FuzzChunkedUnsignedTrailer: unsigned chunks carry no signature, so random
// input can decode; whatever is accepted must have exactly the declared
// length and carry the declared trailer, and re-framing the decoded bytes
// with that trailer must decode to the same bytes.
func FuzzChunkedUnsignedTrailer(f *testing.F) {
	f.Add(unsignedTrailerBody([]byte("hello"), 2, "x-amz-checksum-crc32c:AAAAAA==\r\n"))
	f.Add([]byte("5\r\nhello\r\n0\r\nx-amz-checksum-crc32c:x\n\r\n"))
	f.Add([]byte("5;chunk-signature=00\r\nhello\r\n0\r\n\r\n"))
	f.Add([]byte("0\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, _ := New(DefaultConfig(), keys)
		a := &Auth{Credential: testKey, PayloadHash: StreamingUnsignedTrailer, Trailer: "x-amz-checksum-crc32c", v: v, time: epoch}
		cr := a.ChunkedBody(bytes.NewReader(b), 5)
		got, err := io.ReadAll(cr)
		if err != nil {
			if cr.Trailer() != nil {
				t.Fatal("trailer reported after an error")
			}
			return
		}
		val := cr.Trailer().Get("x-amz-checksum-crc32c")
		if len(got) != 5 || len(cr.Trailer()) != 1 || val == "" {
			t.Fatalf("accepted %d bytes, trailer %v", len(got), cr.Trailer())
		}
		again, err := io.ReadAll(a.ChunkedBody(bytes.NewReader(unsignedTrailerBody(got, 3, "x-amz-checksum-crc32c:"+val+"\r\n")), 5))
		if err != nil || !bytes.Equal(again, got) {
			t.Fatalf("re-framed %q: %q, %v", got, again, err)
		}
	})
}

// FuzzChunkedSignedTrailer: signed chunks and trailers from random input
// are never accepted.
func FuzzChunkedSignedTrailer(f *testing.F) {
	sig := strings.Repeat("0", 64)
	f.Add([]byte("5;chunk-signature=" + sig + "\r\nhello\r\n0;chunk-signature=" + sig + "\r\nx-amz-checksum-crc32c:AAAAAA==\r\n" + trailerSigHeader + ":" + sig + "\r\n\r\n"))
	f.Add([]byte("0;chunk-signature=" + sig + "\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, _ := New(DefaultConfig(), keys)
		a := &Auth{Credential: testKey, PayloadHash: StreamingTrailer, Trailer: "x-amz-checksum-crc32c", v: v, signature: make([]byte, 32), time: epoch}
		got, err := io.ReadAll(a.ChunkedBody(bytes.NewReader(b), 5))
		if err == nil || len(got) > 0 {
			t.Fatalf("unsigned input accepted: %q, %v", got, err)
		}
	})
}
