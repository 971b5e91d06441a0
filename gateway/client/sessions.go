package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
)

// WithRetain returns ctx carrying a read's agent hint: the caller expects
// to come back for the blocks within d (a tool call is running). Get,
// GetInto, GetBatch, GetBatchInto and Lookup called with it re-arm the
// retain window of every block they touch on the server, to end d after
// the read. A server older than the hint (it did not echo
// wire.HelloAgentSessions) is sent the read without it; SessionsAccepted
// tells. A window that is not in (0, block.MaxRetain] is not sent.
func WithRetain(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, retainKey{}, d)
}

// retainKey is the context key of WithRetain: the client's own API for a
// read hint (the server takes it from the wire and passes it explicitly,
// block.GetOptions.Retain).
type retainKey struct{}

// retainFrom is the read retain window ctx carries (WithRetain), or 0.
func retainFrom(ctx context.Context) time.Duration {
	d, _ := ctx.Value(retainKey{}).(time.Duration)
	return d
}

// readRetain is the read hint to send with op over nc: 0 unless op is a
// GET or LOOKUP, ctx carries a valid window and the server reads it.
func readRetain(ctx context.Context, op wire.Op, nc *nconn) time.Duration {
	if (op != wire.OpGet && op != wire.OpLookup) || !nc.sessions {
		return 0
	}
	d := retainFrom(ctx)
	if block.ValidateRetain(d) != nil {
		return 0
	}
	return d
}

// SessionsAccepted reports whether the server reads agent sessions (read
// hints, put session ids, EndSession: it echoed wire.HelloAgentSessions
// on a connection of this client); false also before any connection is
// up.
func (c *Client) SessionsAccepted() bool {
	for _, s := range c.slots {
		s.mu.Lock()
		nc := s.c
		s.mu.Unlock()
		if nc != nil {
			return nc.sessions
		}
	}
	return false
}

// ErrSessionsUnsupported is EndSession's error on a server that does not
// read agent sessions.
var ErrSessionsUnsupported = fmt.Errorf("%w: the server does not read agent sessions", errors.ErrUnsupported)

// EndSession tells the server that agent session (block.PutOptions.Session)
// of namespace ns ended: the blocks put with it lose their retain windows
// and are evicted first, except those hinted shared. It returns how many
// blocks the server released (on a cluster, the node it reached: see
// docs/protocol.md).
func (c *Client) EndSession(ctx context.Context, ns string, session uint64) (int, error) {
	if session == 0 {
		return 0, fmt.Errorf("%w: session 0 is no session", block.ErrInvalidArgument)
	}
	nc, err := c.conn(ctx)
	if err != nil {
		return 0, err
	}
	if !nc.sessions {
		return 0, ErrSessionsUnsupported
	}
	b := make([]byte, wire.HeaderSize, wire.HeaderSize+1+len(ns)+8)
	cl := &call{op: wire.OpEndSession}
	if err := nc.start(cl, wire.AppendEndSession(b, ns, session), nil, 0); err != nil {
		return 0, err
	}
	resp, err := nc.wait(ctx, cl)
	if err != nil {
		return 0, err
	}
	if resp.Code != errcode.OK {
		return 0, resp.Code.Err(resp.Message)
	}
	return int(resp.Present), nil
}
