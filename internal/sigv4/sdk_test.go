package sigv4

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// The AWS SDK's signer is a second, independent implementation: a request
// signed by both must carry the identical Authorization header. The SDK is
// imported by this test only.

var (
	sdkCreds  = aws.Credentials{AccessKeyID: "CTXAAAAAAAAAAAAAAAAA", SecretAccessKey: "secret-a-0123456789"}
	sdkSigner = v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
)

// signBoth signs two copies of the request built by mk, one with each
// signer, and returns their Authorization headers and final hosts.
func signBoth(t testing.TB, mk func() (*http.Request, error), payload string, at time.Time) (ours, sdk string, ourHost, sdkHost string, ok bool) {
	t.Helper()
	s, err := New(Config{AccessKeyID: sdkCreds.AccessKeyID, Secret: sdkCreds.SecretAccessKey, Region: "us-east-1", Service: "s3"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := mk()
	if err != nil {
		return "", "", "", "", false
	}
	b, _ := mk()
	if err := s.Sign(a, payload, at); err != nil {
		return "", "", "", "", false
	}
	if err := sdkSigner.SignHTTP(context.Background(), sdkCreds, b, payload, "s3", "us-east-1", at); err != nil {
		t.Fatalf("SDK signer: %v", err)
	}
	return a.Header.Get("Authorization"), b.Header.Get("Authorization"), a.Host, b.Host, true
}

// TestMatchesSDK signs the requests the Go client makes (and a few more
// shapes) with both signers.
func TestMatchesSDK(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC)
	body := []byte("block bytes")
	cases := []struct {
		name, method, url string
		body              []byte
		headers           [][2]string
		payload           string
	}{
		{name: "put block", method: "PUT", url: "http://127.0.0.1:41234/v1/namespaces/a/blocks/0123456789abcdef", body: body,
			headers: [][2]string{{"Content-Type", "application/octet-stream"}, {"X-Amz-Content-Sha256", UnsignedPayload}}, payload: UnsignedPayload},
		{name: "get block with retain and read level", method: "GET", url: "http://127.0.0.1:41234/v1/namespaces/a/blocks/0123456789abcdef",
			headers: [][2]string{{"X-Ctxtier-Read", "linearizable"}, {"X-Ctxtier-Retain", "1500ms"}, {"X-Amz-Content-Sha256", UnsignedPayload}}, payload: UnsignedPayload},
		{name: "escaped namespace", method: "HEAD", url: "http://node:8080/v1/namespaces/a%20b%2Fc/blocks/00", payload: UnsignedPayload},
		{name: "batch post with query", method: "POST", url: "http://node:8080/v1/namespaces/a/batch/get?limit=10&after=x%2By&b=2&b=1", body: []byte("{}"),
			headers: [][2]string{{"Content-Type", "application/json"}}, payload: UnsignedPayload},
		{name: "hashed payload", method: "PUT", url: "http://node:8080/bucket/key", body: body,
			headers: [][2]string{{"X-Amz-Content-Sha256", HashHex(body)}}, payload: HashHex(body)},
		{name: "default port", method: "GET", url: "http://node:80/x", payload: UnsignedPayload},
		{name: "ignored headers", method: "PUT", url: "http://node:8080/x", body: body,
			headers: [][2]string{{"User-Agent", "ctxtier"}, {"Expect", "100-continue"}, {"X-Amzn-Trace-Id", "1"}, {"Authorization", "stale"}}, payload: UnsignedPayload},
		{name: "spaces in values", method: "GET", url: "http://node:8080/x",
			headers: [][2]string{{"X-Meta", "  a   b  "}, {"X-Meta", "c"}}, payload: UnsignedPayload},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mk := func() (*http.Request, error) {
				var r *http.Request
				var err error
				if tc.body != nil {
					r, err = http.NewRequest(tc.method, tc.url, bytes.NewReader(tc.body))
				} else {
					r, err = http.NewRequest(tc.method, tc.url, nil)
				}
				if err != nil {
					return nil, err
				}
				for _, h := range tc.headers {
					r.Header.Add(h[0], h[1])
				}
				return r, nil
			}
			ours, sdk, oh, sh, ok := signBoth(t, mk, tc.payload, at)
			if !ok {
				t.Fatal("our signer refused the request")
			}
			if ours != sdk || oh != sh {
				t.Fatalf("Authorization and Host differ:\nours %s (%s)\nSDK  %s (%s)", ours, oh, sdk, sh)
			}
		})
	}
}

