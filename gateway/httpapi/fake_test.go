package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// fakeTier is an in-memory ctxstore.Tier that counts outstanding leases, so
// tests can check every Ref the server took was released.
type fakeTier struct {
	mu     sync.Mutex
	blocks map[block.Key]*fakeBlock
	leases atomic.Int64
	// retains are the read retain windows Get and Retain saw, by key.
	retains map[block.Key]time.Duration
	// readerMarks are block.ReaderVerifies of each Get's context, in order.
	readerMarks []bool
}

type fakeBlock struct {
	data  []byte
	sum   uint32
	prio  uint8
	pin   time.Time
	added time.Time
	opts  block.PutOptions
}

func newFakeTier() *fakeTier { return &fakeTier{blocks: map[block.Key]*fakeBlock{}} }

func (f *fakeTier) Put(_ context.Context, key block.Key, data []byte, sum uint32, opts block.PutOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.blocks[key]; ok {
		if !bytes.Equal(b.data, data) {
			return fmt.Errorf("%w: %s", block.ErrConflict, key)
		}
		return nil
	}
	b := &fakeBlock{data: bytes.Clone(data), sum: sum, prio: opts.Priority, added: time.Now(), opts: opts}
	if opts.PinTTL > 0 {
		b.pin = time.Now().Add(opts.PinTTL)
	}
	f.blocks[key] = b
	return nil
}

func (f *fakeTier) Get(_ context.Context, key block.Key, opts block.GetOptions) (*block.Ref, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d := opts.Retain; d > 0 {
		f.noteRetainLocked(key, d)
	}
	f.readerMarks = append(f.readerMarks, opts.ReaderVerifies)
	b, ok := f.blocks[key]
	if !ok {
		return nil, fmt.Errorf("%w: %s", block.ErrNotFound, key)
	}
	f.leases.Add(1)
	return block.NewRef(b.data, b.sum, block.TierDRAM, func() { f.leases.Add(-1) }), nil
}

func (f *fakeTier) Stat(_ context.Context, key block.Key) (block.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.blocks[key]
	if !ok {
		return block.Info{}, fmt.Errorf("%w: %s", block.ErrNotFound, key)
	}
	return block.Info{Key: key, Size: int64(len(b.data)), Sum: b.sum, Tier: block.TierDRAM, Priority: b.prio, Created: b.added, PinnedUntil: b.pin}, nil
}

func (f *fakeTier) Contains(key block.Key) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.blocks[key]
	return ok
}

func (f *fakeTier) Delete(_ context.Context, key block.Key) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.blocks[key]; !ok {
		return fmt.Errorf("%w: %s", block.ErrNotFound, key)
	}
	delete(f.blocks, key)
	return nil
}

func (f *fakeTier) Pin(_ context.Context, key block.Key, until time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.blocks[key]
	if !ok {
		return fmt.Errorf("%w: %s", block.ErrNotFound, key)
	}
	if until.After(b.pin) {
		b.pin = until
	}
	return nil
}

// takeReaderMarks returns the reader marks Get saw and forgets them.
func (f *fakeTier) takeReaderMarks() []bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.readerMarks
	f.readerMarks = nil
	return m
}

func (f *fakeTier) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.blocks)
}

func (f *fakeTier) data(k block.Key) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.blocks[k]; ok {
		return b.data
	}
	return nil
}

// env is a server over a fake tier, served by httptest.
type env struct {
	t    testing.TB
	tier *fakeTier
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
	tier := newFakeTier()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := ctxstore.New(ctxstore.DefaultConfig(), cat, tier, log)
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
	s := New(cfg, st, reg, log, opts...)
	ts := httptest.NewServer(s.Handler())
	e := &env{t: t, tier: tier, srv: s, ts: ts, reg: reg}
	t.Cleanup(func() {
		ts.Close()
		if n := tier.leases.Load(); n != 0 {
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

func (f *fakeTier) List(_ context.Context, ns, prefix, after string, limit int) ([]block.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []block.Info
	for k, b := range f.blocks {
		if n := k.ObjectName(); k.Namespace == ns && n > after && strings.HasPrefix(n, prefix) {
			out = append(out, block.Info{Key: k, Size: int64(len(b.data)), Sum: b.sum, Tier: block.TierDRAM})
		}
	}
	slices.SortFunc(out, func(a, b block.Info) int { return strings.Compare(a.Key.ObjectName(), b.Key.ObjectName()) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (f *fakeTier) opts(k block.Key) block.PutOptions {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.blocks[k]; ok {
		return b.opts
	}
	return block.PutOptions{}
}

func (f *fakeTier) noteRetainLocked(k block.Key, d time.Duration) {
	if f.retains == nil {
		f.retains = map[block.Key]time.Duration{}
	}
	f.retains[k] = d
}

// Retain records a lookup's read retain window (ctxstore.Retainer).
func (f *fakeTier) Retain(k block.Key, d time.Duration) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.noteRetainLocked(k, d)
	_, ok := f.blocks[k]
	return ok
}

// takeRetains returns and forgets the recorded read retain windows.
func (f *fakeTier) takeRetains() map[block.Key]time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.retains
	f.retains = nil
	return r
}

// ReleaseSession counts the blocks of ns put with session and forgets
// their session (block.SessionReleaser).
func (f *fakeTier) ReleaseSession(_ context.Context, ns string, session uint64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for k, b := range f.blocks {
		if k.Namespace == ns && b.opts.Session == session {
			b.opts.Session = 0
			n++
		}
	}
	return n, nil
}
