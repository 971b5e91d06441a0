package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/httpapi"
	"github.com/ctxtier/ctxtier/tiers/dram"
)

type httpTestEnv struct {
	c     *HTTPClient
	ts    *httptest.Server
	conns atomic.Int64
	// corrupt flips a byte of every block body the server sends.
	corrupt atomic.Bool
}

func newHTTPTestEnv(t *testing.T, mods ...func(*dram.Config)) *httpTestEnv {
	t.Helper()
	cat, err := ctxstore.OpenFileCatalog("")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dcfg := dram.DefaultConfig()
	dcfg.Capacity = 64 << 20
	for _, m := range mods {
		m(&dcfg)
	}
	tier, err := dram.New(dcfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tier.Close() })
	st, err := ctxstore.New(ctxstore.DefaultConfig(), cat, tier, log)
	if err != nil {
		t.Fatal(err)
	}
	cfg := httpapi.DefaultConfig()
	cfg.MaxBlockSize = 1 << 20
	cfg.MaxBatchItems = 16
	srv := httpapi.New(cfg, st, nil, log)
	e := &httpTestEnv{}
	h := srv.Handler()
	e.ts = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e.corrupt.Load() && r.Method == http.MethodGet || e.corrupt.Load() && strings.HasSuffix(r.URL.Path, "/batch/get") {
			h.ServeHTTP(&httpFlipWriter{ResponseWriter: w, marker: []byte("payload")}, r)
			return
		}
		h.ServeHTTP(w, r)
	}))
	e.ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			e.conns.Add(1)
		}
	}
	e.ts.Start()
	ccfg := HTTPDefaultConfig()
	ccfg.BaseURL = e.ts.URL
	e.c, err = NewHTTP(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.c.Close()
		e.ts.Close()
	})
	return e
}

// httpFlipWriter corrupts the first occurrence of marker in the body, as a
// faulty network or proxy would, keeping the headers (and checksum) intact.
type httpFlipWriter struct {
	http.ResponseWriter
	marker []byte
}

func (f *httpFlipWriter) Write(p []byte) (int, error) {
	if i := bytes.Index(p, f.marker); i >= 0 {
		q := bytes.Clone(p)
		q[i] ^= 0x20
		return f.ResponseWriter.Write(q)
	}
	return f.ResponseWriter.Write(p)
}

func key(h uint64) block.Key { return block.NewKey("default", h) }

func TestHTTPClientBlocks(t *testing.T) {
	e := newHTTPTestEnv(t)
	ctx := context.Background()
	c := e.c
	data := []byte("payload of block one")
	if err := c.Put(ctx, key(1), data, block.PutOptions{PinTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(ctx, key(1), data, block.PutOptions{}); err != nil {
		t.Fatalf("idempotent re-put: %v", err)
	}
	got, err := c.Get(ctx, key(1))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get: %q %v", got, err)
	}
	buf := make([]byte, 64)
	n, err := c.GetInto(ctx, key(1), buf)
	if err != nil || !bytes.Equal(buf[:n], data) {
		t.Fatalf("GetInto: %q %v", buf[:n], err)
	}
	info, err := c.Stat(ctx, key(1))
	if err != nil || info.Size != int64(len(data)) || info.Sum != block.Checksum(data) || info.Tier != block.TierDRAM {
		t.Fatalf("Stat: %+v %v", info, err)
	}
	if err := c.Pin(ctx, key(1), time.Hour); err != nil {
		t.Fatal(err)
	}
	if info, _ := c.Stat(ctx, key(1)); time.Until(info.PinnedUntil) < 50*time.Minute {
		t.Fatalf("pin not visible: %v", info.PinnedUntil)
	}
	if err := c.Delete(ctx, key(1)); err != nil {
		t.Fatal(err)
	}
	if err := c.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v", err)
	}
}

