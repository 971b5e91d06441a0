package native

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
)

// readBufSize is the bufio size for headers and small frames; larger reads
// (block payloads) bypass it and go straight into their destination.
const readBufSize = 64 << 10

// flushThreshold is how many bytes of small responses the writer gathers
// before a write, when more responses are queued.
const flushThreshold = 64 << 10

// conn is one client connection: a reader goroutine decodes and executes
// requests in order and queues their responses; a writer goroutine writes
// them (small ones gathered, block payloads by writev straight from the
// tier's memory) and then releases the block leases.
type conn struct {
	s  *Server
	nc net.Conn
	br *bufio.Reader
	// out carries responses from reader to writer; its capacity is
	// Config.MaxInFlight, which bounds the responses (and so the leases)
	// queued per connection.
	out chan *response

	// leases are the DESCRIBE leases this connection holds; they end when it closes.
	leases leaseTable
	// keyID is the access key the connection authenticated with (empty
	// while authentication is off).
	keyID string
	// readerVerifies: the client declared wire.HelloVerifiesGets, so its
	// GETs read DRAM without the tier's at-rest pass (exec.go, get).
	readerVerifies bool
	// rc is the plain TCP socket the reader writes to without waiting
	// (inline.go, respond); nil over TLS.
	rc syscall.RawConn
	// queued counts the responses handed to the writer and not yet
	// written: while it is 0 the writer is idle with nothing pending, and
	// the reader may write a response itself.
	queued atomic.Int64
	// one is respond's scratch for a response without segments; iov is
	// its writev's.
	one [1][]byte
	iov []unix.Iovec
	// writeFn (c.writeSome), wsegs and wrote are tryWrite's callback,
	// its input and its result.
	writeFn func(fd uintptr) bool
	wsegs   net.Buffers
	wrote   int64
	// send is the socket GET payloads are sendfile'd to; nil when
	// Config.Sendfile is off or the connection is not plain TCP.
	send syscall.RawConn
	// pipe is the writer's splice pipe, made at the first file send.
	pipe   *pipe
	noPipe bool // making the pipe failed: use sendfile

	mu      sync.Mutex
	idle    bool // the reader waits for the next frame header
	closing bool // Shutdown: read no more requests

	// ctx ends when the connection stops reading (Shutdown, or its end):
	// it wakes a reader waiting for in-flight budget.
	ctx    context.Context
	cancel context.CancelFunc
}

func (s *Server) newConn(nc net.Conn) *conn {
	raw := nc
	if tc, ok := nc.(*tls.Conn); ok {
		// A listener wrapped in tls.NewListener (ctxd's peer listener
		// with --tls-cert): the socket option goes on the TCP connection.
		raw = tc.NetConn()
	}
	if tc, ok := raw.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &conn{s: s, nc: nc, br: bufio.NewReaderSize(nc, readBufSize), out: make(chan *response, s.cfg.MaxInFlight), ctx: ctx, cancel: cancel,
		rc: rawConn(nc), send: sendConn(nc, s.cfg.Sendfile)}
}

// StopReading makes the reader stop before the next request; a reader
// already waiting for a header is woken by an expired deadline.
func (c *conn) StopReading() {
	c.mu.Lock()
	c.closing = true
	c.cancel()
	if c.idle {
		c.nc.SetReadDeadline(time.Unix(1, 0))
	}
	c.mu.Unlock()
}

// beginIdle marks the reader as waiting for a header; false means stop.
func (c *conn) beginIdle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return false
	}
	c.idle = true
	return true
}

func (c *conn) endIdle() (closing bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.idle = false
	return c.closing
}

// Serve runs the connection until it ends (listener.Conn).
func (c *conn) Serve() {
	s := c.s
	s.met.ConnOpened(Proto)
	defer s.met.ConnClosed(Proto)
	defer c.nc.Close()
	defer c.cancel()
	if !c.handshake() {
		return
	}
	done := make(chan struct{})
	go func() { c.writeLoop(); close(done) }()
	c.readLoop()
	close(c.out)
	<-done
	c.leases.closeAll()
}

