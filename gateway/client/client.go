// Package client is the Go client of ctxtier: Client speaks the native block
// protocol (a pool of pipelined TCP connections), and the HTTP helpers speak
// the HTTP block API. Errors returned for a server's answer wrap the same
// sentinels as the server's (block.ErrNotFound, block.ErrConflict, ...), so
// errors.Is works across the wire; a broken connection is block.ErrUnavailable.
package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
)

// Client is a native-protocol client with a pool of connections. It is safe
// for concurrent use; concurrent calls are pipelined on the connections.
type Client struct {
	addr   string
	opts   Options
	slots  []*slot
	next   atomic.Uint64
	closed atomic.Bool
	limits wire.Limits
	direct directState // ReadDirect (direct.go)
	// noHelloFlags latches once the server refused the hello flags (a
	// server older than them): later connections are dialed without.
	noHelloFlags atomic.Bool
	// noPutHints latches once the server refused wire.HelloPutHints (a
	// server older than agent hints, newer than hello flags).
	noPutHints atomic.Bool
	// noSessions latches once the server refused
	// wire.HelloAgentSessions (older than read hints and END_SESSION).
	noSessions atomic.Bool
}

type slot struct {
	mu sync.Mutex
	c  *nconn
}

// Dial connects opts.Conns connections to addr and completes the handshake
// on each. A server that does not speak this client's protocol version
// answers an error that errors.Is errcode.ErrVersionMismatch.
func Dial(ctx context.Context, addr string, opts Options) (*Client, error) {
	opts = opts.withDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	c := &Client{addr: addr, opts: opts, slots: make([]*slot, opts.Conns)}
	for i := range c.slots {
		nc, err := c.dial(ctx)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.slots[i] = &slot{c: nc}
	}
	c.limits = c.slots[0].c.limits
	return c, nil
}

// Limits returns the limits the server announced.
func (c *Client) Limits() wire.Limits { return c.limits }

// Close closes every connection; calls in flight fail with block.ErrClosed.
func (c *Client) Close() error {
	c.closed.Store(true)
	defer c.closeDirect()
	for _, s := range c.slots {
		if s == nil {
			continue
		}
		s.mu.Lock()
		if s.c != nil {
			s.c.fail(block.ErrClosed)
		}
		s.mu.Unlock()
	}
	return nil
}

// conn picks the next connection round robin, redialing a broken one.
func (c *Client) conn(ctx context.Context) (*nconn, error) {
	if c.closed.Load() {
		return nil, fmt.Errorf("client: %w", block.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := c.slots[c.next.Add(1)%uint64(len(c.slots))]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c != nil && s.c.healthy() {
		return s.c, nil
	}
	if c.opts.NoRedial && s.c != nil {
		return nil, fmt.Errorf("%w: connection to %s lost (not redialed)", block.ErrUnavailable, c.addr)
	}
	nc, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	if c.closed.Load() {
		nc.fail(block.ErrClosed)
		return nil, fmt.Errorf("client: %w", block.ErrClosed)
	}
	s.c = nc
	return nc, nil
}

// dial opens one connection. Unless Options.TierVerify is set, its hello
// declares that this client verifies every GET (wire.HelloVerifiesGets,
// which it always does), so the server's DRAM tier can skip its own pass;
// it also asks whether the server reads agent hints on puts
// (wire.HelloPutHints) and agent sessions (wire.HelloAgentSessions: read
// hints, session ids, END_SESSION). A server older than a hello flag
// refuses it and closes the connection: the client then dials again
// without the session flag, then without the put-hints flag, then without
// any, and from then on.
func (c *Client) dial(ctx context.Context) (*nconn, error) {
	flags := c.helloFlags()
	nc, err := dialConn(ctx, c.addr, c.opts, flags)
	for err != nil && flags != 0 && errors.Is(err, wire.ErrHelloFlagsRefused) {
		switch {
		case flags&wire.HelloAgentSessions != 0 && flags != wire.HelloAgentSessions:
			c.noSessions.Store(true)
		case flags&wire.HelloPutHints != 0 && flags != wire.HelloPutHints:
			c.noPutHints.Store(true)
		default:
			c.noHelloFlags.Store(true)
		}
		flags = c.helloFlags()
		nc, err = dialConn(ctx, c.addr, c.opts, flags)
	}
	return nc, err
}

func (c *Client) helloFlags() uint16 {
	if c.noHelloFlags.Load() {
		return 0
	}
	var flags uint16
	if !c.opts.TierVerify {
		flags |= wire.HelloVerifiesGets
	}
	if !c.noPutHints.Load() {
		flags |= wire.HelloPutHints
		if !c.noSessions.Load() {
			flags |= wire.HelloAgentSessions
		}
	}
	return flags
}

// chunk is a run of batch items sent in one frame: items [lo, hi) of one namespace.
type chunk struct{ lo, hi int }

// chunks cuts n items into frames: a new frame starts when the namespace
// changes, at the server's MaxBatch, or when size(i) would overflow the
// server's frame limit (size may be nil for key-only requests).
func (c *Client) chunks(n int, ns func(i int) string, size func(i int) int64) []chunk {
	var out []chunk
	maxBatch := max(int(c.limits.MaxBatch), 1)
	room := int64(c.limits.MaxFrameSize) - wire.HeaderSize - 1 - block.MaxNamespaceLen - 8
	lo := 0
	var used int64
	for i := 0; i < n; i++ {
		var sz int64 = wire.KeySize
		if size != nil {
			sz = size(i)
		}
		if i > lo && (i-lo >= maxBatch || ns(i) != ns(lo) || used+sz > room) {
			out = append(out, chunk{lo, i})
			lo, used = i, 0
		}
		used += sz
	}
	if n > lo {
		out = append(out, chunk{lo, n})
	}
	return out
}
