// Package httpapi is ctxd's HTTP/1.1 API: block put/get/head/delete/pin
// with raw bodies, prefix lookup, batch endpoints (JSON and multipart/mixed),
// namespace management, /metrics, /healthz and /readyz, all over a
// *ctxstore.Store. Wire details (headers, JSON bodies, batch framing) live in
// the httpwire subpackage, shared with the Go client; docs/api.md is the
// reference with curl examples.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/metrics"
	"github.com/ctxtier/ctxtier/gateway/s3auth"
	"github.com/ctxtier/ctxtier/internal/httpdrain"
	"github.com/ctxtier/ctxtier/internal/membudget"
)

// proto is the protocol label of this surface's metrics.
const proto = "http"

// Config configures the HTTP server.
type Config struct {
	// Addr is the listen address (used by cmd/ctxd; Serve takes a listener).
	Addr string
	// MaxBlockSize caps one block's body on top of each namespace's
	// max_block_size: the smaller of the two applies.
	MaxBlockSize int64
	// MaxBatchItems bounds the items of one batch request.
	MaxBatchItems int
	// MaxBatchBytes bounds the block bytes of one batch put or batch get.
	MaxBatchBytes int64
	// MaxLookupBlocks bounds the blocks of one lookup (hashes, or tokens
	// divided by block_tokens).
	MaxLookupBlocks int
	// MaxJSONBytes bounds a JSON request body.
	MaxJSONBytes int64
	// MaxHeaderBytes bounds request headers.
	MaxHeaderBytes int
	// ReadHeaderTimeout bounds reading request headers (slow clients).
	ReadHeaderTimeout time.Duration
	// ReadTimeout and WriteTimeout bound a whole request and response; 0 is
	// no limit. They must allow the largest body at the slowest client.
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	// IdleTimeout closes idle keep-alive connections.
	IdleTimeout time.Duration
	// ShutdownTimeout bounds the graceful drain when Serve's context ends.
	ShutdownTimeout time.Duration
}

// DefaultConfig returns the defaults: 64 MiB blocks, batches of up to 1024
// items and 256 MiB, lookups of up to 65536 blocks, 16 MiB JSON bodies.
func DefaultConfig() Config {
	return Config{
		Addr:              ":8080",
		MaxBlockSize:      block.DefaultMaxBlockSize,
		MaxBatchItems:     1024,
		MaxBatchBytes:     256 << 20,
		MaxLookupBlocks:   1 << 16,
		MaxJSONBytes:      16 << 20,
		MaxHeaderBytes:    64 << 10,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       5 * time.Minute,
		WriteTimeout:      5 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		ShutdownTimeout:   10 * time.Second,
	}
}

// Validate checks the configuration; errors wrap block.ErrInvalidArgument.
func (c Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: httpapi: %s", block.ErrInvalidArgument, fmt.Sprintf(format, a...))
	}
	switch {
	case c.MaxBlockSize < block.MinBlockSize || c.MaxBlockSize > block.HardMaxBlockSize:
		return bad("MaxBlockSize %d out of range 1..%d", c.MaxBlockSize, block.HardMaxBlockSize)
	case c.MaxBatchItems < 1:
		return bad("MaxBatchItems %d must be positive", c.MaxBatchItems)
	case c.MaxBatchBytes < 1:
		return bad("MaxBatchBytes %d must be positive", c.MaxBatchBytes)
	case c.MaxLookupBlocks < 1:
		return bad("MaxLookupBlocks %d must be positive", c.MaxLookupBlocks)
	case c.MaxJSONBytes < 1024:
		return bad("MaxJSONBytes %d must be at least 1024", c.MaxJSONBytes)
	case c.MaxHeaderBytes < 4096:
		return bad("MaxHeaderBytes %d must be at least 4096", c.MaxHeaderBytes)
	case c.ReadHeaderTimeout <= 0:
		return bad("ReadHeaderTimeout must be positive")
	case c.ReadTimeout < 0 || c.WriteTimeout < 0 || c.IdleTimeout < 0 || c.ShutdownTimeout < 0:
		return bad("timeouts must not be negative")
	}
	return nil
}

