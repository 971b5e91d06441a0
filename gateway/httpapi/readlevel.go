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
