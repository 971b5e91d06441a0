package s3api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
)

// rawSigned builds a request to e signed by aws-sdk-go-v2's signer at time
// at; before runs before signing, after after it.
func rawSigned(t *testing.T, e *env, c credential.Credential, method, target string, body []byte, at time.Time, before, after func(*http.Request)) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, "http://"+e.addr+target, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	r.Header.Set("X-Amz-Content-Sha256", hex.EncodeToString(sum[:]))
	if before != nil {
		before(r)
	}
	s := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err := s.SignHTTP(context.Background(), aws.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.Secret},
		r, r.Header.Get("X-Amz-Content-Sha256"), "s3", "us-east-1", at); err != nil {
		t.Fatal(err)
	}
	if after != nil {
		after(r)
	}
	return r
}

// do sends r and returns the status and body.
func do(t *testing.T, r *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func presignURL(t *testing.T, e *env, c credential.Credential, target string, at time.Time, mut func(url.Values)) string {
	t.Helper()
	r, _ := http.NewRequest("GET", "http://"+e.addr+target, nil)
	s := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	q := r.URL.Query()
	q.Set("X-Amz-Expires", "300")
	r.URL.RawQuery = q.Encode()
	u, _, err := s.PresignHTTP(context.Background(), aws.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.Secret},
		r, "UNSIGNED-PAYLOAD", "s3", "us-east-1", at)
	if err != nil {
		t.Fatal(err)
	}
	if mut == nil {
		return u
	}
	pu, _ := url.Parse(u)
	pq := pu.Query()
	mut(pq)
	pu.RawQuery = pq.Encode()
	return pu.String()
}

