// Package listener is the accept loop and connection set that ctxd's TCP
// servers (the native protocol, RESP) share: it accepts with a backoff on
// transient errors, optionally bounds the open connections, runs each
// connection in its own goroutine and tracks it, and implements graceful
// Shutdown (stop reading, let replies go out, then close) and hard Close.
package listener

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Conn is one served connection.
type Conn interface {
	// Serve runs the connection until it ends; the Set forgets the
	// connection when Serve returns.
	Serve()
	// StopReading asks the connection to read no further requests, to
	// answer those it has and then to return from Serve.
	StopReading()
}

// Config configures a Set.
type Config struct {
	// MaxConns bounds the open connections (0: no bound). A connection
	// accepted over it goes to Reject and is not served.
	MaxConns int
	// Reject answers and closes a connection over MaxConns; nil: it is
	// closed silently.
	Reject func(net.Conn)
	// OnClose runs at each Close (after the listeners and connections are
	// closed): the server's hook to cancel its in-flight work.
	OnClose func()
	// Log gets accept errors; nil: slog.Default.
	Log *slog.Logger
}

// Set accepts and tracks the connections of one server (on any number of
// listeners).
type Set struct {
	cfg Config

	mu       sync.Mutex
	lns      map[net.Listener]struct{}
	conns    map[Conn]net.Conn
	shutdown bool
	wg       sync.WaitGroup
}

// New returns an empty Set.
func New(cfg Config) *Set {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Set{cfg: cfg, lns: map[net.Listener]struct{}{}, conns: map[Conn]net.Conn{}}
}

// Serve accepts connections on ln, wraps each with newConn and serves it,
// until Shutdown or Close (it then returns nil) or until ctx ends (it then
// closes the set hard and returns ctx.Err()). A permanently closed listener
// returns its error. ln is closed on return.
func (s *Set) Serve(ctx context.Context, ln net.Listener, newConn func(net.Conn) Conn) error {
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	closed := make(chan struct{})
	stop := context.AfterFunc(ctx, func() { defer close(closed); s.Close() })
	defer func() {
		// If ctx's end started Close, return only once it (and OnClose)
		// has finished: "closes the set hard and returns ctx.Err()".
		if !stop() {
			<-closed
		}
	}()
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
			s.cfg.Log.Warn("accept failed; retrying", "err", err, "delay", delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		s.mu.Lock()
		if s.shutdown {
			s.mu.Unlock()
			nc.Close()
			continue
		}
		if s.cfg.MaxConns > 0 && len(s.conns) >= s.cfg.MaxConns {
			s.mu.Unlock()
			if s.cfg.Reject != nil {
				s.cfg.Reject(nc)
			}
			nc.Close()
			continue
		}
		c := newConn(nc)
		s.conns[c] = nc
		s.wg.Add(1)
		s.mu.Unlock()
		go s.run(c)
	}
}

func (s *Set) run(c Conn) {
	defer s.wg.Done()
	c.Serve()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// Shutdown stops accepting and asks every connection to stop reading, then
// waits until all have ended. If ctx ends first the rest are closed hard
// (Close) and ctx.Err() is returned once they have ended.
func (s *Set) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.shutdown = true
	for ln := range s.lns {
		ln.Close()
	}
	for c := range s.conns {
		c.StopReading()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.Close()
		<-done
		return ctx.Err()
	}
}

// Close stops at once: listeners and connections are closed, then OnClose
// runs.
func (s *Set) Close() {
	s.mu.Lock()
	s.shutdown = true
	for ln := range s.lns {
		ln.Close()
	}
	for _, nc := range s.conns {
		nc.Close()
	}
	s.mu.Unlock()
	if s.cfg.OnClose != nil {
		s.cfg.OnClose()
	}
}

// Len returns the number of open connections.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Each calls f on every open connection, with the set locked (f must not
// call back into the Set).
func (s *Set) Each(f func(Conn)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		f(c)
	}
}
