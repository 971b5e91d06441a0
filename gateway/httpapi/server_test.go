package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/blocktest"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
	"github.com/ctxtier/ctxtier/gateway/metrics"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"default", func(*Config) {}, true},
		{"zero block", func(c *Config) { c.MaxBlockSize = 0 }, false},
		{"huge block", func(c *Config) { c.MaxBlockSize = block.HardMaxBlockSize + 1 }, false},
		{"zero items", func(c *Config) { c.MaxBatchItems = 0 }, false},
		{"zero batch bytes", func(c *Config) { c.MaxBatchBytes = 0 }, false},
		{"zero lookup", func(c *Config) { c.MaxLookupBlocks = 0 }, false},
		{"tiny json", func(c *Config) { c.MaxJSONBytes = 10 }, false},
		{"tiny headers", func(c *Config) { c.MaxHeaderBytes = 10 }, false},
		{"no header timeout", func(c *Config) { c.ReadHeaderTimeout = 0 }, false},
		{"negative timeout", func(c *Config) { c.WriteTimeout = -1 }, false},
	}
	for _, tc := range tests {
		c := DefaultConfig()
		tc.mod(&c)
		if err := c.Validate(); (err == nil) != tc.ok || (err != nil && !errors.Is(err, block.ErrInvalidArgument)) {
			t.Errorf("%s: Validate() = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestNamespaces(t *testing.T) {
	e := newEnv(t, nil)
	tests := []struct {
		name   string
		body   string
		status int
		code   string
	}{
		{"create", `{"name":"llama","model":"llama-3-8b","block_tokens":16,"tenant_salt":"s3cret"}`, 201, ""},
		{"identical again", `{"name":"llama","model":"llama-3-8b","block_tokens":16,"tenant_salt":"s3cret"}`, 200, ""},
		{"conflicting", `{"name":"llama","model":"llama-3-8b","block_tokens":32}`, 409, "NamespaceExists"},
		{"invalid name", `{"name":"Bad_Name"}`, 400, "InvalidArgument"},
		{"invalid scheme", `{"name":"x","hash_scheme":"md5"}`, 400, "InvalidArgument"},
		{"unknown field", `{"name":"x","blocktokens":16}`, 400, "InvalidArgument"},
		{"not json", `name=x`, 400, "InvalidArgument"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, hdr, body := e.postJSON("/v1/namespaces", tc.body)
			if tc.code != "" {
				wantError(t, st, hdr, body, tc.status, tc.code)
				return
			}
			var ns block.Namespace
			if st != tc.status || json.Unmarshal(body, &ns) != nil || ns.Name != "llama" || ns.BlockTokens != 16 || ns.HashScheme != block.SchemeDynamo {
				t.Fatalf("%d %s", st, body)
			}
			if strings.Contains(string(body), "s3cret") {
				t.Fatal("tenant salt returned")
			}
		})
	}
	st, _, body := e.do("GET", "/v1/namespaces", nil, nil)
	var list httpwire.NamespaceList
	if st != 200 || json.Unmarshal(body, &list) != nil || len(list.Namespaces) != 2 || list.Namespaces[0].Name != "default" || list.Namespaces[1].Name != "llama" {
		t.Fatalf("list: %d %s", st, body)
	}
	if strings.Contains(string(body), "s3cret") {
		t.Fatal("tenant salt listed")
	}
	st, _, body = e.do("GET", "/v1/namespaces/llama", nil, nil)
	if st != 200 || !strings.Contains(string(body), `"model":"llama-3-8b"`) {
		t.Fatalf("get: %d %s", st, body)
	}
	st, hdr, body := e.do("GET", "/v1/namespaces/nope", nil, nil)
	wantError(t, st, hdr, body, 404, "UnknownNamespace")
	// A block in the new namespace is separate from default's.
	e.do("PUT", "/v1/namespaces/llama/blocks/"+h1, nil, strings.NewReader("x"))
	st, _, _ = e.do("GET", "/v1/namespaces/default/blocks/"+h1, nil, nil)
	if st != 404 {
		t.Fatalf("namespaces leak: %d", st)
	}
}

func TestOpsEndpoints(t *testing.T) {
	var notReady error
	e := newEnv(t, nil, WithReady(func() error { return notReady }))
	e.put(h1, []byte("abc"), nil)
	e.do("GET", "/v1/namespaces/default/blocks/"+h1, nil, nil)
	if st, _, body := e.do("GET", "/healthz", nil, nil); st != 200 || string(body) != "ok\n" {
		t.Fatalf("healthz: %d %q", st, body)
	}
	if st, _, _ := e.do("GET", "/readyz", nil, nil); st != 200 {
		t.Fatalf("readyz: %d", st)
	}
	notReady = errors.New("no raft leader")
	st, hdr, body := e.do("GET", "/readyz", nil, nil)
	wantError(t, st, hdr, body, 503, "Unavailable")
	if !strings.Contains(string(body), "no raft leader") {
		t.Fatalf("readyz body: %s", body)
	}
	st, _, body = e.do("GET", "/metrics", nil, nil)
	for _, want := range []string{
		`ctxtier_requests_total{code="OK",op="put",proto="http"} 1`,
		`ctxtier_requests_total{code="OK",op="get",proto="http"} 1`,
		`ctxtier_requests_total{code="Unavailable",op="readyz",proto="http"} 1`,
		`ctxtier_payload_bytes_total{dir="in",proto="http"} 3`,
		`ctxtier_payload_bytes_total{dir="out",proto="http"} 3`,
		`ctxtier_block_ops_total{code="OK",op="put",proto="http"} 1`,
	} {
		if st != 200 || !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestSharedMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg) // as the native surface would
	cat, _ := ctxstore.OpenFileCatalog("")
	st, _ := ctxstore.New(ctxstore.DefaultConfig(), cat, syncTier{blocktest.New()}, nil)
	s := New(DefaultConfig(), st, reg, slog.New(slog.NewTextHandler(io.Discard, nil)), WithMetrics(m))
	if s.metrics != m {
		t.Fatal("WithMetrics ignored")
	}
}

func TestMount(t *testing.T) {
	e := newEnv(t, nil)
	e.srv.Mount("POST /v1/route", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("routed")) }))
	if st, _, body := e.do("POST", "/v1/route", nil, nil); st != 200 || string(body) != "routed" {
		t.Fatalf("mounted: %d %q", st, body)
	}
	for _, p := range []string{"GET /admin", "/metrics2", "GET /v1"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Mount(%q) did not panic", p)
				}
			}()
			e.srv.Mount(p, http.NotFoundHandler())
		}()
	}
}

