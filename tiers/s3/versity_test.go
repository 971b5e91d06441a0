package s3

import (
	"context"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The integration tests run against a real S3 server, versitygw (posix
// backend), started and stopped here. scripts/versitygw.sh installs it into
// ${CTXTIER_CACHE:-$HOME/.cache/ctxtier}/bin; CTXTIER_VERSITYGW names another
// binary. Without one the tests skip.

const (
	gwAccess = "ctxtier-test"
	gwSecret = "ctxtier-test-secret-key"
)

// versityBinary finds the versitygw binary, or skips.
func versityBinary(t *testing.T) string {
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
	p := filepath.Join(cache, "bin", "versitygw-v1.8.0")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("versitygw not installed (%s missing): run scripts/versitygw.sh install, or set CTXTIER_VERSITYGW", p)
	}
	return p
}

// versity is a running versitygw.
type versity struct {
	t    *testing.T
	bin  string
	dir  string
	addr string
	cmd  *exec.Cmd
}

// startVersity starts versitygw on a free 127.0.0.1 port over a fresh
// directory; the test's cleanup stops it.
func startVersity(t *testing.T) *versity {
	t.Helper()
	v := &versity{t: t, bin: versityBinary(t), dir: t.TempDir()}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	v.addr = l.Addr().String()
	l.Close()
	v.start()
	t.Cleanup(v.stop)
	return v
}

func (v *versity) start() {
	v.t.Helper()
	cmd := exec.Command(v.bin, "--port", v.addr, "--access", gwAccess, "--secret", gwSecret, "posix", v.dir)
	// AWS_CA_BUNDLE breaks tools built on the AWS SDK v2.
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "AWS_CA_BUNDLE=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	logf, err := os.Create(filepath.Join(v.t.TempDir(), "versitygw.log"))
	if err != nil {
		v.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		v.t.Fatalf("start versitygw: %v", err)
	}
	v.cmd = cmd
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", v.addr, 100*time.Millisecond); err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	v.stop()
	b, _ := os.ReadFile(logf.Name())
	v.t.Fatalf("versitygw did not listen on %s: %s", v.addr, b)
}

func (v *versity) stop() {
	if v.cmd == nil {
		return
	}
	v.cmd.Process.Kill()
	v.cmd.Wait()
	v.cmd = nil
}

// config returns a tier configuration for this server and a fresh bucket.
func (v *versity) config(t *testing.T, bucket string) Config {
	c := DefaultConfig()
	c.Endpoint, c.Bucket, c.Prefix = v.addr, bucket, "node-a"
	c.AccessKey, c.SecretKey = gwAccess, gwSecret
	c.Dir = t.TempDir()
	c.PackSize = 64 << 20
	c.PackBlocks = 256
	c.MaxBlockSize = 1 << 20
	c.MaxBuffer = 64 << 20
	c.PartSize = 5 << 20
	c.FlushInterval = time.Hour
	c.MaintainInterval = time.Hour
	c.RetryMin, c.RetryMax = 50*time.Millisecond, 200*time.Millisecond
	c.GetTimeout, c.ResponseTimeout, c.DialTimeout = time.Second, time.Second, 500*time.Millisecond
	c.BreakerFailures, c.BreakerCooldown = 2, 300*time.Millisecond
	return c
}

func (v *versity) open(t *testing.T, cfg Config) *Tier {
	t.Helper()
	tr, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// objects lists the bucket through the tier's own client.
func objects(t *testing.T, tr *Tier) []string {
	t.Helper()
	var names []string
	err := tr.store.List(context.Background(), "", func(n string, _ int64) error {
		names = append(names, n)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func fmtSize(i int) int { return 1000 + (i*7919)%30000 }
