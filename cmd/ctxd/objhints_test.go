package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

// TestCtxdObjectHints starts real ctxd processes with a 32 MiB DRAM tier
// and no NVMe tier (an eviction drops the block) and, through minio-go,
// puts into an object namespace (a bucket created over S3): object A (1
// MiB, PutObject) and object B (multipart: parts of 5 MiB and 1 MiB, the
// hints given at CreateMultipartUpload only), both hinted reuse=session,
// retain 10 minutes, session 77; object C (1 MiB) of session 78, same
// hints; 4 unhinted 1 MiB peers of the same age; then 40 unhinted 1 MiB
// objects, more than the tier holds. Under the default policy (window,
// which honours hints) A, B and C must survive whole while the peers are
// gone; HEAD of A must still show the hints as its user metadata. Then
// END_SESSION 77 over the native protocol must release exactly A's and
// B's blocks (their data blocks and manifests: 2 + 3), and after 40 more
// unhinted objects A and B are gone while C (session 78, live) stays. Under
// window-nohints (the control) the first flood evicts A, B and C with
// their peers.
func TestCtxdObjectHints(t *testing.T) {
	const mib = 1 << 20
	const bucket = "agent-scratch"
	payload := func(seed, n int) []byte {
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(seed*131 + j*7 + j>>11)
		}
		return b
	}
	hints := func(session int) map[string]string {
		return map[string]string{"ctx-reuse": "session", "ctx-retain": "10m", "ctx-session": fmt.Sprint(session)}
	}
	for _, tc := range hintPolicies {
		t.Run(tc.policy, func(t *testing.T) {
			dir := t.TempDir()
			admin := adminKeyFor(t, dir)
			p := startCtxd(t, append([]string{"--data-dir", dir, "--dram-capacity", "32MiB", "--nvme-dir", "off"}, tc.args...)...)
			ctx := withTimeout(t, 4*time.Minute)
			mc := s3Client(t, p.S3, admin)
			if err := mc.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
				t.Fatal(err)
			}
			want := map[string][]byte{}
			put := func(key string, data []byte, meta map[string]string) {
				t.Helper()
				if _, err := mc.PutObject(ctx, bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{UserMetadata: meta}); err != nil {
					t.Fatalf("put %s: %v", key, err)
				}
				want[key] = data
			}
			// read reports whether key reads back whole; an object whose
			// blocks were evicted is 404 NoSuchKey (its manifest went) or 503
			// (a data block went first); any other answer fails t.
			read := func(key string) bool {
				t.Helper()
				u, err := mc.PresignedGetObject(ctx, bucket, key, time.Minute, nil)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := http.Get(u.String())
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				body, err := io.ReadAll(resp.Body)
				switch {
				case resp.StatusCode == http.StatusOK && err == nil:
					if !bytes.Equal(body, want[key]) {
						t.Fatalf("%s: wrong bytes (%d, want %d)", key, len(body), len(want[key]))
					}
					return true
				case resp.StatusCode == http.StatusNotFound && strings.Contains(string(body), "NoSuchKey"),
					resp.StatusCode == http.StatusServiceUnavailable:
					return false
				}
				t.Fatalf("GET %s: %d %v %s", key, resp.StatusCode, err, body)
				return false
			}
			flood := func(tag string) {
				t.Helper()
				before := metricValue(t, p.HTTP, `ctxtier_tier_evictions_total{tier="dram"}`)
				for i := range 40 {
					put(fmt.Sprintf("fill/%s/%02d", tag, i), payload(1000+i, mib), nil)
				}
				if ev := metricValue(t, p.HTTP, `ctxtier_tier_evictions_total{tier="dram"}`) - before; ev < 8 {
					t.Fatalf("%v dram evictions from 40 MiB of puts into 32 MiB", ev)
				}
			}

			put("a", payload(1, mib), hints(77))
			put("peer/0", payload(2, mib), nil)
			core := &minio.Core{Client: mc}
			id, err := core.NewMultipartUpload(ctx, bucket, "b", minio.PutObjectOptions{UserMetadata: hints(77)})
			if err != nil {
				t.Fatal(err)
			}
			var parts []minio.CompletePart
			var whole []byte
			for i, n := range []int{5 * mib, mib} {
				data := payload(10+i, n)
				whole = append(whole, data...)
				// No metadata on the part: the hints are the upload's.
				op, err := core.PutObjectPart(ctx, bucket, "b", id, i+1, bytes.NewReader(data), int64(n), minio.PutObjectPartOptions{})
				if err != nil {
					t.Fatal(err)
				}
				parts = append(parts, minio.CompletePart{PartNumber: i + 1, ETag: op.ETag})
			}
			if _, err := core.CompleteMultipartUpload(ctx, bucket, "b", id, parts, minio.PutObjectOptions{}); err != nil {
				t.Fatal(err)
			}
			want["b"] = whole
			put("peer/1", payload(3, mib), nil)
			put("c", payload(4, mib), hints(78))
			put("peer/2", payload(5, mib), nil)
			put("peer/3", payload(6, mib), nil)

			info, err := mc.StatObject(ctx, bucket, "a", minio.StatObjectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for h, v := range map[string]string{"X-Amz-Meta-Ctx-Reuse": "session", "X-Amz-Meta-Ctx-Retain": "10m", "X-Amz-Meta-Ctx-Session": "77"} {
				if got := info.Metadata.Get(h); got != v {
					t.Errorf("HEAD a: %s = %q, want %q", h, got, v)
				}
			}

			flood("1")
			for _, k := range []string{"a", "b", "c"} {
				if got := read(k); got != tc.hinted {
					t.Errorf("hinted object %s readable %v, want %v", k, got, tc.hinted)
				}
			}
			for i := range 4 {
				if read(fmt.Sprintf("peer/%d", i)) {
					t.Errorf("unhinted peer %d of the hinted objects survived", i)
				}
			}
			if !read("fill/1/39") {
				t.Fatal("the newest object is gone")
			}
			if !tc.hinted {
				return
			}

			c := dialSessions(ctx, t, p.Native)
			n, err := c.EndSession(ctx, bucket, 77)
			if err != nil {
				t.Fatal(err)
			}
			if n != 2+3 {
				t.Fatalf("END_SESSION 77 released %d blocks, want 5 (a: data + manifest; b: 2 data + manifest)", n)
			}
			flood("2")
			for k, live := range map[string]bool{"a": false, "b": false, "c": true, "fill/2/39": true} {
				if got := read(k); got != live {
					t.Errorf("after END_SESSION 77 and a flood: %s readable %v, want %v", k, got, live)
				}
			}
		})
	}
}

