package resp

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/credential"
)

// TestCommands runs a script of commands on one connection and checks each
// reply byte for byte.
func TestCommands(t *testing.T) {
	addr, _ := testServer(t, nil)
	c := dial(t, addr)
	steps := []struct {
		args []string
		want string
	}{
		{[]string{"PING"}, "+PONG\r\n"},
		{[]string{"ping", "hi"}, bulk("hi")},
		{[]string{"ECHO", "x\r\ny"}, bulk("x\r\ny")},
		{[]string{"GET", "k"}, "$-1\r\n"},
		{[]string{"SET", "k", "v1"}, "+OK\r\n"},
		{[]string{"GET", "k"}, bulk("v1")},
		{[]string{"SET", "k", "v2"}, "+OK\r\n"},
		{[]string{"GET", "k"}, bulk("v2")},
		{[]string{"SET", "k", "v3", "NX"}, "$-1\r\n"},
		{[]string{"SET", "k", "v3", "XX"}, "+OK\r\n"},
		{[]string{"SET", "nokey", "v", "XX"}, "$-1\r\n"},
		{[]string{"SET", "k", "v", "NX", "XX"}, "-ERR syntax error\r\n"},
		{[]string{"SET", "k", "v", "EX", "0"}, "-ERR syntax error\r\n"},
		{[]string{"SET", "k", "v", "EX", "10", "PX", "5"}, "-ERR syntax error\r\n"},
		{[]string{"STRLEN", "k"}, ":2\r\n"},
		{[]string{"STRLEN", "none"}, ":0\r\n"},
		{[]string{"SET", "r", "Hello World"}, "+OK\r\n"},
		{[]string{"GETRANGE", "r", "0", "4"}, bulk("Hello")},
		{[]string{"GETRANGE", "r", "-5", "-1"}, bulk("World")},
		{[]string{"GETRANGE", "r", "5", "2"}, bulk("")},
		{[]string{"GETRANGE", "r", "0", "1000"}, bulk("Hello World")},
		{[]string{"GETRANGE", "r", "x", "1"}, "-ERR value is not an integer or out of range\r\n"},
		{[]string{"MSET", "a", "1", "b", "2"}, "+OK\r\n"},
		{[]string{"MSET", "a", "1", "b"}, "-ERR wrong number of arguments for 'mset' command\r\n"},
		{[]string{"MGET", "a", "nope", "b"}, "*3\r\n" + bulk("1") + "$-1\r\n" + bulk("2")},
		{[]string{"EXISTS", "a", "b", "a", "nope"}, ":3\r\n"},
		{[]string{"TTL", "a"}, ":-1\r\n"},
		{[]string{"TTL", "nope"}, ":-2\r\n"},
		{[]string{"EXPIRE", "a", "100"}, ":1\r\n"},
		{[]string{"TTL", "a"}, ":100\r\n"},
		{[]string{"EXPIRE", "a", "50", "GT"}, ":0\r\n"},
		{[]string{"EXPIRE", "a", "50", "LT"}, ":1\r\n"},
		{[]string{"TTL", "a"}, ":50\r\n"},
		{[]string{"EXPIRE", "a", "5", "NX"}, ":0\r\n"},
		{[]string{"EXPIRE", "a", "5", "NX", "XX"}, "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n"},
		{[]string{"EXPIRE", "nope", "5"}, ":0\r\n"},
		{[]string{"GET", "a"}, bulk("1")},
		{[]string{"PERSIST", "a"}, ":1\r\n"},
		{[]string{"PERSIST", "a"}, ":0\r\n"},
		{[]string{"TTL", "a"}, ":-1\r\n"},
		{[]string{"SET", "a", "one", "EX", "100"}, "+OK\r\n"},
		{[]string{"SET", "a", "two", "KEEPTTL"}, "+OK\r\n"},
		{[]string{"TTL", "a"}, ":100\r\n"},
		{[]string{"SET", "a", "three"}, "+OK\r\n"},
		{[]string{"TTL", "a"}, ":-1\r\n"},
		{[]string{"EXPIRE", "a", "-1"}, ":1\r\n"},
		{[]string{"GET", "a"}, "$-1\r\n"},
		{[]string{"DEL", "a", "b", "nope"}, ":1\r\n"},
		{[]string{"UNLINK", "k"}, ":1\r\n"},
		{[]string{"DBSIZE"}, ":1\r\n"},
		{[]string{"SELECT", "2"}, "+OK\r\n"},
		{[]string{"DBSIZE"}, ":0\r\n"},
		{[]string{"GET", "r"}, "$-1\r\n"},
		{[]string{"SELECT", "0"}, "+OK\r\n"},
		{[]string{"GET", "r"}, bulk("Hello World")},
		{[]string{"SELECT", "3"}, "-ERR DB index is out of range\r\n"},
		{[]string{"SCAN", "0", "COUNT", "100"}, "*2\r\n" + bulk("0") + "*1\r\n" + bulk("r")},
		{[]string{"SCAN", "0", "MATCH", "x*"}, "*2\r\n" + bulk("0") + "*0\r\n"},
		{[]string{"SCAN", "0", "TYPE", "hash"}, "*2\r\n" + bulk("0") + "*0\r\n"},
		{[]string{"SCAN", "zz"}, "-ERR invalid cursor\r\n"},
		{[]string{"CLIENT", "SETNAME", "me"}, "+OK\r\n"},
		{[]string{"CLIENT", "GETNAME"}, bulk("me")},
		{[]string{"CLIENT", "SETINFO", "LIB-NAME", "test"}, "+OK\r\n"},
		{[]string{"CLIENT", "KILL"}, "-ERR unknown subcommand or wrong number of arguments for 'KILL'. Try SETNAME, GETNAME, SETINFO or ID.\r\n"},
		{[]string{"COMMAND", "COUNT"}, fmt.Sprintf(":%d\r\n", len(commandTable))},
		{[]string{"CONFIG", "GET", "save"}, "*2\r\n" + bulk("save") + bulk("")},
		{[]string{"AUTH", "x", "y"}, "-ERR invalid argument: AUTH <access-key-id> <secret> called without any password configured (ctxd runs with --auth off)\r\n"},
		{[]string{"FLUSHALL"}, "-ERR unknown command 'FLUSHALL', with args beginning with: \r\n"},
		{[]string{"HSET", "h", "f", "v"}, "-ERR unknown command 'HSET', with args beginning with: 'h' 'f' 'v' \r\n"},
		{[]string{"GET"}, "-ERR wrong number of arguments for 'get' command\r\n"},
		{[]string{"SELECT", "1"}, "+OK\r\n"},
		{[]string{"SET", "big", strings.Repeat("x", 1024)}, "-ERR too large: value of 1024 bytes exceeds the limit of 995 bytes for namespace \"small\" (max block size 1024 less a 26-byte header and the key)\r\n"},
		{[]string{"SET", "big", strings.Repeat("x", 995)}, "+OK\r\n"},
		{[]string{"STRLEN", "big"}, ":995\r\n"},
		{[]string{"HELLO", "3"}, "%7\r\n" + bulk("server") + bulk("redis") + bulk("version") + bulk(redisVersion) + bulk("proto") + ":3\r\n" + bulk("id") + ":1\r\n" + bulk("mode") + bulk("standalone") + bulk("role") + bulk("master") + bulk("modules") + "*0\r\n"},
		{[]string{"GET", "nothing"}, "_\r\n"},
		{[]string{"MGET", "nothing", "big"}, "*2\r\n_\r\n" + bulk(strings.Repeat("x", 995))},
		{[]string{"CONFIG", "GET", "appendonly"}, "%1\r\n" + bulk("appendonly") + bulk("no")},
		{[]string{"HELLO", "4"}, "-NOPROTO unsupported protocol version\r\n"},
		{[]string{"HELLO", "2"}, "*14\r\n" + bulk("server") + bulk("redis") + bulk("version") + bulk(redisVersion) + bulk("proto") + ":2\r\n" + bulk("id") + ":1\r\n" + bulk("mode") + bulk("standalone") + bulk("role") + bulk("master") + bulk("modules") + "*0\r\n"},
		{[]string{"GET", "nothing"}, "$-1\r\n"},
		{[]string{"QUIT"}, "+OK\r\n"},
	}
	for i, st := range steps {
		if got := c.do(st.args...); got != st.want {
			t.Fatalf("step %d %q:\n got %q\nwant %q", i, st.args, got, st.want)
		}
	}
	if !c.closed() {
		t.Fatal("QUIT did not close the connection")
	}
}