// TestStrictAuthResponses checks the S3 error code and status of each
// authentication failure, and that a refused PUT stores nothing.
func TestStrictAuthResponses(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	now := time.Now().UTC()
	obj := "/team-a/" + objName(0x51)
	body := []byte("strict block")
	cases := []struct {
		name   string
		req    func() *http.Request
		status int
		code   string
		extra  string // also in the body
	}{
		{"missing x-amz-date", func() *http.Request {
			return rawSigned(t, e, e.admin, "PUT", obj, body, now, nil, func(r *http.Request) { r.Header.Del("X-Amz-Date") })
		}, 403, "AccessDenied", "valid Date or x-amz-date"},
		{"bad x-amz-date", func() *http.Request {
			return rawSigned(t, e, e.admin, "PUT", obj, body, now, nil, func(r *http.Request) { r.Header.Set("X-Amz-Date", "20260301") })
		}, 403, "AccessDenied", "valid Date or x-amz-date"},
		{"clock skew", func() *http.Request {
			return rawSigned(t, e, e.admin, "PUT", obj, body, now.Add(-20*time.Minute), nil, nil)
		},
			403, "RequestTimeTooSkewed", ""},
		{"unsigned x-amz-meta", func() *http.Request {
			return rawSigned(t, e, e.admin, "PUT", obj, body, now, nil, func(r *http.Request) { r.Header.Set("X-Amz-Meta-Ctx-Priority", "7") })
		}, 403, "AccessDenied", "<HeadersNotSigned>x-amz-meta-ctx-priority</HeadersNotSigned>"},
		{"unsigned x-amz-tagging and copy-source", func() *http.Request {
			return rawSigned(t, e, e.admin, "PUT", obj, body, now, nil, func(r *http.Request) {
				r.Header.Set("X-Amz-Tagging", "a=b")
				r.Header.Set("X-Amz-Copy-Source", "team-a/x")
			})
		}, 403, "AccessDenied", "<HeadersNotSigned>x-amz-copy-source, x-amz-tagging</HeadersNotSigned>"},
		{"wrong secret", func() *http.Request {
			c := e.admin
			c.Secret += "x"
			return rawSigned(t, e, c, "PUT", obj, body, now, nil, nil)
		}, 403, "SignatureDoesNotMatch", ""},
		{"malformed payload hash", func() *http.Request {
			return rawSigned(t, e, e.admin, "PUT", obj, body, now, func(r *http.Request) { r.Header.Set("X-Amz-Content-Sha256", "invalid_sha256") }, nil)
		}, 400, "InvalidArgument", ""},
		{"presign: expires over a week", func() *http.Request {
			r, _ := http.NewRequest("GET", presignURL(t, e, e.admin, obj, now, func(q url.Values) { q.Set("X-Amz-Expires", "604801") }), nil)
			return r
		}, 400, "AuthorizationQueryParametersError", "less than a week"},
		{"presign: bad date", func() *http.Request {
			r, _ := http.NewRequest("GET", presignURL(t, e, e.admin, obj, now, func(q url.Values) { q.Set("X-Amz-Date", "now") }), nil)
			return r
		}, 400, "AuthorizationQueryParametersError", "ISO8601"},
		{"presign: wrong region", func() *http.Request {
			r, _ := http.NewRequest("GET", presignURL(t, e, e.admin, obj, now, func(q url.Values) {
				q.Set("X-Amz-Credential", strings.Replace(q.Get("X-Amz-Credential"), "us-east-1", "eu-west-1", 1))
			}), nil)
			return r
		}, 400, "AuthorizationQueryParametersError", "eu-west-1"},
		{"presign: bad algorithm", func() *http.Request {
			r, _ := http.NewRequest("GET", presignURL(t, e, e.admin, obj, now, func(q url.Values) { q.Set("X-Amz-Algorithm", "AWS4-HMAC-SHA1") }), nil)
			return r
		}, 400, "AuthorizationQueryParametersError", ""},
		{"presign: expired", func() *http.Request {
			r, _ := http.NewRequest("GET", presignURL(t, e, e.admin, obj, now.Add(-10*time.Minute), nil), nil)
			return r
		}, 403, "AccessDenied", "<Message>Request has expired.</Message>"},
		{"presign: expired names the server time", func() *http.Request {
			r, _ := http.NewRequest("GET", presignURL(t, e, e.admin, obj, now.Add(-10*time.Minute), nil), nil)
			return r
		}, 403, "AccessDenied", "<ServerTime>"},
		{"unknown access key", func() *http.Request {
			c := e.admin
			c.AccessKeyID = "CTXNOSUCHKEY00000001"
			return rawSigned(t, e, c, "PUT", obj, body, now, nil, nil)
		}, 403, "InvalidAccessKeyId", "<AWSAccessKeyId>CTXNOSUCHKEY00000001</AWSAccessKeyId>"},
		{"unsupported authorization type", func() *http.Request {
			return rawSigned(t, e, e.admin, "PUT", obj, body, now, nil, func(r *http.Request) { r.Header.Set("Authorization", "Bearer abc") })
		}, 400, "InvalidArgument", "<ArgumentName>Authorization</ArgumentName>"},
		{"presign: unsigned x-amz header", func() *http.Request {
			r, _ := http.NewRequest("GET", presignURL(t, e, e.admin, obj, now, nil), nil)
			r.Header.Set("X-Amz-Meta-A", "1")
			return r
		}, 403, "AccessDenied", "HeadersNotSigned"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, b := do(t, tc.req())
			if st != tc.status || !strings.Contains(b, "<Code>"+tc.code+"</Code>") || !strings.Contains(b, tc.extra) {
				t.Fatalf("got %d %s; want %d %s %q", st, b, tc.status, tc.code, tc.extra)
			}
		})
	}
	if _, err := e.store.Stat(ctx, block.NewKey("team-a", 0x51), ctxstore.ReadOptions{}); err == nil {
		t.Fatal("a refused PUT stored the block")
	}
	// The same request, correctly signed, succeeds: the cases above fail for
	// the reason they name.
	if st, b := do(t, rawSigned(t, e, e.admin, "PUT", obj, body, now, func(r *http.Request) { r.Header.Set("X-Amz-Meta-Ctx-Priority", "7") }, nil)); st != 200 {
		t.Fatalf("signed PUT: %d %s", st, b)
	}
	r, _ := http.NewRequest("GET", presignURL(t, e, e.admin, obj, now, nil), nil)
	if st, b := do(t, r); st != 200 || b != string(body) {
		t.Fatalf("presigned GET: %d %q", st, b)
	}
}