// TestMountPage: a page mounted outside /v1/ is served without the block
// API's credentials, and patterns under /v1/ or without a leading slash panic.
func TestMountPage(t *testing.T) {
	keys := credential.Static{}
	e := newEnv(t, nil, WithAuth(keys, nil))
	e.srv.MountPage("GET /ui/", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("page")) }))
	if st, _, body := e.do("GET", "/ui/", nil, nil); st != 200 || string(body) != "page" {
		t.Fatalf("mounted page: %d %q", st, body)
	}
	if st, _, _ := e.do("GET", "/v1/namespaces", nil, nil); st != http.StatusUnauthorized {
		t.Fatalf("block API without credentials: %d, want 401", st)
	}
	for _, p := range []string{"GET /v1/ui/", "/v1/x", "GET ui/"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("MountPage(%q) did not panic", p)
				}
			}()
			e.srv.MountPage(p, http.NotFoundHandler())
		}()
	}
}

func TestServeShutdown(t *testing.T) {
	cat, _ := ctxstore.OpenFileCatalog("")
	st, _ := ctxstore.New(ctxstore.DefaultConfig(), cat, syncTier{blocktest.New()}, nil)
	cfg := DefaultConfig()
	cfg.ShutdownTimeout = time.Second
	s := New(cfg, st, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	if resp, err := http.Get("http://" + ln.Addr().String() + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatal("still serving after shutdown")
	}
}

func TestMethodNotAllowed(t *testing.T) {
	e := newEnv(t, nil)
	if st, _, _ := e.do("PATCH", "/v1/namespaces/default/blocks/"+h1, nil, nil); st != http.StatusMethodNotAllowed {
		t.Fatalf("PATCH: %d", st)
	}
}

// TestShutdownWaitsForAStuckGet: a GET whose client stops reading keeps its
// handler (and, on ctxd, its DRAM lease) in a blocked write. Shutdown gives
// up the graceful stop at its deadline, closes the connection, and returns
// only once the handler has returned.
func TestShutdownWaitsForAStuckGet(t *testing.T) {
	cat, _ := ctxstore.OpenFileCatalog("")
	st, _ := ctxstore.New(ctxstore.DefaultConfig(), cat, syncTier{blocktest.New()}, nil)
	s := New(DefaultConfig(), st, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(context.Background(), ln)
	data := make([]byte, 32<<20) // more than the socket buffers hold
	key := block.NewKey(block.DefaultNamespace, 0x51)
	if err := st.Put(context.Background(), key, data, block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := fmt.Fprintf(c, "GET /v1/namespaces/default/blocks/%016x HTTP/1.1\r\nHost: x\r\n\r\n", key.Hash); err != nil {
		t.Fatal(err)
	}
	// The client never reads: wait until the handler is blocked writing.
	deadline := time.Now().Add(30 * time.Second)
	for s.drain.Running() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the GET's handler never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if s.drain.Running() != 1 {
		t.Fatalf("%d handlers running, want the stuck GET's", s.drain.Running())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want the graceful stop's deadline", err)
	}
	if n := s.drain.Running(); n != 0 {
		t.Fatalf("Shutdown returned with %d handlers still running", n)
	}
}
