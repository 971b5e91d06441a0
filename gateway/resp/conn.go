package resp

import (
	"bufio"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
)

// readBufSize is a connection's read buffer: request headers and small
// values pass through it; large values are read past it into the arena.
const readBufSize = 8 << 10

// writeBufSize is the buffer a connection borrows while it has replies to
// write; an idle connection holds none.
const writeBufSize = 64 << 10

// conn is one client connection: requests are read, run and answered in
// order; replies are flushed when no further request is already buffered,
// so a pipeline is answered in few writes.
type conn struct {
	s    *Server
	nc   net.Conn
	br   *bufio.Reader
	rd   *reader
	w    writer
	id   int64
	name string

	db     int
	ns     string
	authed bool
	keyID  string
	// deadlineSet is when the read deadline was last moved.
	deadlineSet time.Time
	// idleDeadline: the idle timeout's deadline is set (and must be
	// cleared once a request arrives, when there is no ReadTimeout).
	idleDeadline bool
	// batchNS is c.ns's namespace as looked up for the reads of the
	// current batch of requests (valid while batchNSUses > 0); see
	// namespace.
	batchNS     block.Namespace
	batchNSUses int
	// lastEnd is when the last command ended (zero: not known), the next
	// buffered command's start.
	lastEnd time.Time
	// writeDeadlineSet is when the write deadline was last moved.
	writeDeadlineSet time.Time
	// bytesIn and bytesOut are value bytes not yet added to the metrics
	// (they are added once per flush, not per command).
	bytesIn, bytesOut int64
	// pending are the INFO counters of this connection's commands not yet
	// added to the server's (once per flush, and before INFO, so no core
	// touches the shared counters on every command).
	pending pendingStats

	mu      sync.Mutex
	idle    bool
	closing bool

	// ctx ends when the connection stops reading (Shutdown, or its end):
	// it wakes a request waiting for in-flight budget.
	ctx    context.Context
	cancel context.CancelFunc
}

func (s *Server) newConn(nc net.Conn) *conn {
	raw := nc
	if tc, ok := nc.(*tls.Conn); ok {
		// A listener wrapped in tls.NewListener (ctxd --tls-clients): the
		// socket option goes on the TCP connection.
		raw = tc.NetConn()
	}
	if tc, ok := raw.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	br := bufio.NewReaderSize(nc, readBufSize)
	c := &conn{s: s, nc: nc, br: br, rd: newReader(br, s.cfg.limits(), &s.pool), ns: s.cfg.Databases[0], w: writer{proto: 2}}
	c.id = s.stats.nextID.Add(1)
	c.authed = s.keys == nil
	if s.budget != nil {
		c.ctx, c.cancel = context.WithCancel(s.base)
		c.rd.budget, c.rd.ctx, c.rd.budgetWait = s.budget, c.ctx, s.cfg.BudgetWait
		// Replies already buffered go out before a wait, and the wait does
		// not count against the time to read the rest of the request.
		c.rd.beforeWait = func() { c.flush() }
		c.rd.afterReserve = func() {
			if s.cfg.ReadTimeout > 0 {
				c.deadlineSet = time.Now()
				c.nc.SetReadDeadline(c.deadlineSet.Add(s.cfg.ReadTimeout))
			}
		}
	}
	return c
}

// StopReading makes the connection stop before its next request
// (listener.Conn).
func (c *conn) StopReading() {
	c.mu.Lock()
	c.closing = true
	if c.cancel != nil {
		c.cancel()
	}
	if c.idle {
		c.nc.SetReadDeadline(time.Unix(1, 0))
	}
	c.mu.Unlock()
}

// setIdle marks whether the connection waits for a request; false from
// setIdle(true) means stop.
func (c *conn) setIdle(idle bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.idle = idle
	return !c.closing
}

