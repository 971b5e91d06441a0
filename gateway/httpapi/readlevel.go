package httpapi

import (
	"fmt"
	"net/http"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
)

// readHandlerFunc serves an operation that reads blocks (GET, HEAD,
// lookup, batch exists/get): it gets the request's read options, parsed
// once by readOptions, as a parameter and hands them to the store.
type readHandlerFunc func(w http.ResponseWriter, r *http.Request, opts ctxstore.ReadOptions) error

// readOptions parses a request's read headers, once per request and before
// its handler runs: httpwire.HeaderRead, the read level, on every route (a
// write ignores the level but refuses a value that is none, as every route
// always has), and, on the routes that read blocks' bytes or re-arm their
// windows (ops get, batch_get, lookup), httpwire.HeaderRetain as the read's
// retain window (every block the read touches has its window re-armed; on
// a put the same header is the put's own window, read by
// httpwire.ParsePutOptions instead). A bad value is InvalidArgument.
func readOptions(r *http.Request, op string) (ctxstore.ReadOptions, error) {
	var opts ctxstore.ReadOptions
	if v := r.Header.Get(httpwire.HeaderRead); v != "" {
		level, err := ctxstore.ParseReadLevel(v)
		if err != nil {
			return opts, fmt.Errorf("%s: %w", httpwire.HeaderRead, err)
		}
		opts.Level = level
	}
	if op != "get" && op != "batch_get" && op != "lookup" {
		return opts, nil
	}
	d, _, err := httpwire.ParseReadRetain(r.Header)
	opts.Retain = d
	return opts, err
}