// TestCtxdObjectHintsRejected: an object namespace's PutObject and
// CreateMultipartUpload with an invalid hint are 400 InvalidArgument naming
// the header, and store nothing (no object, no upload).
func TestCtxdObjectHintsRejected(t *testing.T) {
	const bucket = "agent-bad"
	dir := t.TempDir()
	admin := adminKeyFor(t, dir)
	p := startCtxd(t, "--data-dir", dir, "--dram-capacity", "16MiB", "--nvme-dir", "off")
	ctx := withTimeout(t, time.Minute)
	mc := s3Client(t, p.S3, admin)
	if err := mc.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	core := &minio.Core{Client: mc}
	for _, tc := range []struct {
		meta   map[string]string
		header string
	}{
		{map[string]string{"ctx-reuse": "always"}, "X-Amz-Meta-Ctx-Reuse"},
		{map[string]string{"ctx-retain": "soon"}, "X-Amz-Meta-Ctx-Retain"},
		{map[string]string{"ctx-retain": "-5s"}, "X-Amz-Meta-Ctx-Retain"},
		{map[string]string{"ctx-session": "0"}, "X-Amz-Meta-Ctx-Session"},
		{map[string]string{"ctx-reuse": "never", "ctx-retain": "30"}, "retain"},
	} {
		check := func(op string, err error) {
			t.Helper()
			resp := minio.ToErrorResponse(err)
			if err == nil || resp.Code != "InvalidArgument" || resp.StatusCode != http.StatusBadRequest || !strings.Contains(strings.ToLower(resp.Message), strings.ToLower(tc.header)) {
				t.Fatalf("%s with %v: %v (code %q, message %q; want InvalidArgument naming %s)", op, tc.meta, err, resp.Code, resp.Message, tc.header)
			}
			t.Logf("%s with %v: %s", op, tc.meta, resp.Message)
		}
		_, err := mc.PutObject(ctx, bucket, "k", bytes.NewReader([]byte("xyz")), 3, minio.PutObjectOptions{UserMetadata: tc.meta})
		check("PutObject", err)
		_, err = core.NewMultipartUpload(ctx, bucket, "k", minio.PutObjectOptions{UserMetadata: tc.meta})
		check("CreateMultipartUpload", err)
	}
	if _, err := mc.StatObject(ctx, bucket, "k", minio.StatObjectOptions{}); minio.ToErrorResponse(err).Code != "NoSuchKey" {
		t.Fatalf("a rejected put stored the object: %v", err)
	}
	ups, err := core.ListMultipartUploads(ctx, bucket, "", "", "", "", 100)
	if err != nil || len(ups.Uploads) != 0 {
		t.Fatalf("a rejected create left uploads: %+v %v", ups.Uploads, err)
	}
}
