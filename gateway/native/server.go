// Package native serves ctxtier's native block protocol over TCP: a
// versioned handshake, then length-prefixed, pipelined, batched request
// frames answered in order on the same connection. Block bytes go from the
// tier's memory to the socket with one writev per response (no copy), and
// put payloads are read straight into pooled buffers and checked against
// their CRC-32C before the store sees them. With WithRouter it also answers
// the KV-aware router's query (ROUTE). The codec is gateway/native/wire;
// the specification is docs/protocol.md.
package native

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/gateway/metrics"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
	"github.com/ctxtier/ctxtier/internal/listener"
	"github.com/ctxtier/ctxtier/internal/membudget"
)

// Proto is the metrics label of this protocol.
const Proto = "native"

// Server serves one Store over the native protocol.
type Server struct {
	cfg    Config
	store  *ctxstore.Store
	met    *metrics.Metrics
	log    *slog.Logger
	limits wire.Limits
	bufs   bufPool
	// keys authenticates connections; nil when authentication is off.
	keys credential.Lookuper
	// router answers ROUTE; nil: ROUTE answers InvalidArgument.
	router Router
	// budget bounds the request bodies read into memory (WithBudget).
	budget *membudget.Budget

	// base is the context of store calls; canceled only by a hard Close, so
	// that Shutdown lets in-flight requests finish.
	base   context.Context
	cancel context.CancelFunc

	// conns accepts and tracks the connections.
	conns *listener.Set
}

// New builds a server. met and log may be nil.
func New(cfg Config, store *ctxstore.Store, met *metrics.Metrics, log *slog.Logger, opts ...Option) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if store == nil {
		return nil, fmt.Errorf("%w: native: nil store", block.ErrInvalidArgument)
	}
	if log == nil {
		log = slog.Default()
	}
	base, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg: cfg, store: store, met: met, log: log.With("proto", Proto),
		limits: cfg.limits(), base: base, cancel: cancel,
	}
	s.conns = listener.New(listener.Config{OnClose: cancel, Log: s.log})
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// Limits returns what the server announces in its handshake.
func (s *Server) Limits() wire.Limits { return s.limits }

// ListenAndServe listens on Config.Addr and serves until ctx ends or Shutdown.
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return err
	}
	return s.Serve(ctx, ln)
}

// Serve accepts connections on ln until Shutdown or Close (it then returns
// nil) or until ctx ends (it then closes the server hard and returns
// ctx.Err()). ln is closed on return.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	return s.conns.Serve(ctx, ln, func(nc net.Conn) listener.Conn { return s.newConn(nc) })
}

// Shutdown stops accepting, stops reading new requests, lets every request
// already read finish and its response be written, then closes the
// connections. If ctx ends first the remaining connections are closed hard
// and ctx.Err() is returned.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.conns.Shutdown(ctx)
	s.cancel()
	return err
}

// Close stops the server at once: listeners and connections are closed and
// in-flight store calls see a canceled context.
func (s *Server) Close() error {
	s.conns.Close()
	return nil
}

// bufPool recycles request-body buffers in power-of-two size classes, so a
// stream of 2 MiB puts reuses the same few buffers.
type bufPool struct {
	classes [32]sync.Pool
}

const minBufClass = 12 // 4 KiB

func bufClass(n int) int {
	c := minBufClass
	for (1 << c) < n {
		c++
	}
	return c
}

func (p *bufPool) get(n int) *[]byte {
	c := bufClass(n)
	if v, ok := p.classes[c].Get().(*[]byte); ok {
		*v = (*v)[:n]
		return v
	}
	b := make([]byte, n, 1<<c)
	return &b
}

func (p *bufPool) put(b *[]byte) {
	if b == nil {
		return
	}
	c := bufClass(cap(*b))
	if 1<<c != cap(*b) {
		return
	}
	p.classes[c].Put(b)
}
