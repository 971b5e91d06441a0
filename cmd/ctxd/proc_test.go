package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/internal/freeport"
)

// ctxdBin is the ctxd binary the process tests run, built once by TestMain.
var ctxdBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ctxd-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctxdBin = filepath.Join(dir, "ctxd")
	build := exec.Command("go", "build", "-o", ctxdBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building ctxd:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running ctxd process.
type proc struct {
	t       *testing.T
	cmd     *exec.Cmd
	Native  string
	HTTP    string
	S3      string
	RESP    string
	DataDir string
	mu      sync.Mutex
	log     bytes.Buffer
	exited  chan struct{}
	exitErr error
}

// startCtxd starts ctxd on ephemeral ports with a fresh data dir (unless
// --data-dir is among args) and waits until it logs that it is ready.
func startCtxd(t *testing.T, args ...string) *proc {
	t.Helper()
	return startCtxdWith(t, exec.Command, args...)
}

// startCtxdWith is startCtxd with the process made by command (e.g. a
// netns.Node's Command, to run ctxd inside a network namespace).
func startCtxdWith(t *testing.T, command func(name string, args ...string) *exec.Cmd, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, exited: make(chan struct{})}
	full := []string{"--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--s3-admin-listen", "127.0.0.1:0", "--resp-listen", "127.0.0.1:0", "--log-format", "json"}
	hasDir := false
	for i, a := range args {
		if a == "--data-dir" && i+1 < len(args) {
			hasDir, p.DataDir = true, args[i+1]
		}
	}
	if !hasDir {
		p.DataDir = t.TempDir()
		full = append(full, "--data-dir", p.DataDir)
	}
	hasRaft, hasPeer := false, false
	for _, a := range args {
		hasRaft = hasRaft || a == "--raft-listen"
		hasPeer = hasPeer || a == "--peer-listen"
	}
	if !hasRaft {
		// A restart on the same data dir keeps its Raft address, as a real
		// node does (the address is in its Raft configuration).
		raftAddrsMu.Lock()
		addr, ok := raftAddrs[p.DataDir]
		if !ok {
			addr = freeAddr(t)
			raftAddrs[p.DataDir] = addr
		}
		raftAddrsMu.Unlock()
		full = append(full, "--raft-listen", addr)
	}
	if !hasPeer {
		full = append(full, "--peer-listen", "127.0.0.1:0")
	}
	full = append(full, args...)
	p.cmd = command(ctxdBin, full...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan [4]string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			p.mu.Lock()
			p.log.Write(line)
			p.log.WriteByte('\n')
			p.mu.Unlock()
			var rec map[string]any
			if json.Unmarshal(line, &rec) == nil && rec["msg"] == "ctxd ready" {
				n, _ := rec["native"].(string)
				h, _ := rec["http"].(string)
				s3, _ := rec["s3"].(string)
				r, _ := rec["resp"].(string)
				ready <- [4]string{n, h, s3, r}
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	go func() {
		p.exitErr = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.Kill()
		if dir := os.Getenv("CTXTIER_TEST_LOGS"); dir != "" {
			// Every process's log, passing or not: tracing a rare failure
			// needs the runs around it too.
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d.log", filepath.Base(p.DataDir), p.cmd.Process.Pid)), []byte(p.Log()), 0o644); err != nil {
				t.Errorf("keeping the ctxd log: %v", err)
			}
		}
		if t.Failed() {
			t.Logf("ctxd log:\n%s", p.Log())
		}
	})
	select {
	case a := <-ready:
		p.Native, p.HTTP, p.S3, p.RESP = a[0], a[1], a[2], a[3]
	case <-p.exited:
		t.Fatalf("ctxd exited before ready: %v\n%s", p.exitErr, p.Log())
	case <-time.After(30 * time.Second):
		t.Fatalf("ctxd not ready after 30s\n%s", p.Log())
	}
	return p
}

// Log returns what the process logged so far.
func (p *proc) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// Kill sends SIGKILL and waits for the process to go.
func (p *proc) Kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// Stop sends SIGTERM and waits up to timeout for a clean exit.
func (p *proc) Stop(timeout time.Duration) error {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.exitErr
	case <-time.After(timeout):
		p.Kill()
		return fmt.Errorf("ctxd did not exit within %v of SIGTERM", timeout)
	}
}

// RSS returns the process's resident set size in bytes (VmRSS, which includes
// the shared-memory pages of the DRAM arena that the process has touched).
func (p *proc) RSS() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", p.cmd.Process.Pid)
}

func withTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

var (
	raftAddrsMu sync.Mutex
	raftAddrs   = map[string]string{}
)

// freeAddr returns a 127.0.0.1 address for a listener whose address must be
// known before it listens (see internal/freeport).
func freeAddr(t *testing.T) string { return freeport.Addr(t) }