func TestBinaryKeysAndValuesRoundTrip(t *testing.T) {
	addr, _ := testServer(t, nil)
	c := dial(t, addr)
	key := "\x00\xff\r\n$*key"
	val := string([]byte{0, 1, 2, '\r', '\n', 255})
	if got := c.do("SET", key, val); got != "+OK\r\n" {
		t.Fatal(got)
	}
	if got := c.do("GET", key); got != bulk(val) {
		t.Fatalf("%q", got)
	}
	if got := c.do("SCAN", "0"); got != "*2\r\n"+bulk("0")+"*1\r\n"+bulk(key) {
		t.Fatalf("scan %q", got)
	}
}

func TestPipelineAnsweredInOrder(t *testing.T) {
	addr, _ := testServer(t, nil)
	c := dial(t, addr)
	var req, want strings.Builder
	for i := range 500 {
		req.WriteString(encode("SET", fmt.Sprint("p", i), fmt.Sprint("v", i)))
		want.WriteString("+OK\r\n")
		req.WriteString(encode("GET", fmt.Sprint("p", i)))
		want.WriteString(bulk(fmt.Sprint("v", i)))
	}
	req.WriteString("PING\r\n") // an inline command in the same stream
	want.WriteString("+PONG\r\n")
	go c.sendAsync(req.String())
	var got strings.Builder
	for range 1001 {
		got.WriteString(c.reply())
	}
	if got.String() != want.String() {
		t.Fatal("pipelined replies differ from the requests' answers")
	}
}

