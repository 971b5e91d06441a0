package sigv4

import (
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The known answers below are typed in from AWS's documentation, not
// computed by this package:
//   - the signing key: "Examples of how to derive a signing key for
//     Signature Version 4" (AWS General Reference),
//   - get-vanilla, post-vanilla, get-vanilla-query-order-key-case,
//     get-header-key-duplicate and get-header-value-trim: the "Signature
//     Version 4 test suite" (AWS General Reference,
//     https://docs.aws.amazon.com/general/latest/gr/signature-v4-test-suite.html),
//     credential AKIDEXAMPLE / wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY,
//     us-east-1, service "service", 2015-08-30T12:36:00Z,
//   - the S3 GET Object example: "Signature Calculations for the
//     Authorization Header: Transferring Payload in a Single Chunk"
//     (Amazon S3 API Reference,
//     https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html).

func TestSigningKeyKnownAnswer(t *testing.T) {
	got := hex.EncodeToString(SigningKey("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20120215", "us-east-1", "iam"))
	if want := "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d"; got != want {
		t.Fatalf("signing key %s, want %s", got, want)
	}
}

var suiteTime = time.Date(2015, 8, 30, 12, 36, 0, 0, time.UTC)

func suiteSigner(t *testing.T) *Signer {
	t.Helper()
	s, err := New(Config{AccessKeyID: "AKIDEXAMPLE", Secret: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", Region: "us-east-1", Service: "service"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSuiteKnownAnswers(t *testing.T) {
	const cred = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
	cases := []struct {
		name, method, url string
		headers           [][2]string
		canonical         string // "" when the suite's page is not checked line by line here
		auth              string
	}{
		{
			name: "get-vanilla", method: "GET", url: "https://example.amazonaws.com/",
			canonical: "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n" + EmptySHA256,
			auth:      cred + "SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
		},
		{
			name: "post-vanilla", method: "POST", url: "https://example.amazonaws.com/",
			auth: cred + "SignedHeaders=host;x-amz-date, Signature=5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
		},
		{
			name: "get-vanilla-query-order-key-case", method: "GET", url: "https://example.amazonaws.com/?Param2=value2&Param1=value1",
			canonical: "GET\n/\nParam1=value1&Param2=value2\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n" + EmptySHA256,
			auth:      cred + "SignedHeaders=host;x-amz-date, Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
		},
		{
			name: "get-header-key-duplicate", method: "GET", url: "https://example.amazonaws.com/",
			headers: [][2]string{{"My-Header1", "value2"}, {"My-Header1", "value2"}, {"My-Header1", "value1"}},
			auth:    cred + "SignedHeaders=host;my-header1;x-amz-date, Signature=c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea",
		},
		{
			name: "get-header-value-trim", method: "GET", url: "https://example.amazonaws.com/",
			headers:   [][2]string{{"My-Header1", " value1"}, {"My-Header2", ` "a   b   c"`}},
			canonical: "GET\n/\n\nhost:example.amazonaws.com\nmy-header1:value1\nmy-header2:\"a b c\"\nx-amz-date:20150830T123600Z\n\nhost;my-header1;my-header2;x-amz-date\n" + EmptySHA256,
			auth:      cred + "SignedHeaders=host;my-header1;my-header2;x-amz-date, Signature=acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736",
		},
	}
	s := suiteSigner(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := http.NewRequest(tc.method, tc.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range tc.headers {
				r.Header.Add(h[0], h[1])
			}
			if err := s.Sign(r, EmptySHA256, suiteTime); err != nil {
				t.Fatal(err)
			}
			if tc.canonical != "" {
				c, err := CanonicalRequest(r, EmptySHA256)
				if err != nil {
					t.Fatal(err)
				}
				if c.Request != tc.canonical {
					t.Errorf("canonical request\n%q\nwant\n%q", c.Request, tc.canonical)
				}
			}
			if got := r.Header.Get("Authorization"); got != tc.auth {
				t.Errorf("Authorization\n%s\nwant\n%s", got, tc.auth)
			}
		})
	}
}

// TestGetVanillaStringToSign checks the suite's published string to sign
// for get-vanilla, so a wrong line there is named rather than only seen
// as a wrong signature.
func TestGetVanillaStringToSign(t *testing.T) {
	canonical := "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n" + EmptySHA256
	got := StringToSign(Algorithm, suiteTime, Scope("20150830", "us-east-1", "service"), HashHex([]byte(canonical)))
	want := "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\nbb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63"
	if got != want {
		t.Fatalf("string to sign\n%q\nwant\n%q", got, want)
	}
}

func TestS3GetObjectKnownAnswer(t *testing.T) {
	s, err := New(Config{AccessKeyID: "AKIAIOSFODNN7EXAMPLE", Secret: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", Region: "us-east-1", Service: "s3"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := http.NewRequest(http.MethodGet, "https://examplebucket.s3.amazonaws.com/test.txt", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Range", "bytes=0-9")
	r.Header.Set("X-Amz-Content-Sha256", EmptySHA256)
	if err := s.Sign(r, EmptySHA256, time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	want := "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, " +
		"SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
	if got := r.Header.Get("Authorization"); got != want {
		t.Fatalf("Authorization\n%s\nwant\n%s", got, want)
	}
}

func TestSignRefuses(t *testing.T) {
	s := suiteSigner(t)
	cases := []struct {
		name    string
		req     func() *http.Request
		payload string
	}{
		{"empty payload hash", func() *http.Request { r, _ := http.NewRequest("GET", "http://h/", nil); return r }, ""},
		{"no host", func() *http.Request { r, _ := http.NewRequest("GET", "/x", nil); return r }, UnsignedPayload},
		{"bad query", func() *http.Request { r, _ := http.NewRequest("GET", "http://h/?a=%zz", nil); return r }, UnsignedPayload},
		{"opaque URL", func() *http.Request { r, _ := http.NewRequest("GET", "http:opaque", nil); r.Host = "h"; return r }, UnsignedPayload},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.req()
			if err := s.Sign(r, tc.payload, suiteTime); !errors.Is(err, ErrRequest) {
				t.Fatalf("Sign: %v, want ErrRequest", err)
			}
			if !strings.HasPrefix(ErrRequest.Error(), "sigv4: ") {
				t.Fatal("sentinel without its package prefix")
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{AccessKeyID: "AK", Secret: "s", Region: "r", Service: "s3"}
	cases := []struct {
		name string
		edit func(*Config)
		ok   bool
	}{
		{"valid", func(*Config) {}, true},
		{"default has no credential", func(c *Config) { *c = DefaultConfig() }, false},
		{"no secret", func(c *Config) { c.Secret = "" }, false},
		{"key with slash", func(c *Config) { c.AccessKeyID = "A/K" }, false},
		{"no region", func(c *Config) { c.Region = "" }, false},
		{"service with slash", func(c *Config) { c.Service = "s/3" }, false},
	}
	for _, tc := range cases {
		c := ok
		tc.edit(&c)
		if err := c.Validate(); (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrConfig)) {
			t.Errorf("%s: Validate() = %v", tc.name, err)
		}
	}
}

func TestDefaultPortStripped(t *testing.T) {
	s := suiteSigner(t)
	cases := []struct{ url, host string }{
		{"http://h:80/", "h"},
		{"https://h:443/", "h"},
		{"http://h:443/", "h:443"},
		{"http://h:8080/", "h:8080"},
		{"http://[::1]:80/", "[::1]"},
	}
	for _, tc := range cases {
		r, err := http.NewRequest("GET", tc.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Sign(r, UnsignedPayload, suiteTime); err != nil {
			t.Fatal(err)
		}
		if r.Host != tc.host {
			t.Errorf("%s: Host %q, want %q", tc.url, r.Host, tc.host)
		}
	}
}

// TestSignKeyCacheFollowsTheDate: the signer's cached signing key is used
// only for its own date; concurrent signers across a date change agree
// with a key derived from scratch.
func TestSignKeyCacheFollowsTheDate(t *testing.T) {
	s := suiteSigner(t)
	days := []time.Time{suiteTime, suiteTime.Add(24 * time.Hour), suiteTime, suiteTime.Add(48 * time.Hour)}
	done := make(chan error, 4*len(days))
	for range 4 {
		for _, at := range days {
			go func() {
				r, _ := http.NewRequest("GET", "https://example.amazonaws.com/", nil)
				if err := s.Sign(r, EmptySHA256, at); err != nil {
					done <- err
					return
				}
				c, err := CanonicalRequest(r, EmptySHA256)
				if err != nil {
					done <- err
					return
				}
				want := hex.EncodeToString(Signature("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "us-east-1", "service", at, c.Request))
				if got := r.Header.Get("Authorization"); !strings.HasSuffix(got, "Signature="+want) {
					done <- errors.New(at.String() + ": " + got + ", want signature " + want)
					return
				}
				done <- nil
			}()
		}
	}
	for range 4 * len(days) {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
