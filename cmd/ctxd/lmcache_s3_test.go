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
// requests carry Host lmcache.s3.test:PORT, which ctxd (--s3-domain s3.test)
// maps to the bucket "lmcache".
func TestLMCacheS3Connector(t *testing.T) {
	py := venvPython(t, "lmcache", "torch", "awscrt")
	dir := t.TempDir()
	admin := adminKeyFor(t, dir)
	p := startCtxd(t, "--data-dir", dir, "--s3-domain", lmcacheS3Domain)
	_, port, err := net.SplitHostPort(p.S3)
	if err != nil {
		t.Fatal(err)
	}
	vhost := "lmcache." + lmcacheS3Domain
	script, err := filepath.Abs("../../python/tests/s3/lmcache_s3_connector.py")
	if err != nil {
		t.Fatal(err)
	}
	cmd := withHosts(t, []string{vhost}, py, script, "s3://"+vhost+":"+port, admin.AccessKeyID, admin.Secret)
	cmd.Dir = t.TempDir()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	mc, err := minio.New(p.S3, &minio.Options{Creds: credentials.NewStaticV4(admin.AccessKeyID, admin.Secret, ""),
		Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	if err := mc.MakeBucket(ctx, "lmcache", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}

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
	if !strings.Contains(report, "wrapping S3Connector") || !strings.Contains(report, "OK: 8 chunks of 2097152 bytes") || len(keys) != 8 {
		t.Fatalf("the script did not report LMCache's S3Connector round trip:\n%s", lastLines(string(out), 40))
	}
	t.Log(strings.TrimSpace(report))

	// What ctxd holds, seen through path-style S3: the eight chunks, whole,
	// in the bucket the virtual host named, and no bucket beside it and the
	// built-in namespace "default".
	var listed []string
	for o := range mc.ListObjects(ctx, "lmcache", minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		if o.Size != 2097152 {
			t.Errorf("%s: %d bytes, want 2097152", o.Key, o.Size)
		}
		listed = append(listed, o.Key)
	}
	slices.Sort(listed)
	slices.Sort(keys)
	if !slices.Equal(listed, keys) {
		t.Fatalf("bucket lmcache holds %q, the connector put %q", listed, keys)
	}
	buckets, err := mc.ListBuckets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range buckets {
		names = append(names, b.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"default", "lmcache"}) {
		t.Fatalf("buckets after the run: %q, want default and lmcache", names)
	}
}
