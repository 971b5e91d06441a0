package resp

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/ctxstore/object"
	"github.com/ctxtier/ctxtier/gateway/metrics"
	"github.com/ctxtier/ctxtier/internal/listener"
	"github.com/ctxtier/ctxtier/internal/membudget"
)

// readLevel is the level of every read the RESP server makes: this node's
// own view (ctxstore.ReadLocal). RESP has no read-level option.
const readLevel = ctxstore.ReadLocal

// Proto is the metrics label of this protocol.
const Proto = "resp"

// Option adjusts a Server at construction.
type Option func(*Server)

// WithAuth makes the server require AUTH (or HELLO ... AUTH) with an access
// key id as the user name and its secret as the password before any other
// command, and confines each connection to the namespaces the key's scope
// allows. Without it every client may use every configured database.
func WithAuth(keys credential.Lookuper) Option { return func(s *Server) { s.keys = keys } }

// WithBudget reads the bytes of a request beyond what every connection may
// hold on its own (16 KiB of arguments) only once they are reserved from
// the node's in-flight budget shared with the other surfaces; until then the
// connection is not read. nil: no bound but the request limits.
func WithBudget(b *membudget.Budget) Option { return func(s *Server) { s.budget = b } }

// stats are the counters INFO reports.
type stats struct {
	connsTotal atomic.Int64
	commands   atomic.Int64
	hits       atomic.Int64
	misses     atomic.Int64
	rejected   atomic.Int64
	nextID     atomic.Int64
}

// Server serves an object store over RESP.
type Server struct {
	cfg     Config
	objects *object.Store
	met     *metrics.Metrics
	log     *slog.Logger
	keys    credential.Lookuper
	budget  *membudget.Budget
	pool    bufPool
	writers sync.Pool
	started time.Time
	stats   stats
	// obs records each command's requests (indexed by command.idx).
	obs []*metrics.Observer

	base   context.Context
	cancel context.CancelFunc

	// conns accepts and tracks the connections.
	conns *listener.Set
}

// New builds a server. met and log may be nil.
func New(cfg Config, objects *object.Store, met *metrics.Metrics, log *slog.Logger, opts ...Option) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if objects == nil {
		return nil, fmt.Errorf("%w: resp: nil object store", block.ErrInvalidArgument)
	}
	if log == nil {
		log = slog.Default()
	}
	base, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg: cfg, objects: objects, met: met, log: log.With("proto", Proto), started: time.Now(),
		base: base, cancel: cancel,
	}
	s.conns = listener.New(listener.Config{MaxConns: cfg.MaxConns, Reject: s.reject, OnClose: cancel, Log: s.log})
	for _, cmd := range commandList {
		s.obs = append(s.obs, met.Observer(Proto, cmd.name))
	}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

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

// reject answers a connection over Config.MaxConns in Redis's words.
func (s *Server) reject(nc net.Conn) {
	s.stats.rejected.Add(1)
	nc.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = nc.Write([]byte("-ERR max number of clients reached\r\n"))
}

// Shutdown stops accepting, lets each connection finish the request it is
// running and write its replies, then closes the connections. If ctx ends
// first the rest are closed hard and ctx.Err() is returned.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.conns.Shutdown(ctx)
	s.cancel()
	return err
}

// Close stops the server at once.
func (s *Server) Close() error {
	s.conns.Close()
	return nil
}

// Conns returns the number of open connections.
func (s *Server) Conns() int { return s.conns.Len() }
