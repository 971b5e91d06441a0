package native

import (
	"context"
	"fmt"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/router"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
)

// Router answers ROUTE requests; *router.Router satisfies it.
type Router interface {
	Route(ctx context.Context, q router.Query) (router.Result, error)
}

// WithRouter makes the server answer ROUTE with r (the KV-aware router's
// query, as POST /v1/route/query answers it over HTTP). Without it ROUTE
// answers InvalidArgument.
func WithRouter(r Router) Option { return func(s *Server) { s.router = r } }

// errNoRouter answers ROUTE on a server without a router.
var errNoRouter = fmt.Errorf("%w: this listener does not serve routing queries (no router configured)", block.ErrInvalidArgument)

// route answers a ROUTE request whose namespace the connection may touch.
// The router's namespaces are those engines publish KV events for, not the
// store's catalog, so (as over HTTP) the namespace need not exist in the store.
func (c *conn) route(req *wire.Request, start time.Time) *response {
	s := c.s
	h := req.Header
	if s.router == nil {
		return errorResponse(h, start, errcode.Of(errNoRouter), errNoRouter.Error(), false)
	}
	res, err := s.router.Route(s.base, *req.Route)
	if err != nil {
		return errorResponse(h, start, errcode.Of(err), err.Error(), false)
	}
	n := wire.RouteResultLen(res)
	if int64(n)+wire.HeaderSize > int64(s.limits.MaxResponseSize) || n > wire.MaxRouteResponse {
		err := fmt.Errorf("%w: the route result of %d workers would exceed the maximum response size; ask for fewer max_workers", block.ErrTooLarge, len(res.Workers))
		return errorResponse(h, start, errcode.Of(err), err.Error(), false)
	}
	b := make([]byte, wire.HeaderSize, wire.HeaderSize+n)
	b = wire.AppendRouteResult(b, res)
	wire.PutHeader(b, wire.Header{Length: uint32(len(b) - wire.HeaderSize), Op: h.Op, Flags: wire.FlagResponse, ID: h.ID})
	return &response{op: h.Op, start: start, buf: b}
}