// Serve runs the connection until it ends (listener.Conn).
func (c *conn) Serve() {
	s := c.s
	s.stats.connsTotal.Add(1)
	s.met.ConnOpened(Proto)
	defer func() {
		if c.cancel != nil {
			c.cancel()
		}
		c.publishStats()
		c.releaseWriter()
		c.rd.free()
		c.nc.Close()
		s.met.ConnClosed(Proto)
	}()
	for {
		// One clock read per request: the read deadline's refresh and the
		// command's start are the previous command's end (c.lastEnd) when
		// this request was already buffered behind it (a pipeline), else
		// a fresh read. The deadline moves only when the idle timeout's
		// is set or a quarter of ReadTimeout has passed since it last
		// moved (not once per pipeline batch): a request has at least 3/4
		// of ReadTimeout to arrive whole.
		now := c.lastEnd
		c.lastEnd = time.Time{}
		if c.br.Buffered() == 0 {
			c.dropNamespace()
			if !c.flush() || !c.waitRequest() {
				return
			}
			now = time.Time{}
		}
		if now.IsZero() {
			now = time.Now()
		}
		if s.cfg.ReadTimeout > 0 {
			if c.idleDeadline || now.Sub(c.deadlineSet) > s.cfg.ReadTimeout/4 {
				c.idleDeadline = false
				c.deadlineSet = now
				c.nc.SetReadDeadline(now.Add(s.cfg.ReadTimeout))
			}
		} else if c.idleDeadline {
			c.idleDeadline = false
			c.nc.SetReadDeadline(time.Time{})
		}
		args, err := c.rd.next()
		if err != nil {
			if c.requestFailed(err) {
				continue
			}
			return
		}
		if len(args) == 0 {
			continue
		}
		if !c.exec(args, now) {
			c.flush()
			return
		}
		c.rd.release()
	}
}

// waitRequest waits until a request's first byte arrives; false means stop
// (Shutdown, the idle timeout, a failed read). Without an idle timeout an
// idle connection waits for ever, as on Redis: the read deadline of its
// last request, still set while it waits, is cleared when it expires.
func (c *conn) waitRequest() bool {
	s := c.s
	for {
		if !c.setIdle(true) {
			return false
		}
		if s.cfg.IdleTimeout > 0 {
			c.nc.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
			c.idleDeadline = true
		}
		_, err := c.br.Peek(1)
		if !c.setIdle(false) {
			return false
		}
		if err == nil {
			return true
		}
		if s.cfg.IdleTimeout > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			c.readFailed(err)
			return false
		}
		// The last request's deadline, not an idle timeout: clear it,
		// unless Shutdown came in between (its deadline wakes an idle
		// connection).
		c.mu.Lock()
		if c.closing {
			c.mu.Unlock()
			return false
		}
		c.nc.SetReadDeadline(time.Time{})
		c.deadlineSet = time.Time{}
		c.mu.Unlock()
	}
}

// requestFailed answers a request the reader could not return; false when
// the connection must close. (Apart from Serve's loop so that the error
// targets are allocated only when a request fails.)
func (c *conn) requestFailed(err error) bool {
	s := c.s
	var tl *tooLargeError
	var busy *busyError
	switch {
	case errors.As(err, &tl):
		c.writer().err("ERR", tl.Error())
		s.met.Request(Proto, "toolarge", errcode.TooLarge, 0)
		return true
	case errors.As(err, &busy):
		c.errReply(busy)
		s.met.Request(Proto, "busy", errcode.Of(busy), 0)
		return true
	case errors.Is(err, errProtocol):
		c.writer().err("ERR", err.Error())
		s.met.Request(Proto, "protocol", errcode.MalformedFrame, 0)
		c.flush()
		s.log.Debug("protocol error; closing", "remote", c.nc.RemoteAddr(), "err", err)
		return false
	}
	c.readFailed(err)
	return false
}

// readFailed logs why reading stopped (quietly for a client that hung up).
func (c *conn) readFailed(err error) {
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.s.log.Debug("connection timed out", "remote", c.nc.RemoteAddr())
		return
	}
	c.s.log.Debug("read failed", "remote", c.nc.RemoteAddr(), "err", err)
}

// writer returns the reply writer, borrowing a buffer when the connection
// holds none.
func (c *conn) writer() *writer {
	if c.w.bw == nil {
		bw, _ := c.s.writers.Get().(*bufio.Writer)
		if bw == nil {
			bw = bufio.NewWriterSize(c.nc, writeBufSize)
		} else {
			bw.Reset(c.nc)
		}
		c.w.bw = bw
		// The write deadline moves only when a quarter of WriteTimeout has
		// passed since it last moved (not for every batch of replies):
		// the replies to a batch have at least 3/4 of WriteTimeout.
		if wt := c.s.cfg.WriteTimeout; wt > 0 {
			if now := time.Now(); now.Sub(c.writeDeadlineSet) > wt/4 {
				c.writeDeadlineSet = now
				c.nc.SetWriteDeadline(now.Add(wt))
			}
		}
	}
	return &c.w
}

