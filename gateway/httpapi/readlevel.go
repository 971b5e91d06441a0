package httpapi

import (
	"fmt"
	"net/http"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
)

// withReadLevel carries the request's httpwire.HeaderRead into its context
// (ctxstore.WithReadLevel), where the store's reads find it; writes ignore
// it. An unknown value is InvalidArgument.
func withReadLevel(r *http.Request) (*http.Request, error) {
	v := r.Header.Get(httpwire.HeaderRead)
	if v == "" {
		return r, nil
	}
	level, err := ctxstore.ParseReadLevel(v)
	if err != nil {
		return r, fmt.Errorf("%s: %w", httpwire.HeaderRead, err)
	}
	return r.WithContext(ctxstore.WithReadLevel(r.Context(), level)), nil
}

// withReadRetain carries a read's httpwire.HeaderRetain (GET, batch get,
// lookup: the op names of those routes) into its context
// (block.WithRetain): every block the read touches has its retain window
// re-armed. On a put the same header is the put's own window and is read
// by httpwire.ParsePutOptions instead. A value that is not a positive
// window up to block.MaxRetain is InvalidArgument.
func withReadRetain(r *http.Request, op string) (*http.Request, error) {
	if op != "get" && op != "batch_get" && op != "lookup" {
		return r, nil
	}
	d, ok, err := httpwire.ParseReadRetain(r.Header)
	if err != nil || !ok {
		return r, err
	}
	return r.WithContext(block.WithRetain(r.Context(), d)), nil
}
