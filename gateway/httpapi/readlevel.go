package httpapi

import (
	"fmt"
	"net/http"

	"github.com/ctxtier/ctxtier/ctxstore"
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

// checkReadRetain checks a read's httpwire.HeaderRetain (GET, batch get,
// lookup: the op names of those routes) before the handler runs, which
// reads it with readOptions. On a put the same header is the put's own
// window and is read by httpwire.ParsePutOptions instead. A value that is
// not a positive window up to block.MaxRetain is InvalidArgument.
func checkReadRetain(r *http.Request, op string) error {
	if op != "get" && op != "batch_get" && op != "lookup" {
		return nil
	}
	_, _, err := httpwire.ParseReadRetain(r.Header)
	return err
}

// readOptions are the explicit options of a GET, batch get or lookup: the
// read level withReadLevel put in r's context and the read's retain window
// (httpwire.HeaderRetain, checked by checkReadRetain: every block the read
// touches has its retain window re-armed).
func readOptions(r *http.Request) ctxstore.ReadOptions {
	d, _, _ := httpwire.ParseReadRetain(r.Header)
	return ctxstore.ReadOptions{Level: ctxstore.ReadLevelOf(r.Context()), Retain: d}
}
