package client

import (
	"context"
	"fmt"
	"math"
	"net"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/router/query"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
)

// Route asks the server's KV-aware router which worker should take a
// request (the ROUTE opcode; the same query and answer as POST
// /v1/route/query). An empty q.Namespace is the default namespace. Give
// q.BlockHashes, or q.TokenIDs for the server to hash with the namespace's
// scheme. The result's Namespace is q's; its Hashes are not sent back (nil).
// A server without a router answers block.ErrInvalidArgument; a namespace
// outside the access key's scope, block.ErrPermissionDenied.
// q.Hints.Retain (a read hint) re-arms the prefix the tier holds; it is
// sent only to a server that accepted agent sessions (SessionsAccepted),
// and dropped otherwise, as reads drop theirs.
func (c *Client) Route(ctx context.Context, q query.Query) (query.Result, error) {
	if q.Namespace == "" {
		q.Namespace = block.DefaultNamespace
	}
	switch {
	case len(q.Namespace) > math.MaxUint8:
		return query.Result{}, fmt.Errorf("%w: namespace of %d bytes", block.ErrInvalidArgument, len(q.Namespace))
	case q.Hints.PinTTL < 0 || q.Hints.ExpectedOutputTokens < 0 || q.MaxWorkers < 0:
		return query.Result{}, fmt.Errorf("%w: negative hint or max_workers", block.ErrInvalidArgument)
	case int64(q.Hints.ExpectedOutputTokens) > math.MaxUint32 || int64(q.MaxWorkers) > math.MaxUint32:
		return query.Result{}, fmt.Errorf("%w: expected_output_tokens or max_workers above %d", block.ErrInvalidArgument, uint32(math.MaxUint32))
	}
	if q.Hints.Retain != 0 {
		if err := block.ValidateRetain(q.Hints.Retain); err != nil {
			return query.Result{}, err
		}
	}
	nc, err := c.conn(ctx)
	if err != nil {
		return query.Result{}, err
	}
	if !nc.sessions {
		// A server older than agent sessions: the query goes without
		// its read hint, as reads do.
		q.Hints.Retain = 0
	}
	n := wire.RouteQueryLen(q)
	if int64(n)+wire.HeaderSize > int64(c.limits.MaxFrameSize) {
		return query.Result{}, fmt.Errorf("%w: a route query of %d bytes exceeds the server's maximum frame size %d", block.ErrTooLarge, n+wire.HeaderSize, c.limits.MaxFrameSize)
	}
	head := make([]byte, wire.HeaderSize, wire.HeaderSize+n)
	head = wire.AppendRouteQuery(head, q)
	var segs net.Buffers
	if len(head) > flushThreshold {
		segs = net.Buffers{head} // written as is, not copied into the gather buffer
	}
	cl := &call{op: wire.OpRoute, flags: wire.RouteFrameFlags(q)}
	if err := nc.start(cl, head, segs, 0); err != nil {
		return query.Result{}, err
	}
	resp, err := nc.wait(ctx, cl)
	if err != nil {
		return query.Result{}, err
	}
	if err := resp.Code.Err(resp.Message); err != nil {
		return query.Result{}, err
	}
	res := *resp.Route
	res.Namespace = q.Namespace
	return res, nil
}
