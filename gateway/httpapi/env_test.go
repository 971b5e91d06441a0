package httpapi

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block/blocktest"
)

// env is a server over an in-memory tier, served by httptest.
type env struct {
	t    testing.TB
	tier *blocktest.Tier
	srv  *Server
	ts   *httptest.Server
	reg  *prometheus.Registry
}

func newEnv(t testing.TB, mod func(*Config), opts ...Option) *env {
	t.Helper()
	cat, err := ctxstore.OpenFileCatalog("")
	if err != nil {
		t.Fatal(err)
	}
	tier := blocktest.New()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// The store runs over the tier made a ctxstore.ReadSyncer, as a cluster
	// backend is (readlevel_test.go).
	store, err := ctxstore.New(ctxstore.DefaultConfig(), cat, syncTier{tier}, log)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.MaxBlockSize = 1 << 20
	if mod != nil {
		mod(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	s := New(cfg, store, reg, log, opts...)
	ts := httptest.NewServer(s.Handler())
	e := &env{t: t, tier: tier, srv: s, ts: ts, reg: reg}
	t.Cleanup(func() {
		ts.Close()
		if n := tier.OpenLeases(); n != 0 {
			t.Errorf("%d block leases never released", n)
		}
	})
	return e
}

// do sends a request and returns status, headers and body.
func (e *env) do(method, path string, hdr map[string]string, body io.Reader) (int, http.Header, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.ts.URL+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func (e *env) put(hash string, data []byte, hdr map[string]string) (int, []byte) {
	e.t.Helper()
	st, _, b := e.do("PUT", "/v1/namespaces/default/blocks/"+hash, hdr, bytes.NewReader(data))
	return st, b
}

// wantError checks a JSON error response's status and code.
func wantError(t *testing.T, status int, hdr http.Header, body []byte, wantStatus int, wantCode string) {
	t.Helper()
	if status != wantStatus {
		t.Fatalf("status %d, want %d (body %s)", status, wantStatus, body)
	}
	if got := hdr.Get("X-Ctxtier-Error-Code"); got != wantCode {
		t.Fatalf("error code header %q, want %q (body %s)", got, wantCode, body)
	}
	if len(body) > 0 && !strings.Contains(string(body), `"code":"`+wantCode+`"`) {
		t.Fatalf("body %s lacks code %s", body, wantCode)
	}
}