// Option adjusts a Server at construction.
type Option func(*Server)

// WithMetrics makes the server record into m instead of registering its own
// request metrics on the registry; use it when another surface (the native
// protocol) already registered gateway/metrics on the same registry.
func WithMetrics(m *metrics.Metrics) Option { return func(s *Server) { s.metrics = m } }

// WithReady sets the readiness check behind /readyz: nil error is ready. The
// default reports ready whenever the process serves.
func WithReady(ready func() error) Option { return func(s *Server) { s.ready = ready } }

// WithBudget makes every block PUT wait for its body's bytes in b, the
// node's in-flight budget shared with its other surfaces, before it reads
// the body (a body of unknown length takes the block limit). nil: no bound.
func WithBudget(b *membudget.Budget) Option { return func(s *Server) { s.budget = b } }

// WithGatherers adds gatherers /metrics serves beside the registry: metrics
// kept out of the registry so that readers of the registry alone (the
// console's sampler) do not pay for them, such as ctxd's per-namespace
// series.
func WithGatherers(g ...prometheus.Gatherer) Option {
	return func(s *Server) { s.gatherers = append(s.gatherers, g...) }
}

// WithUsage reports this node's bytes per tier per namespace in
// GET /v1/namespaces/{ns} and PUT /v1/namespaces/{ns}/quota answers.
func WithUsage(usage func() map[block.Tier]map[string]int64) Option {
	return func(s *Server) { s.usage = usage }
}

// Server serves the HTTP API over a store.
type Server struct {
	cfg     Config
	store   *ctxstore.Store
	log     *slog.Logger
	reg     *prometheus.Registry
	metrics *metrics.Metrics
	ready   func() error
	mux     *http.ServeMux
	srv     *http.Server
	// drain counts the handlers in flight, for Shutdown.
	drain httpdrain.Tracker
	// keys and sigv4 authenticate requests (WithAuth); nil keys: off.
	keys  credential.Lookuper
	sigv4 *s3auth.Verifier
	// budget bounds the block bodies read into memory (WithBudget).
	budget *membudget.Budget
	// gatherers are served on /metrics beside reg (WithGatherers).
	gatherers []prometheus.Gatherer
	// usage reports this node's bytes per tier per namespace (WithUsage).
	usage func() map[block.Tier]map[string]int64
}

// New builds a server. cfg must be valid (see Validate); reg is the private
// registry /metrics exposes and, unless WithMetrics is given, where the
// request metrics are registered (a nil reg gets a fresh one).
func New(cfg Config, store *ctxstore.Store, reg *prometheus.Registry, log *slog.Logger, opts ...Option) *Server {
	if log == nil {
		log = slog.Default()
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	s := &Server{cfg: cfg, store: store, log: log.With("component", "httpapi"), reg: reg, mux: http.NewServeMux()}
	for _, o := range opts {
		o(s)
	}
	if s.metrics == nil {
		s.metrics = metrics.New(reg)
	}
	s.routes()
	s.srv = &http.Server{
		Addr:              cfg.Addr,
		Handler:           s.drain.Wrap(s.mux),
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	return s
}

func (s *Server) routes() {
	const blk = "/v1/namespaces/{ns}/blocks/{hash}"
	s.handle("PUT "+blk, "put", s.putBlock)
	s.handleRead("GET "+blk, "get", s.getBlock)
	s.handleRead("HEAD "+blk, "head", s.headBlock)
	s.handle("DELETE "+blk, "delete", s.deleteBlock)
	s.handle("POST "+blk+"/pin", "pin", s.pinBlock)
	s.handleRead("POST /v1/namespaces/{ns}/lookup", "lookup", s.lookup)
	s.handleRead("POST /v1/namespaces/{ns}/batch/exists", "batch_exists", s.batchExists)
	s.handle("POST /v1/namespaces/{ns}/batch/delete", "batch_delete", s.batchDelete)
	s.handleRead("POST /v1/namespaces/{ns}/batch/get", "batch_get", s.batchGet)
	s.handle("POST /v1/namespaces/{ns}/batch/put", "batch_put", s.batchPut)
	s.handle("POST /v1/namespaces", "ns_create", s.createNamespace)
	s.handle("GET /v1/namespaces", "ns_list", s.listNamespaces)
	s.handle("GET /v1/namespaces/{ns}", "ns_get", s.getNamespace)
	s.handle("PUT /v1/namespaces/{ns}/quota", "ns_quota", s.setQuota)
	s.handle("POST /v1/namespaces/{ns}/sessions/{session}/end", "session_end", s.endSession)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(append(prometheus.Gatherers{s.reg}, s.gatherers...), promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}))
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	s.handle("GET /readyz", "readyz", s.readyz)
}

