package s3api

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
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
