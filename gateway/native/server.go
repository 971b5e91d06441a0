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
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/gateway/metrics"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
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
	// readerCtx is base marked block.WithReaderVerify: the context of the
	// GETs of a connection whose client verifies every block itself
	// (wire.HelloVerifiesGets), so the DRAM tier skips its own pass.
	readerCtx context.Context

	mu       sync.Mutex
	lns      map[net.Listener]struct{}
	conns    map[*conn]struct{}
	shutdown bool
	connWG   sync.WaitGroup
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
		limits: cfg.limits(), base: base, cancel: cancel, readerCtx: block.WithReaderVerify(base),
		lns: map[net.Listener]struct{}{}, conns: map[*conn]struct{}{},
	}
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
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	defer func() {
		s.mu.Lock()
		delete(s.lns, ln)
		s.mu.Unlock()
		ln.Close()
	}()
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			down := s.shutdown
			s.mu.Unlock()
			if down {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Anything else (out of descriptors, an aborted handshake) is
			// transient: back off and keep serving.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed; retrying", "err", err, "delay", delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		c := s.newConn(nc)
		s.mu.Lock()
		if s.shutdown {
			s.mu.Unlock()
			nc.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.connWG.Add(1)
		s.mu.Unlock()
		go c.serve()
	}
}

// Shutdown stops accepting, stops reading new requests, lets every request
// already read finish and its response be written, then closes the
// connections. If ctx ends first the remaining connections are closed hard
// and ctx.Err() is returned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.shutdown = true
	for ln := range s.lns {
		ln.Close()
	}
	for c := range s.conns {
		c.stopReading()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.connWG.Wait(); close(done) }()
	select {
	case <-done:
		s.cancel()
		return nil
	case <-ctx.Done():
		s.Close()
		<-done
		return ctx.Err()
	}
}

// Close stops the server at once: listeners and connections are closed and
// in-flight store calls see a canceled context.
func (s *Server) Close() error {
	s.mu.Lock()
	s.shutdown = true
	for ln := range s.lns {
		ln.Close()
	}
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.cancel()
	return nil
}

func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.connWG.Done()
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
