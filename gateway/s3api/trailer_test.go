package s3api

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"
	mcreds "github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// modeRecorder wraps the server and records each request's payload mode
// and x-amz-trailer, so a test can prove which framing a real client used.
type modeRecorder struct {
	h     http.Handler
	mu    sync.Mutex
	modes []string
}

func (m *modeRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	m.modes = append(m.modes, r.Method+" "+r.Header.Get("X-Amz-Content-Sha256")+" "+r.Header.Get("X-Amz-Trailer"))
	m.mu.Unlock()
	m.h.ServeHTTP(w, r)
}

func (m *modeRecorder) saw(s string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, x := range m.modes {
		if x == s {
			return true
		}
	}
	return false
}

// startTLS serves e's server (wrapped in a recorder) over HTTPS on
// 127.0.0.1, as the AWS SDKs send trailing checksums only over HTTPS.
func startTLS(t *testing.T, e *env) (*httptest.Server, *modeRecorder) {
	t.Helper()
	rec := &modeRecorder{h: e.srv}
	ts := httptest.NewUnstartedServer(rec)
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts, rec
}

// TestAWSSDKTrailingChecksum: aws-sdk-go-v2 with default settings over
// HTTPS sends PutObject as STREAMING-UNSIGNED-PAYLOAD-TRAILER with a CRC32
// trailer; the server decodes and verifies it.
func TestAWSSDKTrailingChecksum(t *testing.T) {
	e := newEnv(t)
	ts, rec := startTLS(t, e)
	ctx := context.Background()
	c := s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(ts.URL), UsePathStyle: true, HTTPClient: ts.Client(),
		Credentials: credentials.NewStaticCredentialsProvider(e.admin.AccessKeyID, e.admin.Secret, ""), RetryMaxAttempts: 1,
		// What config.LoadDefaultConfig resolves by default (s3.New alone leaves it unset).
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenSupported,
	})
	data := payload(3<<20+17, 5)
	// An io.Reader that is not seekable, as a streamed upload would be.
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("team-a"), Key: aws.String(objName(0x71)),
		Body: io.MultiReader(bytes.NewReader(data)), ContentLength: aws.Int64(int64(len(data)))}); err != nil {
		t.Fatal(err)
	}
	if !rec.saw("PUT STREAMING-UNSIGNED-PAYLOAD-TRAILER x-amz-checksum-crc32") {
		t.Fatalf("the SDK did not send a trailing checksum: %v", rec.modes)
	}
	for _, alg := range []string{"CRC32C", "SHA256", "CRC64NVME"} {
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("team-a"), Key: aws.String(objName(0x72)),
			Body: bytes.NewReader(data[:1000]), ChecksumAlgorithm: types.ChecksumAlgorithm(alg)}); err != nil {
			t.Fatalf("%s: %v", alg, err)
		}
		if !rec.saw("PUT STREAMING-UNSIGNED-PAYLOAD-TRAILER x-amz-checksum-" + strings.ToLower(alg)) {
			t.Fatalf("%s: no trailer seen: %v", alg, rec.modes)
		}
	}
	ref, err := e.store.Get(ctx, block.NewKey("team-a", 0x71))
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Release()
	if !bytes.Equal(ref.Data, data) {
		t.Fatal("stored bytes differ")
	}
}

// TestTrailerChecksumMismatch: a trailing checksum that does not match the
// bytes is 400 BadDigest and nothing is stored; a malformed trailer is 400
// MalformedTrailerError.
func TestTrailerChecksumMismatch(t *testing.T) {
	e := newEnv(t)
	data := payload(70000, 3)
	sum := crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))
	good := base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, sum))
	bad := base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, sum+1))
	frame := func(trailer string) []byte {
		var b bytes.Buffer
		for p := data; len(p) > 0; {
			n := min(32768, len(p))
			fmt.Fprintf(&b, "%x\r\n", n)
			b.Write(p[:n])
			b.WriteString("\r\n")
			p = p[n:]
		}
		b.WriteString("0\r\n" + trailer + "\r\n")
		return b.Bytes()
	}
	put := func(h uint64, body []byte) (int, string) {
		r := rawSigned(t, e, e.admin, "PUT", "/team-a/"+objName(h), body, time.Now(), func(r *http.Request) {
			r.Header.Set("X-Amz-Content-Sha256", "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
			r.Header.Set("X-Amz-Trailer", "x-amz-checksum-crc32c")
			r.Header.Set("X-Amz-Decoded-Content-Length", strconv.Itoa(len(data)))
			r.Header.Set("Content-Encoding", "aws-chunked")
		}, nil)
		return do(t, r)
	}
	cases := []struct {
		h      uint64
		body   []byte
		status int
		code   string
	}{
		{1, frame("x-amz-checksum-crc32c:" + bad), 400, "BadDigest"},
		{2, frame("x-amz-checksum-crc32:" + good), 400, "MalformedTrailerError"},
		{3, frame(""), 400, "MalformedTrailerError"},
		{4, frame("x-amz-checksum-crc32c:" + good), 200, ""},
	}
	for _, tc := range cases {
		st, b := put(tc.h, tc.body)
		if st != tc.status || !strings.Contains(b, tc.code) {
			t.Errorf("object %d: %d %s, want %d %s", tc.h, st, b, tc.status, tc.code)
		}
		_, err := e.store.Stat(context.Background(), block.NewKey("team-a", tc.h), ctxstore.ReadOptions{})
		if (err == nil) != (tc.status == 200) {
			t.Errorf("object %d: stored=%v after %d", tc.h, err == nil, st)
		}
	}
}

// TestMinioTrailingChecksum: minio-go with TrailingHeaders sends signed
// trailers (STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER) over HTTP and
// unsigned ones over HTTPS.
func TestMinioTrailingChecksum(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rec := &modeRecorder{h: e.srv}
	plain := httptest.NewServer(rec)
	t.Cleanup(plain.Close)
	ts := httptest.NewUnstartedServer(rec)
	ts.StartTLS()
	t.Cleanup(ts.Close)
	data := payload(1<<20+3, 8)
	for i, tc := range []struct {
		url    string
		secure bool
		tr     http.RoundTripper
		mode   string
	}{
		{plain.URL, false, http.DefaultTransport, "PUT STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER x-amz-checksum-crc32c"},
		{ts.URL, true, ts.Client().Transport, "PUT STREAMING-UNSIGNED-PAYLOAD-TRAILER x-amz-checksum-crc32c"},
	} {
		mc, err := minio.New(strings.TrimPrefix(strings.TrimPrefix(tc.url, "http://"), "https://"), &minio.Options{
			Creds: mcreds.NewStaticV4(e.admin.AccessKeyID, e.admin.Secret, ""), Secure: tc.secure, Transport: tc.tr,
			Region: "us-east-1", BucketLookup: minio.BucketLookupPath, MaxRetries: 1, TrailingHeaders: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		h := uint64(0x90 + i)
		if _, err := mc.PutObject(ctx, "team-a", objName(h), bytes.NewReader(data), int64(len(data)),
			minio.PutObjectOptions{Checksum: minio.ChecksumCRC32C}); err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		if !rec.saw(tc.mode) {
			t.Fatalf("want %q, saw %v", tc.mode, rec.modes)
		}
		ref, err := e.store.Get(ctx, block.NewKey("team-a", h))
		if err != nil {
			t.Fatal(err)
		}
		same := bytes.Equal(ref.Data, data)
		ref.Release()
		if !same {
			t.Fatal("stored bytes differ")
		}
	}
}
