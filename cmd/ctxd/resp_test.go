package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/internal/testdep"
	"github.com/ctxtier/ctxtier/raft/tlstest"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// needTool returns the path of a real client the test drives. A missing
// tool skips the test on a developer machine and fails it under CI=true,
// where .ci/run (make resp-deps) must have installed it.
func needTool(t *testing.T, name, hint string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	testdep.Missing(t, name, "not in PATH", hint)
	return ""
}

// venvPython returns the Python of the repository's .venv-resp (make
// resp-deps creates it; CTXTIER_RESP_PYTHON overrides it) if it can import every module named; see needTool for what
// happens when it cannot.
func venvPython(t *testing.T, modules ...string) string {
	t.Helper()
	py := os.Getenv("CTXTIER_RESP_PYTHON")
	if py == "" {
		root, err := filepath.Abs("../..")
		if err != nil {
			t.Fatal(err)
		}
		py = filepath.Join(root, ".venv-resp", "bin", "python")
	}
	imp := "import " + strings.Join(modules, ", ")
	if out, err := exec.Command(py, "-c", imp).CombinedOutput(); err != nil {
		msg := fmt.Sprintf("%s cannot %q (run make resp-deps): %v %s", py, imp, err, lastLines(string(out), 3))
		testdep.Missing(t, "redis-py/LMCache in .venv-resp", msg, "make test-deps (docs/testing.md)")
	}
	return py
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// redisCLI runs redis-cli against addr and returns its output (stdin, when
// not nil, feeds -x).
func redisCLI(t *testing.T, addr string, stdin []byte, args ...string) string {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	flags := []string{"-h", host, "-p", port}
	if stdin != nil {
		flags = append(flags, "-x")
	}
	cmd := exec.Command(needTool(t, "redis-cli", "apt-get install redis-tools"), append(flags, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli %q: %v\n%s", args, err, out)
	}
	return string(out)
}

func createNamespace(t *testing.T, httpAddr string, ns block.Namespace) {
	t.Helper()
	if _, err := httpClient(t, httpAddr).CreateNamespace(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
}

func TestRESPWithRedisCLI(t *testing.T) {
	p := startCtxd(t, "--resp-databases", "default,kv", "--max-block-size", "1MiB")
	createNamespace(t, p.HTTP, block.Namespace{Name: "kv"})
	value := make([]byte, 512<<10)
	rand.Read(value)
	steps := []struct {
		args  []string
		stdin []byte
		want  string
	}{
		{[]string{"PING"}, nil, "PONG\n"},
		{[]string{"SET", "greeting", "hello world"}, nil, "OK\n"},
		{[]string{"GET", "greeting"}, nil, "hello world\n"},
		{[]string{"SET", "blob"}, value, "OK\n"},
		{[]string{"STRLEN", "blob"}, nil, "524288\n"},
		{[]string{"EXISTS", "greeting", "blob", "none"}, nil, "2\n"},
		{[]string{"SET", "greeting", "replaced", "EX", "60"}, nil, "OK\n"},
		{[]string{"GET", "greeting"}, nil, "replaced\n"},
		{[]string{"TTL", "greeting"}, nil, "60\n"},
		{[]string{"-n", "1", "GET", "greeting"}, nil, "\n"},
		{[]string{"-n", "1", "SET", "greeting", "in kv"}, nil, "OK\n"},
		{[]string{"-n", "1", "GET", "greeting"}, nil, "in kv\n"},
		{[]string{"DBSIZE"}, nil, "2\n"},
		{[]string{"DEL", "greeting", "none"}, nil, "1\n"},
		{[]string{"SCAN", "0", "MATCH", "b*"}, nil, "0\nblob\n"},
		{[]string{"HSET", "h", "f", "v"}, nil, "ERR unknown command 'HSET', with args beginning with: 'h' 'f' 'v' \n\n"},
		{[]string{"SET", "big"}, make([]byte, 1<<20+1), "ERR argument of 1048577 bytes exceeds the limit of 1048576 bytes; nothing was stored\n\n"},
		{[]string{"SET", "big"}, make([]byte, 1<<20), "ERR too large: value of 1048576 bytes exceeds the limit of 1048547 bytes for namespace \"default\" (max block size 1048576 less a 26-byte header and the key)\n\n"},
		{[]string{"EXISTS", "big"}, nil, "0\n"},
	}
	for i, st := range steps {
		// redis-cli ends an error reply with an empty line.
		if got := redisCLI(t, p.RESP, st.stdin, st.args...); strings.TrimSuffix(got, "\n\n") != strings.TrimSuffix(st.want, "\n\n") && got != st.want {
			t.Fatalf("step %d %q: got %q want %q", i, st.args, got, st.want)
		}
	}
	// redis-cli -x appends a newline-free copy of stdin; GET returns it byte for byte.
	if got := redisCLI(t, p.RESP, nil, "GET", "blob"); got != string(value)+"\n" {
		t.Fatalf("GET blob returned %d bytes, not the %d stored", len(got)-1, len(value))
	}
	info := redisCLI(t, p.RESP, nil, "INFO")
	for _, want := range []string{"redis_version:", "db0:keys=1", "total_commands_processed:"} {
		if !strings.Contains(info, want) {
			t.Fatalf("INFO lacks %q:\n%s", want, info)
		}
	}
}

func TestRESPWithRedisPy(t *testing.T) {
	py := venvPython(t, "redis")
	p := startCtxd(t, "--resp-databases", "default,kv")
	createNamespace(t, p.HTTP, block.Namespace{Name: "kv"})
	out, err := exec.Command(py, "../../python/tests/resp/redis_py_client.py", p.RESP).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-py suite: %v\n%s", err, out)
	}
	t.Logf("%s", lastLines(string(out), 1))
}

// TestRESPWithLMCache stores and loads real CPU tensors through LMCache's
// own RedisConnector (lmcache from PyPI) against ctxd.
func TestRESPWithLMCache(t *testing.T) {
	py := venvPython(t, "lmcache", "torch")
	p := startCtxd(t)
	script, err := filepath.Abs("../../python/tests/resp/lmcache_redis_connector.py")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, script, p.RESP)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("lmcache RedisConnector: %v\n%s", err, lastLines(string(out), 30))
	}
	var ok string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "OK:") || strings.HasPrefix(l, "connector:") {
			ok += l + "\n"
		}
	}
	if !strings.Contains(ok, "wrapping RedisConnector") || !strings.Contains(ok, "OK: 8 chunks") {
		t.Fatalf("the script did not report LMCache's RedisConnector round trip:\n%s", lastLines(string(out), 30))
	}
	t.Log(strings.TrimSpace(ok))
	if n := strings.TrimSpace(redisCLIOrNothing(p.RESP, "DBSIZE")); n != "" && n != "16" {
		t.Fatalf("DBSIZE after 8 chunks (kv_bytes + metadata each) = %s, want 16", n)
	}
}

