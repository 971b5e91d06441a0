package s3api

import (
	"encoding/pem"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ctxtier/ctxtier/internal/testdep"
)

// venvPython returns the repository's .venv python (made by `make s3-venv`),
// skipping the test when it or module is missing, or failing it in CI
// (CI=true), where the real client must run.
func venvPython(t *testing.T, module string) string {
	t.Helper()
	py, err := filepath.Abs(filepath.Join("..", "..", ".venv", "bin", "python"))
	if err != nil {
		t.Fatal(err)
	}
	if err := exec.Command(py, "-c", "import "+module).Run(); err != nil {
		msg := module + " is not installed in .venv: run `make s3-venv` (pinned in python/requirements-s3.txt)"
		testdep.Missing(t, module, msg, "make test-deps (docs/testing.md)")
	}
	return py
}

// tlsCA writes ts's certificate as a PEM CA bundle and returns its path.
func tlsCA(t *testing.T, ts *httptest.Server, dir string) string {
	t.Helper()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return ca
}

// TestAWSCLI runs testdata/awscli_s3.sh: the aws cli (pinned) with
// virtual-hosted addressing (mb, cp, ls, presign with SigV4, rm, rb) and
// its default trailing checksums over HTTPS.
func TestAWSCLI(t *testing.T) {
	py := venvPython(t, "awscli")
	e := newEnvWith(t, func(c *Config) { c.Domains = []string{"localhost"} }, nil)
	ts, rec := startTLS(t, e)
	dir := t.TempDir()
	_, port, _ := net.SplitHostPort(e.addr)
	hooks, _ := filepath.Abs(filepath.Join("testdata", "pyhooks"))
	cmd := exec.Command("bash", filepath.Join("testdata", "awscli_s3.sh"))
	cmd.Env = append(os.Environ(), "AWS="+filepath.Join(filepath.Dir(py), "aws"), "PYTHON="+py, "PYHOOKS="+hooks,
		"VHOST_ENDPOINT=http://localhost:"+port, "TLS_ENDPOINT="+ts.URL, "CA_BUNDLE="+tlsCA(t, ts, dir),
		"ACCESS="+e.admin.AccessKeyID, "SECRET="+e.admin.Secret, "WORK="+dir, "HOME="+dir)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("awscli_s3.sh: %v", err)
	}
	if !rec.saw("PUT STREAMING-UNSIGNED-PAYLOAD-TRAILER x-amz-checksum-crc32") {
		t.Fatalf("the aws cli did not send a trailing checksum over HTTPS: %v", rec.modes)
	}
}

// TestBoto3 runs testdata/boto3_s3.py: boto3 (pinned) with virtual-hosted
// addressing over HTTP, and with its default trailing checksums over HTTPS.
func TestBoto3(t *testing.T) {
	py := venvPython(t, "boto3")
	e := newEnvWith(t, func(c *Config) { c.Domains = []string{"localhost"} }, nil)
	ts, rec := startTLS(t, e)
	dir := t.TempDir()
	ca := tlsCA(t, ts, dir)
	_, port, _ := net.SplitHostPort(e.addr)
	cmd := exec.Command(py, filepath.Join("testdata", "boto3_s3.py"))
	cmd.Env = append(os.Environ(), "VHOST_ENDPOINT=http://localhost:"+port, "TLS_ENDPOINT="+ts.URL, "CA_BUNDLE="+ca,
		"ACCESS="+e.admin.AccessKeyID, "SECRET="+e.admin.Secret, "TMPDIR="+dir, "AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_CA_BUNDLE=", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("boto3_s3.py: %v", err)
	}
	if !rec.saw("PUT STREAMING-UNSIGNED-PAYLOAD-TRAILER x-amz-checksum-crc32") {
		t.Fatalf("boto3 did not send a trailing checksum over HTTPS: %v", rec.modes)
	}
}
