package s3api

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ctxtier/ctxtier/internal/testdep"
)

// TestBoto3Objects runs testdata/boto3_objects.py: boto3 (pinned) with its
// default settings against an object namespace: arbitrary keys, listings,
// replace, metadata, conditions, copy, KVBM's lock/meta pattern with racing
// writers, multipart errors, and the transfer manager moving 200 MiB with
// its default 8 MiB multipart threshold.
func TestBoto3Objects(t *testing.T) {
	py := venvPython(t, "boto3")
	e := newEnvSized(t, 512<<20, func(c *Config) { c.Domains = []string{"localhost"} }, nil)
	dir := t.TempDir()
	_, port, _ := net.SplitHostPort(e.addr)
	cmd := exec.Command(py, filepath.Join("testdata", "boto3_objects.py"))
	cmd.Env = append(os.Environ(), "VHOST_ENDPOINT=http://localhost:"+port,
		"ACCESS="+e.admin.AccessKeyID, "SECRET="+e.admin.Secret, "TMPDIR="+dir, "BIG_MIB=200", "AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_CA_BUNDLE=", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("boto3_objects.py: %v", err)
	}
}

// TestAWSCLIObjects runs testdata/awscli_objects.sh: the aws cli (pinned)
// with default settings: `s3 cp` of 200 MiB each way (multipart at 8 MiB),
// `s3 sync` twice, `s3 presign` with SigV4.
func TestAWSCLIObjects(t *testing.T) {
	py := venvPython(t, "awscli")
	e := newEnvSized(t, 512<<20, nil, nil)
	dir := t.TempDir()
	cmd := exec.Command("bash", filepath.Join("testdata", "awscli_objects.sh"))
	cmd.Env = append(os.Environ(), "AWS="+filepath.Join(filepath.Dir(py), "aws"), "ENDPOINT=http://"+e.addr,
		"ACCESS="+e.admin.AccessKeyID, "SECRET="+e.admin.Secret, "WORK="+dir, "HOME="+dir, "BIG_MIB=200")
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("awscli_objects.sh: %v", err)
	}
}

// TestRcloneObjects runs testdata/rclone_objects.sh: rclone (Debian's
// package, installed by .ci/run) with default settings: copy, check with
// MD5 hashes, a second copy that transfers nothing.
func TestRcloneObjects(t *testing.T) {
	if _, err := exec.LookPath("rclone"); err != nil {
		msg := "rclone is not installed: apt-get install rclone (.ci/run does)"
		testdep.Missing(t, "rclone", msg, "make test-deps (docs/testing.md)")
	}
	e := newEnvSized(t, 128<<20, nil, nil)
	dir := t.TempDir()
	cmd := exec.Command("bash", filepath.Join("testdata", "rclone_objects.sh"))
	cmd.Env = append(os.Environ(), "ENDPOINT=http://"+e.addr, "ACCESS="+e.admin.AccessKeyID, "SECRET="+e.admin.Secret, "WORK="+dir, "HOME="+dir)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("rclone_objects.sh: %v", err)
	}
}