// TestMalformedInput sends broken requests: each gets a clear -ERR, the
// connection is closed where the stream cannot be framed any more, and the
// server keeps serving other connections.
func TestMalformedInput(t *testing.T) {
	addr, _ := testServer(t, nil)
	cases := []struct {
		name      string
		raw       string
		want      string
		keepsConn bool
	}{
		{"negative multibulk length", "*-5\r\nPING\r\n", "+PONG\r\n", true},
		{"multibulk length not a number", "*x\r\n", "-ERR Protocol error: invalid multibulk length\r\n", false},
		{"too many arguments", "*99999999\r\n", "-ERR Protocol error: invalid multibulk length\r\n", false},
		{"negative bulk length", "*1\r\n$-3\r\n", "-ERR Protocol error: invalid bulk length\r\n", false},
		{"bulk length of 4 GiB", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4294967296\r\n", "-ERR Protocol error: invalid bulk length\r\n", false},
		{"bulk length overflowing int64", "*1\r\n$99999999999999999999\r\n", "-ERR Protocol error: invalid bulk length\r\n", false},
		{"bulk not a $", "*1\r\n:12\r\n", "-ERR Protocol error: expected '$', got ':'\r\n", false},
		{"bulk longer than declared", "*1\r\n$2\r\nPING\r\n", "-ERR Protocol error: bulk string not terminated by CRLF\r\n", false},
		{"header without CR", "*1\n", "-ERR Protocol error: header line '*1\\x0a' not terminated by CRLF\r\n", false},
		{"binary garbage", "*\x00\xff\xfe\r\n", "-ERR Protocol error: invalid multibulk length\r\n", false},
		{"endless header line", "*" + strings.Repeat("9", 20000), "-ERR Protocol error: header line too long\r\n", false},
		{"endless inline line", strings.Repeat("A", 20000), "-ERR Protocol error: too big inline request\r\n", false},
		{"value over the limit is dropped", encode("SET", "k", strings.Repeat("x", 4<<20+1)) + encode("GET", "k"),
			"-ERR argument of 4194305 bytes exceeds the limit of 4194304 bytes; nothing was stored\r\n$-1\r\n", true},
		{"request over the limit is dropped", encode("MSET", "a", strings.Repeat("x", 4e6), "b", strings.Repeat("x", 4e6), "c", strings.Repeat("x", 4e6),
			"d", strings.Repeat("x", 4e6), "e", strings.Repeat("x", 4e6)) + encode("EXISTS", "a", "b", "e"),
			"-ERR request of 20000009 bytes exceeds the limit of 16777216 bytes; nothing was stored\r\n:0\r\n", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, addr)
			go c.sendAsync(tc.raw)
			var got string
			for len(got) < len(tc.want) {
				got += c.reply()
			}
			if got != tc.want {
				t.Fatalf("got %q\nwant %q", got, tc.want)
			}
			if closed := c.closed(); closed == tc.keepsConn {
				t.Fatalf("connection closed: %v, want %v", closed, !tc.keepsConn)
			}
			// The server is still up for everyone else.
			if got := dial(t, addr).do("PING"); got != "+PONG\r\n" {
				t.Fatalf("after %s: %q", tc.name, got)
			}
		})
	}
}

