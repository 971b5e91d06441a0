package s3api

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/minio/minio-go/v7"
	mcreds "github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/ctxtier/ctxtier/ctxstore/credential"
)

// vhostDomain is the base domain the virtual-hosted tests configure. It does
// not resolve: the clients' transport dials the test server whatever host a
// URL names (Go's resolver does not map *.localhost to loopback), so the
// Host header and the signature carry the virtual host exactly as they would
// through DNS.
const vhostDomain = "s3.ctxtier.test"

// hostLog is a transport that dials addr for every host and records the
// hosts requested.
type hostLog struct {
	rt    http.RoundTripper
	mu    sync.Mutex
	hosts []string
}

func newHostLog(addr string) *hostLog {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return &hostLog{rt: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}}}
}

func (h *hostLog) RoundTrip(r *http.Request) (*http.Response, error) {
	h.mu.Lock()
	h.hosts = append(h.hosts, r.URL.Host)
	h.mu.Unlock()
	return h.rt.RoundTrip(r)
}

func (h *hostLog) seen() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.hosts, " ")
}

func vhostEnv(t *testing.T) (*env, string) {
	e := newEnvWith(t, func(c *Config) { c.Domains = []string{vhostDomain, "other.example"} }, nil)
	_, port, _ := net.SplitHostPort(e.addr)
	return e, port
}

func vhostAWSClient(e *env, port string, c credential.Credential, tr *hostLog) *s3.Client {
	return s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String("http://" + vhostDomain + ":" + port), UsePathStyle: false,
		HTTPClient: &http.Client{Transport: tr}, RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.Secret, ""),
	})
}

// TestVirtualHostedAWSSDK drives aws-sdk-go-v2 with virtual-hosted-style
// addressing (its default) through bucket and object operations, presigned
// URLs and scope checks.
func TestVirtualHostedAWSSDK(t *testing.T) {
	e, port := vhostEnv(t)
	ctx := context.Background()
	tr := newHostLog(e.addr)
	c := vhostAWSClient(e, port, e.admin, tr)
	b := aws.String("vhost-kv")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	data := payload(300000, 4)
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String(objName(0xa1)), Body: bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: b, Key: aws.String(objName(0xa1)), Range: aws.String("bytes=10-19")})
	if err != nil {
		t.Fatal(err)
	}
	part, _ := io.ReadAll(got.Body)
	got.Body.Close()
	if !bytes.Equal(part, data[10:20]) {
		t.Fatalf("ranged GET %q", part)
	}
	lo, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: b})
	if err != nil || len(lo.Contents) != 1 || aws.ToString(lo.Contents[0].Key) != objName(0xa1) {
		t.Fatalf("ListObjectsV2: %v %v", lo, err)
	}
	lb, err := c.ListBuckets(ctx, &s3.ListBucketsInput{Prefix: aws.String("vhost-")})
	if err != nil || len(lb.Buckets) != 1 {
		t.Fatalf("ListBuckets: %v %v", lb, err)
	}
	// A presigned URL names the virtual host too.
	ps, err := s3.NewPresignClient(c).PresignGetObject(ctx, &s3.GetObjectInput{Bucket: b, Key: aws.String(objName(0xa1))})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ps.URL, "http://vhost-kv."+vhostDomain+":"+port+"/") {
		t.Fatalf("presigned URL %s", ps.URL)
	}
	resp, err := (&http.Client{Transport: tr}).Get(ps.URL)
	if err != nil {
		t.Fatal(err)
	}
	whole, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(whole, data) {
		t.Fatalf("presigned GET: %d, %d bytes", resp.StatusCode, len(whole))
	}
	// Scope holds whichever addressing a request uses.
	_, err = vhostAWSClient(e, port, e.teamA, tr).ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("team-b")})
	if code, st := awsCode(err); code != "AccessDenied" || st != 403 {
		t.Fatalf("out-of-scope vhost listing: %v", err)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String(objName(0xa1))}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	hosts := tr.seen()
	if !strings.Contains(hosts, "vhost-kv."+vhostDomain+":"+port) || strings.Contains(hosts, "127.0.0.1") {
		t.Fatalf("requests were not virtual-hosted: %s", hosts)
	}
}

// TestVirtualHostedMinio: minio-go with BucketLookupDNS.
func TestVirtualHostedMinio(t *testing.T) {
	e, port := vhostEnv(t)
	ctx := context.Background()
	tr := newHostLog(e.addr)
	mc, err := minio.New(vhostDomain+":"+port, &minio.Options{
		Creds: mcreds.NewStaticV4(e.admin.AccessKeyID, e.admin.Secret, ""), Region: "us-east-1",
		BucketLookup: minio.BucketLookupDNS, Transport: tr, MaxRetries: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := mc.MakeBucket(ctx, "vhost-mc", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	data := payload(200000, 6)
	if _, err := mc.PutObject(ctx, "vhost-mc", objName(0xb1), bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	o, err := mc.GetObject(ctx, "vhost-mc", objName(0xb1), minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	back, err := io.ReadAll(o)
	o.Close()
	if err != nil || !bytes.Equal(back, data) {
		t.Fatalf("GET: %d bytes, %v", len(back), err)
	}
	n := 0
	for obj := range mc.ListObjects(ctx, "vhost-mc", minio.ListObjectsOptions{}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("listed %d objects", n)
	}
	if !strings.Contains(tr.seen(), "vhost-mc."+vhostDomain+":"+port) {
		t.Fatalf("requests were not virtual-hosted: %s", tr.seen())
	}
}

func TestHostBucket(t *testing.T) {
	s := &Server{cfg: Config{Domains: []string{"s3.example.com", "localhost"}}}
	cases := map[string]string{
		"s3.example.com":             "",
		"s3.example.com:9000":        "",
		"kv.s3.example.com":          "kv",
		"kv.s3.example.com:9000":     "kv",
		"a.b.s3.example.com:9000":    "a.b",
		"KV.S3.Example.com":          "kv",
		"kv.s3.example.com.":         "kv",
		"kv.localhost:7403":          "kv",
		"localhost:7403":             "",
		"127.0.0.1:7403":             "",
		"kv.example.com":             "",
		"xs3.example.com":            "",
		"[::1]:9000":                 "",
		"kv.s3.example.com.evil.net": "",
	}
	for host, want := range cases {
		if got := s.hostBucket(host); got != want {
			t.Errorf("hostBucket(%q) = %q, want %q", host, got, want)
		}
	}
	for _, d := range []string{"", "s3.example.com:9000", ".s3.example.com", "S3.example.com", "a..b", "-a.b"} {
		c := DefaultConfig()
		c.Domains = []string{d}
		if err := c.Validate(); err == nil {
			t.Errorf("domain %q accepted", d)
		}
	}
}