// flush writes the buffered replies and gives the buffer back; false when
// the client cannot be written to.
func (c *conn) flush() bool {
	c.publishStats()
	if c.bytesIn|c.bytesOut != 0 {
		c.s.met.Bytes(Proto, c.bytesIn, c.bytesOut)
		c.bytesIn, c.bytesOut = 0, 0
	}
	if c.w.bw == nil {
		return true
	}
	err := c.w.bw.Flush()
	c.releaseWriter()
	if err != nil {
		c.readFailed(err)
		return false
	}
	return true
}

// maxNamespaceUses bounds how many reads one namespace lookup serves.
const maxNamespaceUses = 256

// namespace returns the namespace of the connection's database for a read
// (GET, MGET), looked up once per batch of pipelined requests, or per
// maxNamespaceUses reads of a longer one, instead of once per key: a
// namespace changed or deleted meanwhile is seen by the next batch.
func (c *conn) namespace() (block.Namespace, error) {
	if c.batchNSUses == 0 || c.batchNSUses >= maxNamespaceUses {
		n, err := c.s.objects.Blocks().Namespace(c.ns)
		if err != nil {
			c.dropNamespace()
			return n, err
		}
		c.batchNS, c.batchNSUses = n, 0
	}
	c.batchNSUses++
	return c.batchNS, nil
}

// dropNamespace forgets the batch's namespace (the batch ended, or SELECT).
func (c *conn) dropNamespace() { c.batchNSUses = 0 }

// pendingStats are one connection's INFO counts not yet published.
type pendingStats struct {
	commands, hits, misses int64
}

// publishStats adds the connection's pending INFO counts to the server's.
func (c *conn) publishStats() {
	p := &c.pending
	if p.commands != 0 {
		c.s.stats.commands.Add(p.commands)
	}
	if p.hits != 0 {
		c.s.stats.hits.Add(p.hits)
	}
	if p.misses != 0 {
		c.s.stats.misses.Add(p.misses)
	}
	*p = pendingStats{}
}

func (c *conn) releaseWriter() {
	if c.w.bw != nil {
		c.w.bw.Reset(nil)
		c.s.writers.Put(c.w.bw)
		c.w.bw = nil
	}
}

// errReply answers a failed command through the one error table.
func (c *conn) errReply(err error) {
	c.writer().err(errcode.Of(err).RESPPrefix(), err.Error())
}

// noAuth answers a command sent before AUTH, in Redis's words.
func (c *conn) noAuth() errcode.Code {
	c.writer().err("NOAUTH", "Authentication required.")
	return errcode.Unauthenticated
}

// login checks an access key id and secret (AUTH, HELLO ... AUTH).
func (c *conn) login(user, pass []byte) error {
	keys := c.s.keys
	if keys == nil {
		return fmt.Errorf("%w: AUTH <access-key-id> <secret> called without any password configured (ctxd runs with --auth off)", block.ErrInvalidArgument)
	}
	cred, err := keys.Lookup(string(user))
	if err != nil || subtle.ConstantTimeCompare([]byte(cred.Secret), pass) != 1 {
		return errWrongPass
	}
	c.authed, c.keyID = true, cred.AccessKeyID
	return nil
}

// errWrongPass is Redis's answer to bad credentials (prefix WRONGPASS).
var errWrongPass = errors.New("invalid username-password pair or user is disabled.") //nolint:revive,staticcheck // Redis's own text, matched by its clients

// authorize checks that the connection may touch its database's namespace;
// the key is looked up again each time, so a revoked key or a narrowed
// scope takes effect on open connections.
func (c *conn) authorize() error {
	if c.s.keys == nil {
		return nil
	}
	cred, err := c.s.keys.Lookup(c.keyID)
	if err != nil {
		return fmt.Errorf("%w: access key %q is no longer valid", block.ErrUnauthenticated, c.keyID)
	}
	if !cred.Allows(c.ns) {
		return fmt.Errorf("%w: namespace %q (database %d) is outside this access key's scope", block.ErrPermissionDenied, c.ns, c.db)
	}
	return nil
}