// TestUnterminatedRequestTimesOut: a client that starts a request and
// stops is cut off after ReadTimeout; the server stays up.
func TestUnterminatedRequestTimesOut(t *testing.T) {
	addr, _ := testServer(t, func(c *Config) { c.ReadTimeout = 200 * time.Millisecond })
	for _, raw := range []string{"*3\r\n$3\r\nSET\r\n", "*2\r\n$3\r\nGET\r\n$10\r\nabc"} {
		c := dial(t, addr)
		c.send(raw)
		start := time.Now()
		if !c.closed() {
			t.Fatalf("%q: connection still open", raw)
		}
		if d := time.Since(start); d > 900*time.Millisecond {
			t.Fatalf("%q: closed after %v", raw, d)
		}
	}
	if got := dial(t, addr).do("PING"); got != "+PONG\r\n" {
		t.Fatal(got)
	}
}

// TestIdleConnectionOutlivesReadTimeout: without an idle timeout (the
// default, as on Redis) a connection may wait between requests far longer
// than ReadTimeout, which bounds only a request that has begun.
func TestIdleConnectionOutlivesReadTimeout(t *testing.T) {
	addr, _ := testServer(t, func(c *Config) { c.ReadTimeout = 100 * time.Millisecond })
	c := dial(t, addr)
	for i := range 3 {
		if got := c.do("PING"); got != "+PONG\r\n" {
			t.Fatalf("PING %d: %q", i, got)
		}
		time.Sleep(350 * time.Millisecond)
	}
	// A request begun and not finished is still cut off.
	c.send("*2\r\n$3\r\nGET\r\n")
	if !c.closed() {
		t.Fatal("a stalled request outlived ReadTimeout")
	}
}

