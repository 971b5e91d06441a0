package s3api

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ctxtier/ctxtier/internal/testdep"
)

// TestS3CLI runs scripts/s3cli-test.sh (s3cmd: list, get, put, delete)
// against an in-process server on 127.0.0.1, path style and virtual-hosted
// (host_bucket %(bucket)s.localhost:PORT; testdata/pyhooks maps
// *.localhost to loopback inside s3cmd's Python).
func TestS3CLI(t *testing.T) {
	testdep.Command(t, "s3cmd", "make test-deps installs it (apt-get install s3cmd)")
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "s3cli-test.sh"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvSized(t, 192<<20, func(c *Config) { c.Domains = []string{"localhost"} }, nil)
	_, port, _ := net.SplitHostPort(e.addr)
	hooks, _ := filepath.Abs(filepath.Join("testdata", "pyhooks"))
	for _, tc := range []struct{ name, hostBucket string }{
		{"path style", ""},
		{"virtual-hosted", "%(bucket)s.localhost:" + port},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("bash", script)
			cmd.Env = append(os.Environ(), "S3_ENDPOINT="+e.addr, "S3_ACCESS_KEY="+e.admin.AccessKeyID, "S3_SECRET_KEY="+e.admin.Secret,
				"HOME="+t.TempDir(), "PYTHONPATH="+hooks)
			if tc.hostBucket != "" {
				cmd.Env = append(cmd.Env, "S3_HOST_BUCKET="+tc.hostBucket)
			}
			out, err := cmd.CombinedOutput()
			t.Logf("%s", out)
			if err != nil {
				t.Fatalf("s3cli-test.sh: %v", err)
			}
		})
	}
}