// handshake reads the hello and answers it. A version-2 hello is followed
// by the challenge/response exchange (auth.go); version 1 is accepted only
// while authentication is off.
func (c *conn) handshake() bool {
	s := c.s
	c.nc.SetDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	defer c.nc.SetDeadline(time.Time{})
	if tc, ok := c.nc.(*tls.Conn); ok {
		// Run the TLS handshake here rather than on the first read, so a
		// refused peer (untrusted or missing certificate) is logged as such.
		if err := tc.Handshake(); err != nil {
			s.log.Warn("tls handshake failed", "remote", c.nc.RemoteAddr(), "err", err)
			return false
		}
	}
	var hb [wire.HelloSize]byte
	if _, err := io.ReadFull(c.br, hb[:]); err != nil {
		s.log.Debug("handshake read failed", "remote", c.nc.RemoteAddr(), "err", err)
		return false
	}
	reply := wire.HelloReply{Version: wire.Version, Limits: s.limits}
	h, err := wire.DecodeHello(hb[:])
	switch {
	case err != nil:
		reply.Code = errcode.Of(err)
	case h.Version == wire.Version1 && s.keys != nil:
		err = errNoCredentials
		reply.Code = errcode.Of(err)
	case h.Version == wire.Version1:
		reply.Version = wire.Version1
	case h.Version != wire.Version:
		reply.Code = errcode.VersionMismatch
		err = errcode.ErrVersionMismatch
	}
	if err == nil {
		// Every known hello flag is honoured; echoing it tells the client
		// so (and that this server knows wire.FlagVerifyAtRest).
		reply.Flags = h.Flags
		c.readerVerifies = h.Flags&wire.HelloVerifiesGets != 0
	}
	var ch wire.Challenge
	if err == nil && reply.Version == wire.Version {
		if ch, err = s.newChallenge(); err != nil {
			reply.Code = errcode.Of(err)
		}
	}
	out := wire.AppendHelloReply(make([]byte, 0, wire.HelloReplySize+wire.ChallengeSize), reply)
	if err == nil && reply.Version == wire.Version {
		out = wire.AppendChallenge(out, ch)
	}
	if _, werr := c.nc.Write(out); werr != nil {
		return false
	}
	if err != nil {
		s.log.Info("handshake refused", "remote", c.nc.RemoteAddr(), "version", h.Version, "err", err)
		return false
	}
	if reply.Version == wire.Version1 {
		return true
	}
	return c.authenticate(ch)
}

func (c *conn) readLoop() {
	s := c.s
	var hb [wire.HeaderSize]byte
	for {
		if !c.beginIdle() {
			return
		}
		if s.cfg.IdleTimeout > 0 {
			c.nc.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
		}
		n, err := io.ReadFull(c.br, hb[:])
		closing := c.endIdle()
		if err != nil {
			switch {
			case n == 0 && (errors.Is(err, io.EOF) || closing || errors.Is(err, os.ErrDeadlineExceeded)):
				// A clean end between frames, Shutdown, or the idle timeout.
			case n > 0 && !errors.Is(err, net.ErrClosed):
				c.fail(wire.Header{}, time.Now(), errcode.MalformedFrame, "truncated frame header: "+err.Error())
			}
			return
		}
		start := time.Now()
		h, err := wire.DecodeHeader(hb[:], s.limits.MaxFrameSize)
		if err != nil {
			// The stream cannot be trusted past a bad header: answer and close.
			c.fail(h, start, errcode.Of(err), err.Error())
			return
		}
		// The body is read only once its bytes are in the node's in-flight
		// budget; until then this connection is not read (TCP pushes back
		// on the sender).
		release, err := s.budget.Acquire(c.ctx, int64(h.Length))
		if err != nil {
			c.fail(h, start, errcode.Of(err), err.Error())
			return
		}
		if s.cfg.ReadTimeout > 0 {
			c.nc.SetReadDeadline(time.Now().Add(s.cfg.ReadTimeout))
		}
		var body *[]byte
		var bb []byte
		if h.Length > 0 {
			body = s.bufs.get(int(h.Length))
			bb = *body
			if _, err := io.ReadFull(c.br, bb); err != nil {
				s.bufs.put(body)
				release()
				c.fail(h, start, errcode.MalformedFrame, "truncated frame: "+err.Error())
				return
			}
		}
		req, err := wire.DecodeRequest(h, bb, s.limits)
		var r *response
		if err != nil {
			r = errorResponse(h, start, errcode.Of(err), err.Error(), false)
		} else {
			r = c.execute(req, start)
		}
		s.bufs.put(body) // the store copied what it keeps
		release()
		c.respond(r)
	}
}

