package client

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
)

const (
	readBufSize    = 64 << 10
	flushThreshold = 64 << 10
)

// nconn is one pipelined connection: callers write request frames under
// wmu and wait on their call; one reader goroutine reads responses, matches
// them to calls by request id and decodes GET payloads straight into the
// callers' buffers.
type nconn struct {
	nc     net.Conn
	br     *bufio.Reader
	limits wire.Limits
	wto    time.Duration
	ids    atomic.Uint64
	// declared: the server accepted wire.HelloVerifiesGets (it echoed the
	// flag), so it knows wire.FlagVerifyAtRest too.
	declared bool
	// hints: the server echoed wire.HelloPutHints, so it reads PUT hint
	// records (wire.FlagPutHints).
	hints bool
	// sessions: the server echoed wire.HelloAgentSessions, so it reads
	// read hints, put session ids and END_SESSION.
	sessions bool

	wmu     sync.Mutex
	waiting atomic.Int32 // writers queued on wmu
	wbuf    []byte       // small frames gathered while other writers wait
	scratch net.Buffers

	mu      sync.Mutex
	pending map[uint64]*call
	err     error // set once the connection is broken
}

// call states: a waiting call may be abandoned by its caller (context
// ended); once the reader starts decoding into it, the caller must wait.
const (
	callWaiting int32 = iota
	callReading
	callAbandoned
)

type call struct {
	op    wire.Op
	flags uint8 // request flags (FlagLinearizable)
	count uint32
	dest  wire.Dest
	state atomic.Int32
	done  chan struct{}
	resp  *wire.Response
	err   error
}

// dialConn connects to addr and completes the handshake with the given
// hello flags.
func dialConn(ctx context.Context, addr string, opts Options, flags uint16) (*nconn, error) {
	if opts.DialTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.DialTimeout)
		defer cancel()
	}
	nc, err := wire.Dial(ctx, addr, opts.TLS)
	if err != nil {
		return nil, err
	}
	c := &nconn{nc: nc, br: bufio.NewReaderSize(nc, readBufSize), wto: opts.WriteTimeout, pending: map[uint64]*call{}}
	if err := c.handshake(ctx, opts, flags); err != nil {
		nc.Close()
		return nil, err
	}
	go c.readLoop()
	return c, nil
}

func (c *nconn) handshake(ctx context.Context, opts Options, flags uint16) error {
	if dl, ok := ctx.Deadline(); ok {
		c.nc.SetDeadline(dl)
		defer c.nc.SetDeadline(time.Time{})
	}
	v := opts.version
	if v == 0 {
		v = wire.Version
	}
	r, err := wire.ClientHandshake(c.nc, c.br, v, flags, opts.AccessKeyID, opts.Secret)
	if err != nil {
		return err
	}
	c.limits = r.Limits
	c.declared = flags&r.Flags&wire.HelloVerifiesGets != 0
	c.hints = flags&r.Flags&wire.HelloPutHints != 0
	c.sessions = flags&r.Flags&wire.HelloAgentSessions != 0
	return nil
}

func (c *nconn) healthy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err == nil
}

// fail breaks the connection: every pending call fails with an error
// wrapping cause (block.ErrClosed when the client closes, else
// block.ErrUnavailable).
func (c *nconn) fail(cause error) {
	c.mu.Lock()
	if c.err == nil {
		if errcode.Of(cause) == errcode.Closed {
			c.err = fmt.Errorf("client: %w", cause)
		} else {
			c.err = fmt.Errorf("%w: native connection to %s: %v", block.ErrUnavailable, c.nc.RemoteAddr(), cause)
		}
	}
	err := c.err
	calls := c.pending
	c.pending = map[uint64]*call{}
	c.mu.Unlock()
	c.nc.Close()
	for _, cl := range calls {
		cl.err = err
		close(cl.done)
	}
}

// start registers a call and writes its frame. head holds room for the
// header (filled in here) and every non-payload byte; when the frame carries
// block payloads (payload bytes in all), segs interleaves slices of head with
// them and is written with one writev.
func (c *nconn) start(cl *call, head []byte, segs net.Buffers, payload int64) error {
	cl.done = make(chan struct{})
	id := c.ids.Add(1)
	wire.PutHeader(head, wire.Header{Length: uint32(int64(len(head)-wire.HeaderSize) + payload), Op: cl.op, Flags: cl.flags, ID: id, Count: cl.count})
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	c.pending[id] = cl
	c.mu.Unlock()

	c.waiting.Add(1)
	c.wmu.Lock()
	c.waiting.Add(-1)
	var err error
	if segs == nil {
		c.wbuf = append(c.wbuf, head...)
		// Gather small frames while other writers wait; the last one writes.
		if c.waiting.Load() == 0 || len(c.wbuf) >= flushThreshold {
			err = c.write(net.Buffers{c.wbuf})
			c.wbuf = c.wbuf[:0]
		}
	} else {
		if len(c.wbuf) > 0 {
			segs = append(net.Buffers{c.wbuf}, segs...)
		}
		err = c.write(segs)
		c.wbuf = c.wbuf[:0]
	}
	c.wmu.Unlock()
	if err != nil {
		c.fail(err) // fails cl too; wait reports it
	}
	return nil
}

func (c *nconn) write(segs net.Buffers) error {
	if c.wto > 0 {
		c.nc.SetWriteDeadline(time.Now().Add(c.wto))
	}
	c.scratch = append(c.scratch[:0], segs...)
	_, err := c.scratch.WriteTo(c.nc)
	clear(c.scratch)
	return err
}

// wait blocks until cl's response arrived or ctx ended. A call whose
// response is already being read into the caller's buffers is waited for
// even after ctx ends, so the buffers are never written after return.
func (c *nconn) wait(ctx context.Context, cl *call) (*wire.Response, error) {
	select {
	case <-cl.done:
	case <-ctx.Done():
		if cl.state.CompareAndSwap(callWaiting, callAbandoned) {
			return nil, ctx.Err()
		}
		<-cl.done
	}
	if cl.err != nil {
		return nil, cl.err
	}
	return cl.resp, nil
}

var skipAll = func(int, uint32) []byte { return []byte{} }

func (c *nconn) readLoop() {
	for {
		var cl *call
		h, resp, err := wire.ReadAnswer(c.br, c.limits.MaxResponseSize, func(id uint64) (wire.Op, uint32, wire.Dest, bool) {
			c.mu.Lock()
			cl = c.pending[id]
			delete(c.pending, id)
			c.mu.Unlock()
			if cl == nil {
				return 0, 0, nil, false
			}
			if !cl.state.CompareAndSwap(callWaiting, callReading) {
				return cl.op, cl.count, skipAll, true // abandoned: read past its payloads
			}
			return cl.op, cl.count, cl.dest, true
		})
		if err != nil {
			if cl != nil {
				c.mu.Lock()
				c.pending[h.ID] = cl // fail answers it with the connection's error
				c.mu.Unlock()
			}
			c.fail(err)
			return
		}
		cl.resp = resp
		close(cl.done)
	}
}