// Handler is the server's root handler (for tests and for embedding).
func (s *Server) Handler() http.Handler { return s.mux }

// Mount registers h for a Go 1.22 ServeMux pattern ("[METHOD ]/v1/..."),
// for surfaces the lead adds later (routing, KV events). The path must be
// under /v1/. With WithAuth, a mounted surface needs a key scoped to "*".
// Like http.ServeMux.Handle it panics on a bad or conflicting pattern; call
// it before Serve.
func (s *Server) Mount(pattern string, h http.Handler) {
	checkMount(pattern)
	s.mux.Handle(pattern, s.guardAll(h))
}

// MountOwnAuth is Mount for a surface that authenticates its callers
// itself, with credentials that are not access keys (the cluster API
// requires the cluster secret): WithAuth does not guard it.
func (s *Server) MountOwnAuth(pattern string, h http.Handler) {
	checkMount(pattern)
	s.mux.Handle(pattern, h)
}

func checkMount(pattern string) {
	path := pattern
	if i := strings.IndexByte(pattern, ' '); i >= 0 {
		path = strings.TrimLeft(pattern[i+1:], " \t")
	}
	if !strings.HasPrefix(path, "/v1/") {
		panic(fmt.Sprintf("httpapi: Mount(%q): path must be under /v1/", pattern))
	}
}

// MountPage registers h for a pattern outside /v1/ (the operator console
// under /ui/) without the block API's authentication: h decides itself
// what needs credentials. It panics on a pattern under /v1/ or one that
// conflicts; call it before Serve.
func (s *Server) MountPage(pattern string, h http.Handler) {
	path := pattern
	if i := strings.IndexByte(pattern, ' '); i >= 0 {
		path = strings.TrimLeft(pattern[i+1:], " \t")
	}
	if strings.HasPrefix(path, "/v1/") || !strings.HasPrefix(path, "/") {
		panic(fmt.Sprintf("httpapi: MountPage(%q): path must start with / and be outside /v1/", pattern))
	}
	s.mux.Handle(pattern, h)
}

// Serve serves on ln until ctx ends (then drains for up to
// Config.ShutdownTimeout) or Shutdown is called. It returns nil after a
// graceful stop.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.log.Info("http api serving", "addr", ln.Addr().String())
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
			defer cancel()
			if err := s.drain.Shutdown(sctx, s.srv, httpdrain.DefaultGrace); err != nil {
				s.log.Warn("http api shutdown", "err", err)
			}
		case <-done:
		}
	}()
	err := s.srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting connections and waits for in-flight requests
// until ctx ends; then it closes the connections and waits (up to
// httpdrain.DefaultGrace) for their handlers to return, so that none still
// holds a tier lease when the tiers close.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.drain.Shutdown(ctx, s.srv, httpdrain.DefaultGrace)
}

// handlerFunc serves one operation; a returned error becomes the JSON error
// response, unless the response was already started (errStarted).
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// errStarted wraps an error met after the response status was sent: it is
// counted and logged, but nothing more can be written.
type errStarted struct{ err error }

func (e errStarted) Error() string { return e.err.Error() }
func (e errStarted) Unwrap() error { return e.err }

