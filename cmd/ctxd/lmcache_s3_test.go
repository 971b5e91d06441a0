package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/ctxtier/ctxtier/internal/testdep"
)

// lmcacheS3Domain is the virtual-host base domain ctxd serves in
// TestLMCacheS3Connector; BUCKET.lmcacheS3Domain resolves only inside the
// script's private mount namespace.
const lmcacheS3Domain = "s3.test"

// withHosts returns a command that runs name with args in a private mount
// namespace whose /etc/hosts (a bind mount of a file in a temporary
// directory) maps each of names to 127.0.0.1; the machine's own /etc/hosts
// is untouched. It needs root and unshare(1): without them the test skips,
// or fails in CI (testdep).
func withHosts(t *testing.T, names []string, name string, args ...string) *exec.Cmd {
	t.Helper()
	unshare := testdep.Command(t, "unshare", "apt-get install util-linux")
	if os.Geteuid() != 0 {
		testdep.Missing(t, "root", "a private /etc/hosts needs a mount namespace (unshare --mount, mount --bind)", "run the tests as root")
	}
	hosts := filepath.Join(t.TempDir(), "hosts")
	body := "127.0.0.1 localhost\n::1 localhost\n127.0.0.1 " + strings.Join(names, " ") + "\n"
	if err := os.WriteFile(hosts, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	// The hosts path and the command are positional parameters, never
	// parsed by the shell.
	script := `mount --bind "$1" /etc/hosts && shift && exec "$@"`
	probe := exec.Command(unshare, "--mount", "sh", "-c", script, "sh", hosts, "getent", "hosts", names[0])
	if out, err := probe.CombinedOutput(); err != nil || !strings.Contains(string(out), "127.0.0.1") {
		testdep.Missing(t, "a mount namespace with its own /etc/hosts", fmt.Sprintf("unshare --mount + mount --bind: %v %s", err, out), "run the tests as root")
	}
	return exec.Command(unshare, append([]string{"--mount", "sh", "-c", script, "sh", hosts, name}, args...)...)
}

// TestLMCacheS3Connector stores and loads real CPU tensors through LMCache's
// own S3Connector (lmcache from PyPI, driving awscrt's native S3 client)
// against ctxd's S3 endpoint with virtual-hosted addressing: the connector's
// requests carry Host BUCKET.s3.test:PORT, which ctxd (--s3-domain s3.test)
// maps to the bucket. Chunks of 2 MiB go up in one PUT; chunks of 12 MiB
// (over awscrt's 8 MiB part size) as multipart uploads of two parts, read
// back in two ranged GETs.
func TestLMCacheS3Connector(t *testing.T) {
	py := venvPython(t, "lmcache", "torch", "awscrt")
	dir := t.TempDir()
	admin := adminKeyFor(t, dir)
	p := startCtxd(t, "--data-dir", dir, "--s3-domain", lmcacheS3Domain)
	_, port, err := net.SplitHostPort(p.S3)
	if err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs("../../python/tests/s3/lmcache_s3_connector.py")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	mc, err := minio.New(p.S3, &minio.Options{Creds: credentials.NewStaticV4(admin.AccessKeyID, admin.Secret, ""),
		Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	runs := []struct {
		name, bucket   string
		layers, chunks int
		size           int64
		etagParts      string // the ETag's multipart suffix, "" for one PUT
	}{
		{"single PUT", "lmcache", 4, 8, 2 << 20, ""},
		{"multipart", "lmcache-mp", 24, 3, 12 << 20, "-2"},
	}
	var hosts []string
	for _, r := range runs {
		hosts = append(hosts, r.bucket+"."+lmcacheS3Domain)
	}
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			if err := mc.MakeBucket(ctx, r.bucket, minio.MakeBucketOptions{}); err != nil {
				t.Fatal(err)
			}
			url := "s3://" + r.bucket + "." + lmcacheS3Domain + ":" + port
			cmd := withHosts(t, hosts, py, script, url, admin.AccessKeyID, admin.Secret, fmt.Sprint(r.layers), fmt.Sprint(r.chunks))
			cmd.Dir = t.TempDir()
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("lmcache S3Connector: %v\n%s", err, lastLines(string(out), 40))
			}
			var report string
			var keys []string
			for _, l := range strings.Split(string(out), "\n") {
				switch {
				case strings.HasPrefix(l, "key: "):
					keys = append(keys, strings.TrimPrefix(l, "key: "))
				case strings.HasPrefix(l, "OK:"), strings.HasPrefix(l, "connector:"), strings.HasPrefix(l, "resolves:"):
					report += l + "\n"
				}
			}
			ok := fmt.Sprintf("OK: %d chunks of %d bytes", r.chunks, r.size)
			if !strings.Contains(report, "wrapping S3Connector") || !strings.Contains(report, ok) || len(keys) != r.chunks {
				t.Fatalf("the script did not report LMCache's S3Connector round trip (%q):\n%s", ok, lastLines(string(out), 40))
			}
			t.Log(strings.TrimSpace(report))

			// What ctxd holds, seen through path-style S3: the chunks,
			// whole, in the bucket the virtual host named, stored the way
			// awscrt sent them (one PUT, or a multipart upload).
			var listed []string
			for o := range mc.ListObjects(ctx, r.bucket, minio.ListObjectsOptions{Recursive: true}) {
				if o.Err != nil {
					t.Fatal(o.Err)
				}
				if o.Size != r.size {
					t.Errorf("%s: %d bytes, want %d", o.Key, o.Size, r.size)
				}
				etag := strings.Trim(o.ETag, `"`)
				if multi := strings.Contains(etag, "-"); multi != (r.etagParts != "") || (multi && !strings.HasSuffix(etag, r.etagParts)) {
					t.Errorf("%s: ETag %q, want multipart suffix %q", o.Key, etag, r.etagParts)
				}
				listed = append(listed, o.Key)
			}
			slices.Sort(listed)
			slices.Sort(keys)
			if !slices.Equal(listed, keys) {
				t.Fatalf("bucket %s holds %q, the connector put %q", r.bucket, listed, keys)
			}
		})
	}

	// No bucket beside the two and the built-in namespace "default".
	buckets, err := mc.ListBuckets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range buckets {
		names = append(names, b.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"default", "lmcache", "lmcache-mp"}) {
		t.Fatalf("buckets after the run: %q, want default, lmcache and lmcache-mp", names)
	}
}
