package peer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
)

// conn is one pipelined native-protocol connection to a member's peer
// listener. A request is one frame written whole under wmu; one reader
// goroutine matches each answer to its request by id. GET bytes are read
// into fresh slices, so a caller whose context ends may simply leave: the
// answer is read and dropped when it comes.
type conn struct {
	nc     net.Conn
	br     *bufio.Reader
	wto    time.Duration
	limits wire.Limits
	// hints and sessions: the member echoed wire.HelloPutHints and
	// wire.HelloAgentSessions, so it reads put hint records, put session
	// ids and read hints.
	hints, sessions bool

	wmu sync.Mutex

	mu      sync.Mutex
	lastID  uint64
	pending map[uint64]*request
	err     error // set once the connection is broken
}

// request is one frame waiting for its answer.
type request struct {
	op    wire.Op
	count uint32
	done  chan struct{}
	resp  *wire.Response
	err   error
}

// helloSteps are the hello flags tried in turn: a member refuses a flag it
// does not know, and is dialed again without the newest one. Shard reads
// never declare wire.HelloVerifiesGets: the serving tier verifies them at
// rest (node-to-node traffic feeds repair and replication).
var helloSteps = []uint16{wire.HelloPutHints | wire.HelloAgentSessions, wire.HelloPutHints, 0}

// dial connects to addr, completes the handshake (stepping down through
// helloSteps on refusal) and starts the reader.
func dial(ctx context.Context, addr string, opts Options) (*conn, error) {
	var err error
	for _, flags := range helloSteps {
		var c *conn
		if c, err = dialFlags(ctx, addr, opts, flags); err == nil {
			go c.readLoop()
			return c, nil
		}
		if !errors.Is(err, wire.ErrHelloFlagsRefused) {
			break
		}
	}
	return nil, err
}

func dialFlags(ctx context.Context, addr string, opts Options, flags uint16) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.DialTimeout)
	defer cancel()
	nc, err := wire.Dial(ctx, addr, opts.TLS)
	if err != nil {
		return nil, err
	}
	c := &conn{nc: nc, br: bufio.NewReaderSize(nc, 64<<10), wto: opts.WriteTimeout, pending: map[uint64]*request{}}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	if err := c.hello(opts, flags); err != nil {
		nc.Close()
		return nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	return c, nil
}

// hello runs the protocol's handshake with the node identity.
func (c *conn) hello(opts Options, flags uint16) error {
	r, err := wire.ClientHandshake(c.nc, c.br, wire.Version, flags, opts.AccessKeyID, opts.Secret)
	if err != nil {
		return err
	}
	c.limits = r.Limits
	c.hints = flags&r.Flags&wire.HelloPutHints != 0
	c.sessions = flags&r.Flags&wire.HelloAgentSessions != 0
	return nil
}

// broken returns the connection's error once it is broken, else nil.
func (c *conn) broken() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// close breaks the connection: every waiting request fails with an error
// wrapping block.ErrClosed when cause is one, else block.ErrUnavailable.
func (c *conn) close(cause error) {
	c.mu.Lock()
	if c.err == nil {
		if errors.Is(cause, block.ErrClosed) {
			c.err = fmt.Errorf("peer: %w", cause)
		} else {
			c.err = fmt.Errorf("%w: peer connection to %s: %v", block.ErrUnavailable, c.nc.RemoteAddr(), cause)
		}
	}
	err, waiting := c.err, c.pending
	c.pending = map[uint64]*request{}
	c.mu.Unlock()
	c.nc.Close()
	for _, r := range waiting {
		r.err = err
		close(r.done)
	}
}

// do sends one frame and waits for its answer (send, then wait).
func (c *conn) do(ctx context.Context, op wire.Op, flags uint8, count uint32, frame net.Buffers) (*wire.Response, error) {
	r, err := c.send(op, flags, count, frame)
	if err != nil {
		return nil, err
	}
	return r.wait(ctx)
}

// send writes one frame and returns its request to wait on. frame[0] is
// the header's room followed by the body's first bytes; further slices
// (block bytes and the item records between them) follow it on the wire.
// A write that fails breaks the connection, and so answers the request.
func (c *conn) send(op wire.Op, flags uint8, count uint32, frame net.Buffers) (*request, error) {
	r := &request{op: op, count: count, done: make(chan struct{})}
	var length int64
	for _, b := range frame {
		length += int64(len(b))
	}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.lastID++
	id := c.lastID
	c.pending[id] = r
	c.mu.Unlock()
	wire.PutHeader(frame[0], wire.Header{Length: uint32(length - wire.HeaderSize), Op: op, Flags: flags, ID: id, Count: count})

	c.wmu.Lock()
	if c.wto > 0 {
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.wto))
	}
	_, err := frame.WriteTo(c.nc)
	c.wmu.Unlock()
	if err != nil {
		c.close(err)
	}
	return r, nil
}

// wait returns r's answer, or ctx's error when it ends first (the reader
// then drops the answer when it comes). A request-level error code comes
// back as its error.
func (r *request) wait(ctx context.Context) (*wire.Response, error) {
	select {
	case <-r.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if r.err != nil {
		return nil, r.err
	}
	if r.resp.Code != errcode.OK {
		return nil, r.resp.Code.Err(r.resp.Message)
	}
	return r.resp, nil
}

// readLoop reads answers until the connection breaks.
func (c *conn) readLoop() {
	for {
		var r *request
		h, resp, err := wire.ReadAnswer(c.br, c.limits.MaxResponseSize, func(id uint64) (wire.Op, uint32, wire.Dest, bool) {
			c.mu.Lock()
			r = c.pending[id]
			delete(c.pending, id)
			c.mu.Unlock()
			if r == nil {
				return 0, 0, nil, false
			}
			return r.op, r.count, nil, true // GET bytes into fresh slices
		})
		if err != nil {
			if r != nil {
				c.mu.Lock()
				c.pending[h.ID] = r // close answers it with the connection's error
				c.mu.Unlock()
			}
			c.close(err)
			return
		}
		r.resp = resp
		close(r.done)
	}
}