func TestBucketNameRules(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := awsClient(e, e.admin)
	cases := []struct {
		name string
		ok   bool
	}{
		{"abc", true}, {"a.b.c", true}, {"my-bucket-1", true}, {strings.Repeat("a", 63), true}, {"192.168.5", true},
		{"ab", false}, {strings.Repeat("a", 64), false}, {"Upper", false}, {"a_b", false}, {"a..b", false},
		{"192.168.5.4", false}, {"-abc", false}, {"abc-", false}, {".abc", false}, {"abc.", false},
		{"a.-b", false}, {"xn--abc", false}, {"sthree-abc", false}, {"abc-s3alias", false}, {"abc--ol-s3", false},
	}
	for _, tc := range cases {
		_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(tc.name)})
		code, st := awsCode(err)
		if tc.ok != (err == nil) || (!tc.ok && (code != "InvalidBucketName" || st != 400)) {
			t.Errorf("CreateBucket(%q): %v (want ok=%v)", tc.name, err, tc.ok)
		}
		if _, nerr := e.store.Namespace(tc.name); tc.ok != (nerr == nil) {
			t.Errorf("CreateBucket(%q): namespace exists=%v, want %v", tc.name, nerr == nil, tc.ok)
		}
	}
}

func TestContinuationTokens(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for h := uint64(1); h <= 5; h++ {
		if err := e.store.Put(ctx, block.NewKey("team-a", h), []byte{byte(h)}, block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c := awsClient(e, e.teamA)
	var keys []string
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String("team-a"), MaxKeys: aws.Int32(2)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	if len(keys) != 5 || keys[4] != objName(5) {
		t.Fatalf("paged keys %v", keys)
	}
	for _, tok := range []string{"", "garbage!", encodeToken(objName(2))[1:], "AQAAAAAx", encodeToken("x") + "A"} {
		_, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("team-a"), ContinuationToken: aws.String(tok)})
		if code, st := awsCode(err); code != "InvalidArgument" || st != 400 {
			t.Errorf("token %q: %v", tok, err)
		}
	}
	out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("team-a"), ContinuationToken: aws.String(encodeToken(objName(3)))})
	if err != nil || len(out.Contents) != 2 || aws.ToString(out.Contents[0].Key) != objName(4) {
		t.Fatalf("valid token: %v %v", out, err)
	}
}

