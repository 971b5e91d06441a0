// Package s3test runs a real S3-compatible server, versitygw (posix
// backend), for tests: started on a free 127.0.0.1 port over a fresh
// directory and stopped by the test's cleanup. scripts/versitygw.sh installs
// the binary into ${CTXTIER_CACHE:-$HOME/.cache/ctxtier}/bin;
// CTXTIER_VERSITYGW names another one. Without a binary the test skips with
// a message saying how to install it, or fails under CI=true or
// CTXTIER_STRICT=1 (internal/testdep).
package s3test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/internal/freeport"
	"github.com/ctxtier/ctxtier/internal/testdep"
)

// Credentials of the test server (the same as scripts/versitygw.sh's).
const (
	Access = "ctxtier-test"
	Secret = "ctxtier-test-secret-key"
)

// Version is the versitygw release the scripts install.
const Version = "v1.8.0"

// Binary finds the versitygw binary, or skips t (fails it when strict).
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("CTXTIER_VERSITYGW"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("CTXTIER_VERSITYGW=%s: %v", p, err)
		}
		return p
	}
	cache := os.Getenv("CTXTIER_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "ctxtier")
	}
	p := filepath.Join(cache, "bin", "versitygw-"+Version)
	return testdep.Path(t, p, "versitygw "+Version, "run scripts/versitygw.sh install (make test-deps does), or set CTXTIER_VERSITYGW")
}

// Server is a running versitygw.
type Server struct {
	t   testing.TB
	bin string
	// Dir is the posix backend's directory (a bucket is a folder in it).
	Dir string
	// Addr is host:port.
	Addr string
	cmd  *exec.Cmd
	log  string
}

// Start starts a server on a free port over a fresh directory; t's cleanup
// stops it.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, bin: Binary(t), Dir: t.TempDir()}
	s.Addr = freeport.Addr(t)
	s.log = filepath.Join(t.TempDir(), "versitygw.log")
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// Restart starts the server again (after Stop) on the same address and
// directory, and waits until it listens.
func (s *Server) Restart() {
	s.t.Helper()
	if s.cmd != nil {
		return
	}
	cmd := exec.Command(s.bin, "--port", s.Addr, "--access", Access, "--secret", Secret, "posix", s.Dir)
	// AWS_CA_BUNDLE breaks tools built on the AWS SDK v2.
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "AWS_CA_BUNDLE=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		s.t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start versitygw: %v", err)
	}
	s.cmd = cmd
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", s.Addr, 100*time.Millisecond); err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.Stop()
	b, _ := os.ReadFile(s.log)
	s.t.Fatalf("versitygw did not listen on %s: %s", s.Addr, b)
}

// Stop kills the server (a no-op when it is not running).
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}