// statusError overrides the HTTP status of an error (501 for missing features).
type statusError struct {
	status int
	err    error
}

func (e statusError) Error() string { return e.err.Error() }
func (e statusError) Unwrap() error { return e.err }

// handle routes an operation that reads no blocks (its read options, still
// checked, are dropped).
func (s *Server) handle(pattern, op string, h handlerFunc) {
	s.route(pattern, op, func(w http.ResponseWriter, r *http.Request, _ ctxstore.ReadOptions) error { return h(w, r) })
}

// handleRead routes an operation that reads blocks: h gets the request's
// read options (readOptions).
func (s *Server) handleRead(pattern, op string, h readHandlerFunc) { s.route(pattern, op, h) }

// route serves pattern: authentication, the path's namespace name and the
// read headers are checked before h runs; its error becomes the response.
func (s *Server) route(pattern, op string, h readHandlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		var err error
		if op == "readyz" {
			err = h(w, r, ctxstore.ReadOptions{})
		} else if ar, gerr := s.guard(r); gerr != nil {
			err = gerr
		} else if gerr = validPathNamespace(ar); gerr != nil {
			err = gerr
		} else if opts, gerr := readOptions(ar, op); gerr != nil {
			err = gerr
		} else {
			err = h(w, ar, opts)
		}
		code := errcode.Of(err)
		var started errStarted
		switch {
		case err == nil:
		case errors.As(err, &started) && clientGone(r, err):
			// The client closed the connection (or gave up) mid-body: its
			// own doing, not the server's; the request metric counts it.
			s.log.Debug("response aborted: client gone", "op", op, "path", r.URL.Path, "err", err)
		case errors.As(err, &started):
			s.log.Warn("response aborted", "op", op, "path", r.URL.Path, "err", err)
		default:
			s.writeError(w, r, err)
		}
		s.metrics.Request(proto, op, code, time.Since(start))
	})
}

// validPathNamespace refuses a namespace name in the path that no
// namespace could have (400 InvalidArgument, not 404 UnknownNamespace).
func validPathNamespace(r *http.Request) error {
	if ns := r.PathValue("ns"); ns != "" {
		return block.ValidNamespaceName(ns)
	}
	return nil
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := errcode.Of(err)
	status := code.HTTPStatus()
	var se statusError
	if errors.As(err, &se) {
		status = se.status
	}
	if code == errcode.Internal {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	} else {
		s.log.Debug("request failed", "method", r.Method, "path", r.URL.Path, "code", code.String(), "err", err)
	}
	if code == errcode.Unauthenticated {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ctxtier", AWS4-HMAC-SHA256`)
	}
	writeErrorBody(w, r.Method, status, code, err.Error())
}

func writeErrorBody(w http.ResponseWriter, method string, status int, code errcode.Code, msg string) {
	h := w.Header()
	for _, k := range []string{"Content-Length", "Content-Range", "ETag", "Last-Modified"} {
		h.Del(k)
	}
	h.Set("Content-Type", jsonType)
	h.Set(headerErrorCode, code.String())
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	if method != http.MethodHead {
		_ = writeJSONBody(w, errorBody{Code: code.String(), Message: msg})
	}
}

// bodyErr classifies an error of reading a request body: over its limit is
// block.ErrTooLarge, a short or broken body is block.ErrInvalidArgument.
func bodyErr(err error) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return fmt.Errorf("%w: request body over the limit of %d bytes", block.ErrTooLarge, mbe.Limit)
	case errors.Is(err, block.ErrTooLarge), errors.Is(err, block.ErrInvalidArgument), errors.Is(err, block.ErrInvalidKey),
		errors.Is(err, block.ErrChecksum): // a body that does not match its signed SHA-256
		return err
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	default:
		return fmt.Errorf("%w: reading request body: %v", block.ErrInvalidArgument, err)
	}
}

// clientGone reports whether err, met while a response body was being
// written, means the client went away: its request context ended, or the
// connection was reset or closed under the write.
func clientGone(r *http.Request, err error) bool {
	return r.Context().Err() != nil || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed)
}