// FuzzMatchesSDK signs made-up paths, queries and header values with both
// signers. Inputs the standard library or our signer refuses are skipped;
// every accepted one must sign identically.
func FuzzMatchesSDK(f *testing.F) {
	f.Add("/v1/namespaces/a/blocks/00", "a=1&b=2", "X-Meta", "v", int64(0))
	f.Add("/a%2Fb/c d", "x=%20&x=~&y", "X-Amz-Meta-K", "  two  spaces ", int64(11))
	f.Add("/", "", "Range", "bytes=0-9", int64(-1))
	at := time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, path, query, hname, hval string, length int64) {
		if strings.ContainsAny(path, "?#") || !strings.HasPrefix(path, "/") {
			t.Skip()
		}
		if _, err := url.ParseQuery(query); err != nil {
			t.Skip()
		}
		mk := func() (*http.Request, error) {
			r, err := http.NewRequest("PUT", "http://node:8080"+path+"?"+query, nil)
			if err != nil {
				return nil, err
			}
			r.URL.RawQuery = query
			r.ContentLength = length
			if hname != "" {
				r.Header.Add(hname, hval)
			}
			return r, nil
		}
		if r, err := mk(); err != nil || r.URL.Opaque != "" {
			t.Skip()
		}
		ours, sdk, _, _, ok := signBoth(t, mk, UnsignedPayload, at)
		if ok && ours != sdk {
			t.Fatalf("Authorization differs:\nours %s\nSDK  %s", ours, sdk)
		}
	})
}

// BenchmarkSign signs the client's GET request shape with this package and
// with the SDK's signer in the same run, alternating in rounds so that a
// change in the machine's load falls on both: ratio_vs_sdk is the SDK's
// time per signature over ours (above 1: ours is faster).
func BenchmarkSign(b *testing.B) {
	s, err := New(Config{AccessKeyID: sdkCreds.AccessKeyID, Secret: sdkCreds.SecretAccessKey, Region: "us-east-1", Service: "s3"})
	if err != nil {
		b.Fatal(err)
	}
	at := time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC)
	mk := func() *http.Request {
		r, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:41234/v1/namespaces/a/blocks/0123456789abcdef", nil)
		r.Header.Set("X-Ctxtier-Retain", "1500ms")
		r.Header.Set("X-Amz-Content-Sha256", UnsignedPayload)
		return r
	}
	ours, sdk := mk(), mk()
	const rounds = 20
	var oursTime, sdkTime time.Duration
	b.ReportAllocs()
	for r := range rounds {
		n := b.N / rounds
		if r < b.N%rounds {
			n++
		}
		start := time.Now()
		for range n {
			if err := sdkSigner.SignHTTP(context.Background(), sdkCreds, sdk, UnsignedPayload, "s3", "us-east-1", at); err != nil {
				b.Fatal(err)
			}
		}
		sdkTime += time.Since(start)
		start = time.Now()
		for range n {
			if err := s.Sign(ours, UnsignedPayload, at); err != nil {
				b.Fatal(err)
			}
		}
		oursTime += time.Since(start)
	}
	if ours.Header.Get("Authorization") != sdk.Header.Get("Authorization") {
		b.Fatalf("signatures differ:\n%s\n%s", ours.Header.Get("Authorization"), sdk.Header.Get("Authorization"))
	}
	b.ReportMetric(float64(oursTime.Nanoseconds())/float64(b.N), "ours_ns/sign")
	b.ReportMetric(float64(sdkTime.Nanoseconds())/float64(b.N), "sdk_ns/sign")
	b.ReportMetric(float64(sdkTime)/float64(oursTime), "ratio_vs_sdk")
}