func TestListBucketsPaging(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := awsClient(e, e.admin)
	for _, b := range []string{"llama-a", "llama-b", "llama-c", "qwen-a"} {
		if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
	}
	names := func(in *s3.ListBucketsInput) ([]string, string) {
		t.Helper()
		out, err := c.ListBuckets(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, b := range out.Buckets {
			n = append(n, aws.ToString(b.Name))
		}
		return n, aws.ToString(out.ContinuationToken)
	}
	all, tok := names(&s3.ListBucketsInput{})
	if strings.Join(all, ",") != "default,llama-a,llama-b,llama-c,qwen-a,team-a,team-b" || tok != "" {
		t.Fatalf("all: %v %q", all, tok)
	}
	var paged []string
	in := &s3.ListBucketsInput{Prefix: aws.String("llama-"), MaxBuckets: aws.Int32(2)}
	for i := 0; ; i++ {
		n, tok := names(in)
		paged = append(paged, n...)
		if tok == "" {
			break
		}
		if i > 3 {
			t.Fatal("ListBuckets does not end")
		}
		in.ContinuationToken = aws.String(tok)
	}
	if strings.Join(paged, ",") != "llama-a,llama-b,llama-c" {
		t.Fatalf("paged with prefix: %v", paged)
	}
	// A scoped key still sees only its scope.
	n, _ := func() ([]string, string) {
		out, err := awsClient(e, e.teamA).ListBuckets(ctx, &s3.ListBucketsInput{Prefix: aws.String("team")})
		if err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, b := range out.Buckets {
			n = append(n, aws.ToString(b.Name))
		}
		return n, ""
	}()
	if strings.Join(n, ",") != "team-a" {
		t.Fatalf("scoped: %v", n)
	}
	for _, q := range []string{"max-buckets=0", "max-buckets=10001", "max-buckets=x", "continuation-token=junk"} {
		st, b := do(t, rawSigned(t, e, e.admin, "GET", "/?"+q, nil, time.Now(), nil, nil))
		if st != 400 || !strings.Contains(b, "<Code>InvalidArgument</Code>") {
			t.Errorf("ListBuckets ?%s: %d %s", q, st, b)
		}
	}
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestNoSecretsInLogs drives authentication failures of every kind with the
// server logging at debug level, and checks that neither the secret nor any
// signature the clients sent appears in a log line.
func TestNoSecretsInLogs(t *testing.T) {
	var logs syncBuffer
	e := newEnvWith(t, nil, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	now := time.Now().UTC()
	obj := "/team-a/" + objName(0x77)
	body := []byte("secret-free")
	var sigs []string
	record := func(r *http.Request) *http.Request {
		if a := r.Header.Get("Authorization"); a != "" {
			sigs = append(sigs, a[strings.LastIndex(a, "=")+1:])
		}
		if s := r.URL.Query().Get("X-Amz-Signature"); s != "" {
			sigs = append(sigs, s)
		}
		return r
	}
	wrong := e.admin
	wrong.Secret = "wrong-" + e.admin.Secret
	header := []struct {
		c     credential.Credential
		at    time.Time
		after func(*http.Request)
	}{
		{wrong, now, nil},
		{e.admin, now, func(r *http.Request) { r.Header.Del("X-Amz-Date") }},
		{e.admin, now, func(r *http.Request) { r.Header.Set("X-Amz-Meta-X", "1") }},
		{e.admin, now.Add(-time.Hour), nil},
		{e.admin, now, func(r *http.Request) {
			// A malformed Authorization header that still carries the signature.
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "Signature=", "Signature:", 1))
		}},
	}
	var reqs []*http.Request
	for _, h := range header {
		r := record(rawSigned(t, e, h.c, "PUT", obj, body, h.at, nil, nil))
		if h.after != nil {
			h.after(r)
		}
		reqs = append(reqs, r)
	}
	for _, u := range []string{
		presignURL(t, e, wrong, obj, now, nil),
		presignURL(t, e, e.admin, obj, now, func(q url.Values) { q.Set("X-Amz-Expires", "9999999") }),
		presignURL(t, e, e.admin, obj, now.Add(-time.Hour), nil),
	} {
		r, _ := http.NewRequest("GET", u, nil)
		reqs = append(reqs, record(r))
	}
	for _, r := range reqs {
		if st, b := do(t, r); st < 400 {
			t.Fatalf("%s %s succeeded: %s", r.Method, r.URL, b)
		}
	}
	out := logs.String()
	if n := strings.Count(out, "s3 authentication failed"); n != len(reqs) {
		t.Fatalf("%d auth failures logged, want %d:\n%s", n, len(reqs), out)
	}
	for _, secret := range []string{e.admin.Secret, wrong.Secret, e.teamA.Secret} {
		if strings.Contains(out, secret) {
			t.Fatalf("a secret appears in the log:\n%s", out)
		}
	}
	for _, s := range sigs {
		if len(s) < 16 || strings.Contains(out, s) {
			t.Fatalf("signature %q appears in the log (or was not captured):\n%s", s, out)
		}
	}
}

// FuzzContinuationToken: a token decodes only if its checksum matches its
// cursor, and every cursor survives encode/decode.
func FuzzContinuationToken(f *testing.F) {
	f.Add(encodeToken(objName(7)))
	f.Add(encodeToken(""))
	f.Add("AQAAAAAx")
	f.Add("garbage!")
	f.Fuzz(func(t *testing.T, tok string) {
		if c, err := decodeToken(tok); err == nil {
			raw, _ := base64.RawURLEncoding.DecodeString(tok)
			if len(raw) < 5 || raw[0] != tokenVersion || binary.BigEndian.Uint32(raw[1:5]) != block.Checksum([]byte(c)) {
				t.Fatalf("accepted %q without a matching checksum", tok)
			}
		} else if code := toAPI(err); code.Code != "InvalidArgument" || code.Status != 400 {
			t.Fatalf("refusal %v", err)
		}
		back, err := decodeToken(encodeToken(tok))
		if err != nil || back != tok {
			t.Fatalf("cursor %q came back as %q, %v", tok, back, err)
		}
	})
}
