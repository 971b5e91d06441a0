package s3auth

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/credential"
)

// crtKey and crtUploads are a CreateMultipartUpload request exactly as
// awscrt 0.38.1 (CRTS3NativeClient/1.5.1, under LMCache 0.5.6's S3Connector)
// sent it to ctxd, recorded on the wire, with the throwaway key it signed
// with: it signs "content-length:0", which the SDK signer never does.
var crtKey = credential.Credential{AccessKeyID: "CTXTL2OOPAM4KGSNELQD", Secret: "mRL8TNCQumTHOP6h0kZR3HmHPh70ypP_GkYz7KUV", Namespaces: []string{"*"}}

const crtSignature = "3fabb4c3f7f6a1b72dea87f899518babee0a6fd20e7dbadc551d48c718e1bb1d"

func crtUploads(mut func(r *http.Request)) *http.Request {
	r := httptest.NewRequest("POST", "http://lmcache-mp.s3.test:39125/ctxtier-test%401%400%402000%40bfloat16?uploads", http.NoBody)
	r.Host = "lmcache-mp.s3.test:39125"
	r.ContentLength = 0
	r.Header.Set("Content-Type", "application/octet-stream")
	r.Header.Set("User-Agent", "CRTS3NativeClient/1.5.1 platform/unknown m/Al")
	r.Header.Set("X-Amz-Date", "20261201T220606Z")
	r.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=CTXTL2OOPAM4KGSNELQD/20261201/us-east-1/s3/aws4_request, "+
		"SignedHeaders=content-length;content-type;host;x-amz-content-sha256;x-amz-date, Signature="+crtSignature)
	if mut != nil {
		mut(r)
	}
	return r
}

func TestVerifyZeroContentLength(t *testing.T) {
	v, err := New(DefaultConfig(), credential.Static{crtKey.AccessKeyID: crtKey})
	if err != nil {
		t.Fatal(err)
	}
	v.SetClock(func() time.Time { return time.Date(2026, 12, 1, 22, 6, 10, 0, time.UTC) })
	cases := []struct {
		name string
		mut  func(r *http.Request)
		want error
	}{
		{"awscrt's request as sent", nil, nil},
		{"another signature", func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "Signature=3fab", "Signature=3fac", 1))
		}, ErrSignature},
		{"another content type", func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, ErrSignature},
		{"another key", func(r *http.Request) { r.URL.Path, r.URL.RawPath = "/other", "" }, ErrSignature},
		{"another query", func(r *http.Request) { r.URL.RawQuery = "uploads=&x=1" }, ErrSignature},
		// A body where the client signed a length of 0: the SDK path
		// signs the real length, which differs.
		{"a body", func(r *http.Request) { r.ContentLength = 5 }, ErrSignature},
		{"content-length signed twice", func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "SignedHeaders=content-length;", "SignedHeaders=content-length;content-length;", 1))
		}, ErrSignature},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := v.Verify(crtUploads(c.mut))
			switch {
			case c.want == nil && err != nil:
				t.Fatalf("Verify: %v", err)
			case c.want == nil && a.Credential.AccessKeyID != crtKey.AccessKeyID:
				t.Fatalf("verified as %q", a.Credential.AccessKeyID)
			case c.want != nil && !errors.Is(err, c.want):
				t.Fatalf("Verify: %v, want %v", err, c.want)
			}
		})
	}
}

func TestWithZeroContentLength(t *testing.T) {
	cases := []struct {
		name, in, want, signed, err string
	}{
		{"between content-md5 and host",
			"POST\n/k\nuploads=\ncontent-md5:x\nhost:h\nx-amz-date:d\n\ncontent-md5;host;x-amz-date\nUNSIGNED-PAYLOAD",
			"POST\n/k\nuploads=\ncontent-length:0\ncontent-md5:x\nhost:h\nx-amz-date:d\n\ncontent-length;content-md5;host;x-amz-date\nUNSIGNED-PAYLOAD",
			"content-length;content-md5;host;x-amz-date", ""},
		{"first", "GET\n/\n\nhost:h\n\nhost\nUNSIGNED-PAYLOAD",
			"GET\n/\n\ncontent-length:0\nhost:h\n\ncontent-length;host\nUNSIGNED-PAYLOAD", "content-length;host", ""},
		{"already there", "GET\n/\n\ncontent-length:3\nhost:h\n\ncontent-length;host\nUNSIGNED-PAYLOAD", "", "", "already"},
		{"a header line without a colon", "GET\n/\n\nhost\n\nhost\nUNSIGNED-PAYLOAD", "", "", "header line"},
		{"no headers", "GET\n/\n\n\nhost\nUNSIGNED-PAYLOAD", "", "", "unexpected"},
		{"empty", "", "", "", "unexpected"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, signed, err := withZeroContentLength(c.in)
			if c.err != "" {
				if err == nil || !errors.Is(err, ErrSignature) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want ErrSignature with %q", err, c.err)
				}
				return
			}
			if err != nil || got != c.want || signed != c.signed {
				t.Fatalf("got %q %q %v\nwant %q %q", got, signed, err, c.want, c.signed)
			}
		})
	}
}