// fail queues a final error response for h's request; the connection is
// closed after it is written.
func (c *conn) fail(h wire.Header, start time.Time, code errcode.Code, msg string) {
	c.s.log.Debug("closing connection", "remote", c.nc.RemoteAddr(), "code", code, "err", msg)
	c.enqueue(errorResponse(h, start, code, msg, true))
}

func (c *conn) writeLoop() {
	s := c.s
	var pending []byte
	var broken bool
	var bufs net.Buffers
	// unwritten counts the responses taken from out whose bytes are not
	// all written yet (gathered in pending); queued drops by it once they are.
	var unwritten int64
	defer func() {
		if c.pipe != nil {
			c.pipe.close()
		}
	}()
	for r := range c.out {
		if !broken {
			if r.segs == nil {
				pending = append(pending, r.buf...)
				if len(pending) >= flushThreshold || len(c.out) == 0 || r.closeAfter {
					broken = c.write(net.Buffers{pending}, &bufs) != nil
					pending = pending[:0]
				}
			} else {
				segs, files := r.segs, r.files
				if len(pending) > 0 {
					segs = append(net.Buffers{pending}, segs...)
					if files != nil {
						files = append([]fileSeg{{}}, files...)
					}
				}
				if files != nil {
					broken = c.writeFiles(c.send, segs, files, &bufs) != nil
				} else {
					broken = c.write(segs, &bufs) != nil
				}
				pending = pending[:0]
			}
			if broken {
				// Wake the reader; the remaining responses are only released.
				c.nc.Close()
			}
		}
		r.finish(s)
		if r.closeAfter {
			c.nc.Close()
		}
		unwritten++
		if len(pending) == 0 {
			c.queued.Add(-unwritten)
			unwritten = 0
		}
	}
}

func (c *conn) write(segs net.Buffers, scratch *net.Buffers) error {
	if c.s.cfg.WriteTimeout > 0 {
		c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
	}
	// WriteTo consumes the slice it is given; keep segs intact for reuse.
	*scratch = append((*scratch)[:0], segs...)
	_, err := scratch.WriteTo(c.nc)
	clear(*scratch)
	if err != nil {
		c.s.log.Debug("write failed", "remote", c.nc.RemoteAddr(), "err", err)
	}
	return err
}

// response is one encoded response waiting for the writer.
type response struct {
	op    wire.Op
	code  errcode.Code
	start time.Time
	// buf holds the header and every non-payload byte; segs, when not nil,
	// interleaves slices of buf with block payloads for one writev.
	buf  []byte
	segs net.Buffers
	// files, when not nil, says which of segs the writer sends with
	// sendfile (one entry per segment).
	files []fileSeg
	refs  []*block.Ref
	out   int64
	// closeAfter closes the connection once this response is written.
	closeAfter bool
}

func errorResponse(h wire.Header, start time.Time, code errcode.Code, msg string, closeAfter bool) *response {
	b := make([]byte, wire.HeaderSize, wire.HeaderSize+2+min(len(msg), wire.MaxMessageLen))
	b = wire.AppendErrorBody(b, msg)
	wire.PutHeader(b, wire.Header{Length: uint32(len(b) - wire.HeaderSize), Op: h.Op, Flags: wire.FlagResponse, Code: code, ID: h.ID})
	return &response{op: h.Op, code: code, start: start, buf: b, closeAfter: closeAfter}
}

// finish releases the leases and records the request's metrics.
func (r *response) finish(s *Server) {
	for i, ref := range r.refs {
		ref.Release()
		r.refs[i] = nil
	}
	if r.op.Known() {
		s.met.Request(Proto, r.op.String(), r.code, time.Since(r.start))
	} else {
		s.met.Request(Proto, "unknown", r.code, time.Since(r.start))
	}
	s.met.Bytes(Proto, 0, r.out)
}