func TestHTTPClientErrors(t *testing.T) {
	e := newHTTPTestEnv(t)
	ctx := context.Background()
	c := e.c
	if err := c.Put(ctx, key(1), []byte("original"), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"get missing", func() error { _, err := c.Get(ctx, key(2)); return err }(), block.ErrNotFound},
		{"stat missing (HEAD)", func() error { _, err := c.Stat(ctx, key(2)); return err }(), block.ErrNotFound},
		{"delete missing", c.Delete(ctx, key(2)), block.ErrNotFound},
		{"pin missing", c.Pin(ctx, key(2), time.Minute), block.ErrNotFound},
		{"conflict", c.Put(ctx, key(1), []byte("changed"), block.PutOptions{}), block.ErrConflict},
		{"bad checksum", c.Put(ctx, key(3), []byte("x"), block.PutOptions{Sum: 7, HasSum: true}), block.ErrChecksum},
		{"unknown namespace", c.Put(ctx, block.NewKey("nope", 1), []byte("x"), block.PutOptions{}), block.ErrUnknownNamespace},
		{"too large", c.Put(ctx, key(4), make([]byte, 1<<20+1), block.PutOptions{}), block.ErrTooLarge},
		{"empty", c.Put(ctx, key(4), nil, block.PutOptions{}), block.ErrInvalidArgument},
		{"short buffer", func() error { _, err := c.GetInto(ctx, key(1), make([]byte, 3)); return err }(), io.ErrShortBuffer},
		{"pin ttl", c.Pin(ctx, key(1), 0), block.ErrInvalidArgument},
		{"token lookup shorter than a block", func() error { _, err := c.LookupTokens(ctx, "default", []uint32{1}); return err }(), nil},
		{"mixed namespaces", func() error { _, err := c.ExistsBatch(ctx, []block.Key{key(1), block.NewKey("x", 1)}); return err }(), block.ErrInvalidArgument},
	}
	for _, tc := range tests {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if got, _ := c.Get(ctx, key(1)); string(got) != "original" {
		t.Fatalf("original changed: %q", got)
	}
	// Server down: Unavailable.
	cfg := HTTPDefaultConfig()
	cfg.BaseURL = "http://127.0.0.1:1"
	dead, _ := NewHTTP(cfg)
	if _, err := dead.Get(ctx, key(1)); !errors.Is(err, block.ErrUnavailable) {
		t.Errorf("dead server: %v", err)
	}
	// Canceled context.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Get(cctx, key(1)); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
}

