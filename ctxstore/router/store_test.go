package router_test

import (
	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/router"
)

// The store is one of the router's sources: it must keep satisfying these.
var (
	_ router.TierIndex  = (*ctxstore.Store)(nil)
	_ router.Pinner     = (*ctxstore.Store)(nil)
	_ router.Namespaces = (*ctxstore.Store)(nil)
)
