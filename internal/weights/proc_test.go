package weights

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/internal/freeport"
)

// ctxdBin is the ctxd binary the tests run, built once by TestMain.
var ctxdBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "weights-ctxd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctxdBin = filepath.Join(dir, "ctxd")
	build := exec.Command("go", "build", "-o", ctxdBin, "../../cmd/ctxd")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building ctxd:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// node is a running ctxd process with an admin S3 key.
type node struct {
	cmd     *exec.Cmd
	s3      string
	dataDir string
	key     credential.Credential
	done    chan struct{}
}

// startCtxd starts a single-node ctxd with a fresh data dir on ephemeral
// ports and waits for its "ctxd ready" log line. Its admin key is new, or
// when keysFrom is a data dir, that dir's keys (files copied).
func startCtxd(t *testing.T, keysFrom string) *node {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	for _, f := range []string{credential.FileName, credential.NodeKeyFile} {
		if keysFrom == "" {
			break
		}
		b, err := os.ReadFile(filepath.Join(keysFrom, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := credential.OpenFile(credential.DefaultConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	var key credential.Credential
	if keysFrom == "" {
		key, err = keys.Create(ctx, []string{credential.ScopeAll}, "weights test")
	} else {
		var all []credential.Credential
		all, err = keys.List(ctx)
		if err == nil && len(all) != 1 {
			err = fmt.Errorf("%d keys in %s, want 1", len(all), keysFrom)
		}
		if err == nil {
			key, err = keys.Lookup(all[0].AccessKeyID)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	n := &node{key: key, dataDir: dir, done: make(chan struct{})}
	n.cmd = exec.Command(ctxdBin, "--data-dir", dir, "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
		"--s3-admin-listen", "127.0.0.1:0", "--resp-listen", "127.0.0.1:0", "--peer-listen", "127.0.0.1:0",
		"--raft-listen", freeport.Addr(t), "--log-format", "json")
	stderr, err := n.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == "ctxd ready" {
				s, _ := rec["s3"].(string)
				ready <- s
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	go func() { n.cmd.Wait(); close(n.done) }()
	t.Cleanup(func() { n.cmd.Process.Kill(); <-n.done })
	select {
	case n.s3 = <-ready:
	case <-n.done:
		t.Fatal("ctxd exited before ready")
	case <-time.After(30 * time.Second):
		t.Fatal("ctxd not ready after 30s")
	}
	return n
}

// kill ends the process with SIGKILL and waits for it.
func (n *node) kill() { n.cmd.Process.Kill(); <-n.done }

func (n *node) client(t *testing.T, mut func(*Config)) *Client {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Endpoints, cfg.AccessKey, cfg.Secret = []string{n.s3}, n.key.AccessKeyID, n.key.Secret
	cfg.ChunkSize = 8 << 20
	if mut != nil {
		mut(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