func TestHTTPClientVerifiesChecksum(t *testing.T) {
	e := newHTTPTestEnv(t)
	ctx := context.Background()
	data := []byte("the payload that a faulty hop corrupts")
	if err := e.c.Put(ctx, key(1), data, block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	e.corrupt.Store(true)
	if _, err := e.c.Get(ctx, key(1)); !errors.Is(err, block.ErrChecksum) {
		t.Fatalf("Get of corrupted body: %v", err)
	}
	if _, err := e.c.GetInto(ctx, key(1), make([]byte, 100)); !errors.Is(err, block.ErrChecksum) {
		t.Fatalf("GetInto of corrupted body: %v", err)
	}
	out, errs, err := e.c.GetBatch(ctx, []block.Key{key(1)})
	if err != nil || !errors.Is(errs[0], block.ErrChecksum) || out[0] != nil {
		t.Fatalf("GetBatch of corrupted part: %v %v", errs, err)
	}
}

func TestHTTPClientLookupAndBatches(t *testing.T) {
	e := newHTTPTestEnv(t)
	ctx := context.Background()
	c := e.c
	items := []HTTPPutItem{
		{Key: key(1), Data: []byte("one")},
		{Key: key(2), Data: []byte("two"), Opts: block.PutOptions{Priority: 2, HasPriority: true}},
		{Key: key(3).WithPart(1), Data: []byte("three")},
		{Key: key(4), Data: []byte("four"), Opts: block.PutOptions{Sum: 1, HasSum: true}},
	}
	errs, err := c.PutBatch(ctx, items)
	if err != nil || errs[0] != nil || errs[1] != nil || errs[2] != nil || !errors.Is(errs[3], block.ErrChecksum) {
		t.Fatalf("PutBatch: %v %v", errs, err)
	}
	n, err := c.Lookup(ctx, []block.Key{key(1), key(2), key(4), key(3).WithPart(1)})
	if err != nil || n != 2 {
		t.Fatalf("Lookup: %d %v", n, err)
	}
	ex, err := c.ExistsBatch(ctx, []block.Key{key(1), key(4), key(3).WithPart(1)})
	if err != nil || fmt.Sprint(ex) != "[true false true]" {
		t.Fatalf("ExistsBatch: %v %v", ex, err)
	}
	data, gerrs, err := c.GetBatch(ctx, []block.Key{key(2), key(4), key(3).WithPart(1)})
	if err != nil || string(data[0]) != "two" || !errors.Is(gerrs[1], block.ErrNotFound) || string(data[2]) != "three" {
		t.Fatalf("GetBatch: %q %v %v", data, gerrs, err)
	}
	derrs, err := c.DeleteBatch(ctx, []block.Key{key(1), key(4)})
	if err != nil || derrs[0] != nil || !errors.Is(derrs[1], block.ErrNotFound) {
		t.Fatalf("DeleteBatch: %v %v", derrs, err)
	}
	// Whole-request failures: too many items, nothing stored.
	many := make([]HTTPPutItem, 17)
	for i := range many {
		many[i] = HTTPPutItem{Key: key(uint64(100 + i)), Data: []byte("x")}
	}
	if _, err := c.PutBatch(ctx, many); !errors.Is(err, block.ErrTooLarge) {
		t.Fatalf("too many: %v", err)
	}
	if ex, _ := c.ExistsBatch(ctx, []block.Key{key(100)}); ex[0] {
		t.Fatal("rejected batch stored a block")
	}
	// Empty batches need no request.
	if ex, err := c.ExistsBatch(ctx, nil); err != nil || len(ex) != 0 {
		t.Fatalf("empty: %v %v", ex, err)
	}
}

func TestHTTPClientNamespaces(t *testing.T) {
	e := newHTTPTestEnv(t)
	ctx := context.Background()
	ns := block.Namespace{Name: "qwen", Model: "qwen2", BlockTokens: 64, TenantSalt: "salt"}
	got, err := e.c.CreateNamespace(ctx, ns)
	if err != nil || got.Name != "qwen" || got.BlockTokens != 64 || got.TenantSalt != "" || got.HashScheme != block.SchemeDynamo {
		t.Fatalf("CreateNamespace: %+v %v", got, err)
	}
	if _, err := e.c.CreateNamespace(ctx, ns); err != nil {
		t.Fatalf("idempotent create: %v", err)
	}
	ns.BlockTokens = 32
	if _, err := e.c.CreateNamespace(ctx, ns); !errors.Is(err, block.ErrNamespaceExists) {
		t.Fatalf("conflicting create: %v", err)
	}
	list, err := e.c.ListNamespaces(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("ListNamespaces: %v %v", list, err)
	}
	if _, err := e.c.Namespace(ctx, "nope"); !errors.Is(err, block.ErrUnknownNamespace) {
		t.Fatalf("Namespace(nope): %v", err)
	}
}

// TestHTTPClientPooling checks that concurrent callers reuse kept-alive
// connections instead of dialing per request.
func TestHTTPClientPooling(t *testing.T) {
	e := newHTTPTestEnv(t)
	ctx := context.Background()
	const workers, each = 8, 40
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				k := key(uint64(w*1000 + i))
				d := []byte(fmt.Sprintf("block %d/%d", w, i))
				if err := e.c.Put(ctx, k, d, block.PutOptions{}); err != nil {
					errc <- err
					return
				}
				if got, err := e.c.Get(ctx, k); err != nil || !bytes.Equal(got, d) {
					errc <- fmt.Errorf("get %s: %q %v", k, got, err)
					return
				}
				if _, err := e.c.Get(ctx, key(999999)); !errors.Is(err, block.ErrNotFound) {
					errc <- fmt.Errorf("missing: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	// The transport may dial one spare while a request waits for a busy
	// connection, so allow up to twice the workers; no reuse would be 960.
	if n := e.conns.Load(); n > 2*workers {
		t.Fatalf("%d connections for %d workers x %d requests: pool not reused", n, workers, 3*each)
	}
}

func TestHTTPConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*HTTPConfig)
		ok   bool
	}{
		{"default", func(*HTTPConfig) {}, true},
		{"https", func(c *HTTPConfig) { c.BaseURL = "https://ctxd:8443/" }, true},
		{"no scheme", func(c *HTTPConfig) { c.BaseURL = "ctxd:8080" }, false},
		{"ftp", func(c *HTTPConfig) { c.BaseURL = "ftp://x" }, false},
		{"no pool", func(c *HTTPConfig) { c.MaxIdleConnsPerHost = 0 }, false},
		{"tiny buffer", func(c *HTTPConfig) { c.BufferSize = 10 }, false},
		{"negative timeout", func(c *HTTPConfig) { c.DialTimeout = -1 }, false},
	}
	for _, tc := range tests {
		c := HTTPDefaultConfig()
		tc.mod(&c)
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

// TestHTTPClientDialContext checks that a configured DialContext opens the
// client's connections: the client's base URL names a host that does not
// resolve, and the dialer sends every connection to the test server.
func TestHTTPClientDialContext(t *testing.T) {
	e := newHTTPTestEnv(t)
	var dials atomic.Int64
	var asked atomic.Value
	cfg := HTTPDefaultConfig()
	cfg.BaseURL = "http://node-in-a-namespace.invalid:7401"
	cfg.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		asked.Store(addr)
		return (&net.Dialer{}).DialContext(ctx, network, e.ts.Listener.Addr().String())
	}
	c, err := NewHTTP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("through the custom dialer")
	if err := c.Put(context.Background(), key(7), data, block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(context.Background(), key(7))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get: %q %v", got, err)
	}
	if dials.Load() == 0 || asked.Load() != "node-in-a-namespace.invalid:7401" {
		t.Fatalf("custom dialer: %d dials, last for %v", dials.Load(), asked.Load())
	}
}
