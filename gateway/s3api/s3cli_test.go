package s3api

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ctxtier/ctxtier/internal/testdep"
)

// TestS3CLI runs scripts/s3cli-test.sh (s3cmd: list, get, put, delete)
// against an in-process server on 127.0.0.1.
func TestS3CLI(t *testing.T) {
	testdep.Command(t, "s3cmd", "make test-deps installs it (apt-get install s3cmd)")
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "s3cli-test.sh"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	cmd := exec.Command("bash", script)
	cmd.Env = append(os.Environ(), "S3_ENDPOINT="+e.addr, "S3_ACCESS_KEY="+e.admin.AccessKeyID, "S3_SECRET_KEY="+e.admin.Secret, "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("s3cli-test.sh: %v", err)
	}
}