// redisCLIOrNothing runs redis-cli when it is installed ("" otherwise).
func redisCLIOrNothing(addr string, args ...string) string {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return ""
	}
	host, port, _ := net.SplitHostPort(addr)
	out, _ := exec.Command(cli, append([]string{"-h", host, "-p", port}, args...)...).Output()
	return string(out)
}

// TestRESPIdleConnections opens many idle connections (2000, or
// CTXTIER_RESP_IDLE_CONNS) and checks that ctxd keeps serving and that its
// resident memory grows by a bounded amount per connection.
func TestRESPIdleConnections(t *testing.T) {
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("CTXTIER_RESP_IDLE_CONNS")); err == nil && v > 0 {
		n = v
	}
	p := startCtxd(t)
	probe := func() {
		nc, err := net.DialTimeout("tcp", p.RESP, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		nc.Write([]byte("PING\r\n"))
		buf := make([]byte, 7)
		if _, err := nc.Read(buf); err != nil || string(buf) != "+PONG\r\n" {
			t.Fatalf("PING with %d idle connections: %q %v", n, buf, err)
		}
	}
	probe()
	before, err := p.RSS()
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, err := net.DialTimeout("tcp", p.RESP, 5*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	// Half of them send a request and go quiet again, so they have read
	// and written once.
	for _, c := range conns[:n/2] {
		c.Write([]byte("*1\r\n$4\r\nPING\r\n"))
	}
	buf := make([]byte, 7)
	for _, c := range conns[:n/2] {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := c.Read(buf); err != nil || string(buf) != "+PONG\r\n" {
			t.Fatalf("idle connection's PING: %q %v", buf, err)
		}
	}
	probe()
	after, err := p.RSS()
	if err != nil {
		t.Fatal(err)
	}
	per := (after - before) / int64(n)
	t.Logf("%d idle connections: RSS %d MiB -> %d MiB, %d KiB per connection", n, before>>20, after>>20, per>>10)
	// A connection holds a goroutine stack, an 8 KiB read buffer and its
	// state; no write buffer while idle.
	if per > 48<<10 {
		t.Fatalf("RSS grew %d KiB per idle connection, bound 48 KiB", per>>10)
	}
}

// TestRESPClusterReplace runs three real ctxd processes with a replicated
// namespace as database 0: every node's RESP port serves every key, and a
// SET of other bytes through another node ends with the new value on every
// node (and one block, the old one retired), even with a node gone.
func TestRESPClusterReplace(t *testing.T) {
	needTool(t, "redis-cli", "apt-get install redis-tools")
	nodes, _ := startClusterWith(t, 3, func(string) []string { return []string{"--resp-databases", "kv3,ec21"} })
	replicated(t, nodes[0], "kv3")
	createNamespace(t, nodes[0].http, block.Namespace{Name: "ec21", DataShards: 2, ParityShards: 1})
	v1 := make([]byte, 256<<10)
	v2 := make([]byte, 300<<10)
	rand.Read(v1)
	rand.Read(v2)
	if got := redisCLI(t, nodes[0].p.RESP, v1, "SET", "chunk"); got != "OK\n" {
		t.Fatal(got)
	}
	readsOn := func(nd *testNode, want []byte) bool {
		return redisCLI(t, nd.p.RESP, nil, "GET", "chunk") == string(want)+"\n"
	}
	for _, nd := range nodes {
		waitFor(t, 10*time.Second, "the first value on "+nd.id, func() bool { return readsOn(nd, v1) })
	}
	// Replace through another node.
	if got := redisCLI(t, nodes[1].p.RESP, v2, "SET", "chunk"); got != "OK\n" {
		t.Fatal(got)
	}
	for _, nd := range nodes {
		waitFor(t, 10*time.Second, "the new value on "+nd.id, func() bool { return readsOn(nd, v2) })
	}
	// Once a node has the new value it keeps it (the old one never returns).
	for range 5 {
		for _, nd := range nodes {
			if !readsOn(nd, v2) {
				t.Fatalf("%s went back from the new value", nd.id)
			}
		}
	}
	// Replaces while readers on every node loop GET: a replace is one step
	// for readers (docs/resp.md, "Replacing"), so each reply is one of the
	// values, never nil; a follower may answer an older one for a moment.
	stop := make(chan struct{})
	type tally struct {
		reads int
		bad   string
	}
	results := make(chan tally, len(nodes))
	for _, nd := range nodes {
		go func() {
			var r tally
			defer func() { results <- r }()
			conn, err := net.Dial("tcp", nd.p.RESP)
			if err != nil {
				r.bad = err.Error()
				return
			}
			defer conn.Close()
			br := bufio.NewReader(conn)
			for {
				select {
				case <-stop:
					return
				default:
				}
				got, err := respGet(conn, br, "chunk")
				switch {
				case err != nil:
					r.bad = fmt.Sprintf("%s: %v", nd.id, err)
					return
				case got == nil:
					r.bad = nd.id + ": GET answered nil during a replace"
					return
				case !bytes.Equal(got, v1) && !bytes.Equal(got, v2):
					r.bad = fmt.Sprintf("%s: GET answered %d bytes of neither value", nd.id, len(got))
					return
				}
				r.reads++
			}
		}()
	}
	for i := range 6 {
		v := [][]byte{v1, v2}[i%2]
		if got := redisCLI(t, nodes[i%3].p.RESP, v, "SET", "chunk"); got != "OK\n" {
			t.Fatal(got)
		}
	}
	time.Sleep(100 * time.Millisecond)
	close(stop)
	total := 0
	for range nodes {
		r := <-results
		if r.bad != "" {
			t.Fatal(r.bad)
		}
		total += r.reads
	}
	t.Logf("%d GETs during 6 replaces, none nil", total)
	if total == 0 {
		t.Fatal("no GET completed during the replaces")
	}
	for _, nd := range nodes {
		waitFor(t, 10*time.Second, "the last value on "+nd.id, func() bool { return readsOn(nd, v2) })
	}
	for _, nd := range nodes {
		if got := redisCLI(t, nd.p.RESP, nil, "DBSIZE"); got != "1\n" {
			t.Fatalf("DBSIZE on %s = %q, want 1 (the old record retired)", nd.id, got)
		}
	}
	// Database 1 is erasure-coded, RS(2,1): a value set through one node
	// reads back through the others, and is replaced the same way.
	if got := redisCLI(t, nodes[2].p.RESP, v1, "-n", "1", "SET", "chunk"); got != "OK\n" {
		t.Fatal(got)
	}
	if got := redisCLI(t, nodes[0].p.RESP, v2, "-n", "1", "SET", "chunk"); got != "OK\n" {
		t.Fatal(got)
	}
	for _, nd := range nodes {
		waitFor(t, 10*time.Second, "the erasure-coded value on "+nd.id, func() bool {
			return redisCLI(t, nd.p.RESP, nil, "-n", "1", "GET", "chunk") == string(v2)+"\n"
		})
	}
	// Three replicas (and RS(2,1)): with one node gone the others still serve both.
	nodes[2].p.Kill()
	for _, nd := range nodes[:2] {
		if !readsOn(nd, v2) {
			t.Fatalf("%s cannot read the replicated key with n3 down", nd.id)
		}
		if got := redisCLI(t, nd.p.RESP, nil, "-n", "1", "GET", "chunk"); got != string(v2)+"\n" {
			t.Fatalf("%s cannot read the erasure-coded key with n3 down (%d bytes)", nd.id, len(got))
		}
	}
}

// respGet sends GET key on conn and reads the reply: the value, or nil for
// a RESP2 nil bulk.
func respGet(conn net.Conn, br *bufio.Reader, key string) ([]byte, error) {
	if _, err := fmt.Fprintf(conn, "*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", len(key), key); err != nil {
		return nil, err
	}
	line, err := br.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimRight(line, "\r\n")
	if !strings.HasPrefix(line, "$") {
		return nil, fmt.Errorf("GET reply %q", line)
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil || n < 0 {
		return nil, err // $-1: nil
	}
	b := make([]byte, n+2)
	if _, err := io.ReadFull(br, b); err != nil {
		return nil, err
	}
	return b[:n], nil
}

// TestRESPClientTLS: with --tls-clients the RESP port speaks TLS 1.3 with
// the node certificate. redis-cli --tls and redis-py ssl=True (trusting
// --tls-ca) set and get values; plaintext clients are refused.
func TestRESPClientTLS(t *testing.T) {
	cli := needTool(t, "redis-cli", "apt-get install redis-tools")
	py := venvPython(t, "redis")
	ca := tlstest.NewCA(t)
	f := ca.WriteFiles(t, t.TempDir(), "n1")
	p := startCtxd(t, append(tlsArgs(f), "--tls-clients")...)
	host, port, _ := net.SplitHostPort(p.RESP)
	tlsCLI := func(stdin []byte, args ...string) string {
		t.Helper()
		flags := []string{"--tls", "--cacert", f.CA, "-h", host, "-p", port}
		if stdin != nil {
			flags = append(flags, "-x")
		}
		cmd := exec.Command(cli, append(flags, args...)...)
		if stdin != nil {
			cmd.Stdin = bytes.NewReader(stdin)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli --tls %q: %v\n%s", args, err, out)
		}
		return string(out)
	}
	value := make([]byte, 300<<10)
	rand.Read(value)
	if got := tlsCLI(nil, "PING"); got != "PONG\n" {
		t.Fatalf("PING over TLS: %q", got)
	}
	if got := tlsCLI(value, "SET", "tls-blob"); got != "OK\n" {
		t.Fatalf("SET over TLS: %q", got)
	}
	if got := tlsCLI(nil, "GET", "tls-blob"); got != string(value)+"\n" {
		t.Fatalf("GET over TLS returned %d bytes, not the %d stored", len(got)-1, len(value))
	}
	// Plaintext: redis-cli without --tls gets no reply, and a raw PING
	// gets no +PONG (the server answers with a TLS alert, or nothing).
	out, _ := exec.Command(cli, "-h", host, "-p", port, "PING").CombinedOutput()
	if strings.Contains(string(out), "PONG") {
		t.Fatalf("plaintext redis-cli got %q from the TLS port", out)
	}
	nc, err := net.DialTimeout("tcp", p.RESP, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	nc.Write([]byte("*1\r\n$4\r\nPING\r\n"))
	got, _ := io.ReadAll(nc)
	nc.Close()
	if bytes.Contains(got, []byte("PONG")) {
		t.Fatalf("the TLS port answered a plaintext PING: %q", got)
	}
	out, err = exec.Command(py, "../../python/tests/resp/redis_py_tls.py", p.RESP, f.CA).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-py over TLS: %v\n%s", err, out)
	}
	t.Logf("%s", lastLines(string(out), 1))
}