func TestAuthScopesDatabases(t *testing.T) {
	keys := credential.Static{
		"CTXAAA": {AccessKeyID: "CTXAAA", Secret: "s3cret", Namespaces: []string{"default"}},
		"CTXALL": {AccessKeyID: "CTXALL", Secret: "all", Namespaces: []string{"*"}},
	}
	addr, _ := testServer(t, nil, WithAuth(keys))
	c := dial(t, addr)
	steps := []struct {
		args []string
		want string
	}{
		{[]string{"GET", "k"}, "-NOAUTH Authentication required.\r\n"},
		{[]string{"PING"}, "-NOAUTH Authentication required.\r\n"},
		{[]string{"AUTH", "s3cret"}, "-WRONGPASS ctxtier has no default user: use AUTH <access-key-id> <secret>\r\n"},
		{[]string{"AUTH", "CTXAAA", "wrong"}, "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{[]string{"AUTH", "CTXNOPE", "s3cret"}, "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{[]string{"HELLO", "3"}, "-NOAUTH Authentication required.\r\n"},
		{[]string{"AUTH", "CTXAAA", "s3cret"}, "+OK\r\n"},
		{[]string{"SET", "k", "v"}, "+OK\r\n"},
		{[]string{"GET", "k"}, bulk("v")},
		{[]string{"SELECT", "2"}, "-NOPERM permission denied: namespace \"other\" (database 2) is outside this access key's scope\r\n"},
		{[]string{"GET", "k"}, bulk("v")},
	}
	for i, st := range steps {
		if got := c.do(st.args...); got != st.want {
			t.Fatalf("step %d %q:\n got %q\nwant %q", i, st.args, got, st.want)
		}
	}
	// HELLO with AUTH logs in and switches protocol in one step.
	c2 := dial(t, addr)
	if got := c2.do("HELLO", "3", "AUTH", "CTXALL", "all", "SETNAME", "n"); !strings.HasPrefix(got, "%7\r\n") {
		t.Fatalf("hello auth: %q", got)
	}
	if got := c2.do("SELECT", "2"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	if got := c2.do("CLIENT", "GETNAME"); got != bulk("n") {
		t.Fatal(got)
	}
}

func TestManyConnectionsAndMaxConns(t *testing.T) {
	addr, srv := testServer(t, func(c *Config) { c.MaxConns = 300 })
	var wg sync.WaitGroup
	errs := make(chan string, 300)
	for i := range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dial(t, addr)
			k := fmt.Sprint("conn", i)
			if got := c.do("SET", k, k); got != "+OK\r\n" {
				errs <- got
			}
			if got := c.do("GET", k); got != bulk(k) {
				errs <- got
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatalf("concurrent client: %q", e)
	}
	if n := srv.Conns(); n != 300 {
		t.Fatalf("%d open connections, want 300", n)
	}
	extra := dial(t, addr)
	if got := extra.reply(); got != "-ERR max number of clients reached\r\n" {
		t.Fatalf("connection past MaxConns: %q", got)
	}
}

func TestShutdownFinishesTheRunningPipeline(t *testing.T) {
	addr, srv := testServer(t, nil)
	c := dial(t, addr)
	if got := c.do("SET", "k", "v"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	idle := dial(t, addr)
	if got := idle.do("PING"); got != "+PONG\r\n" {
		t.Fatal(got)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(t.Context()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("shutdown did not finish with idle connections open")
	}
	if !idle.closed() {
		t.Fatal("idle connection left open")
	}
}

// TestClientThatDoesNotReadIsCutOff: a client that pipelines GETs of a
// large value and never reads the replies is closed after WriteTimeout;
// the server keeps serving others and its connection count goes back.
func TestClientThatDoesNotReadIsCutOff(t *testing.T) {
	addr, srv := testServer(t, func(c *Config) { c.WriteTimeout = 300 * time.Millisecond })
	c := dial(t, addr)
	if got := c.do("SET", "big", strings.Repeat("v", 1<<20)); got != "+OK\r\n" {
		t.Fatal(got)
	}
	go c.sendAsync(strings.Repeat(encode("GET", "big"), 200)) // 200 MiB of replies nobody reads
	deadline := time.Now().Add(10 * time.Second)
	for srv.Conns() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := srv.Conns(); n != 0 {
		t.Fatalf("%d connections still open 10 s after the client stopped reading", n)
	}
	if got := dial(t, addr).do("PING"); got != "+PONG\r\n" {
		t.Fatal(got)
	}
}

func TestInfoSections(t *testing.T) {
	addr, _ := testServer(t, nil)
	c := dial(t, addr)
	for _, k := range []string{"a", "b", "c"} {
		c.do("SET", k, "v")
	}
	c.do("SELECT", "2")
	c.do("SET", "x", "v")
	c.do("GET", "x")
	c.do("GET", "nope")
	cases := []struct {
		section string
		want    []string
		absent  []string
	}{
		{"keyspace", []string{"# Keyspace\r\n", "db0:keys=3,", "namespace=default", "db2:keys=1,"}, []string{"db1:", "# Server"}},
		{"stats", []string{"keyspace_hits:1\r\n", "keyspace_misses:1\r\n", "total_connections_received:1\r\n"}, []string{"# Keyspace"}},
		{"server", []string{"redis_version:" + redisVersion, "databases:3\r\n", "tcp_port:"}, []string{"# Stats"}},
		{"", []string{"# Server", "# Clients", "# Memory", "# Stats", "# Keyspace", "connected_clients:1\r\n"}, nil},
	}
	for _, tc := range cases {
		args := []string{"INFO"}
		if tc.section != "" {
			args = append(args, tc.section)
		}
		got := c.do(args...)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("INFO %s lacks %q:\n%s", tc.section, w, got)
			}
		}
		for _, a := range tc.absent {
			if strings.Contains(got, a) {
				t.Errorf("INFO %s has %q:\n%s", tc.section, a, got)
			}
		}
	}
}

// TestInfoCountsPipelinedCommands checks the INFO counters a connection
// keeps for itself and publishes once per batch of replies: an INFO inside
// the pipeline counts the commands before it, and another connection sees
// them once the batch was answered.
func TestInfoCountsPipelinedCommands(t *testing.T) {
	addr, _ := testServer(t, nil)
	c := dial(t, addr)
	c.do("SET", "k", "v")
	c.send(encode("GET", "k") + encode("GET", "k") + encode("GET", "nope") + encode("MGET", "k", "nope") + encode("INFO", "stats"))
	for range 4 {
		c.reply()
	}
	stats := []struct {
		name string
		info string
	}{{"same connection, same pipeline", c.reply()}}
	stats = append(stats, struct {
		name string
		info string
	}{"another connection", dial(t, addr).do("INFO", "stats")})
	// SET, 3 GETs, MGET and the INFO itself (a command counts itself, as
	// before it ran on shared counters): 6; the second INFO makes 7.
	for i, tc := range stats {
		wantCmds := []string{"total_commands_processed:6\r\n", "total_commands_processed:7\r\n"}[i]
		for _, w := range []string{"keyspace_hits:3\r\n", "keyspace_misses:2\r\n", wantCmds} {
			if !strings.Contains(tc.info, w) {
				t.Errorf("%s: INFO lacks %q:\n%s", tc.name, w, tc.info)
			}
		}
	}
}

// TestPipelinedSelectSwitchesNamespace checks that a SELECT inside a
// pipeline moves the reads after it to the new database's namespace (the
// connection looks its namespace up once per batch, and again after
// SELECT).
func TestPipelinedSelectSwitchesNamespace(t *testing.T) {
	addr, _ := testServer(t, nil)
	c := dial(t, addr)
	c.do("SET", "k", "in-default")
	c.do("SELECT", "2")
	c.do("SET", "k", "in-other")
	c.do("SELECT", "0")
	c.send(encode("GET", "k") + encode("SELECT", "2") + encode("GET", "k") + encode("MGET", "k", "x") +
		encode("SELECT", "0") + encode("MGET", "k") + encode("GET", "k"))
	want := []string{bulk("in-default"), "+OK\r\n", bulk("in-other"), "*2\r\n" + bulk("in-other") + "$-1\r\n",
		"+OK\r\n", "*1\r\n" + bulk("in-default"), bulk("in-default")}
	for i, w := range want {
		if got := c.reply(); got != w {
			t.Fatalf("reply %d = %q, want %q", i, got, w)
		}
	}
}
