// Package catalogtest is a test helper for the namespace catalog: a
// ctxstore.Catalog that counts the namespace lookups made through it, so a
// test can check how often a request looks its namespace up.
package catalogtest

import (
	"sync/atomic"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Counting is a Catalog that counts its Namespace calls; every method is
// the wrapped catalog's. Safe for concurrent use.
type Counting struct {
	ctxstore.Catalog
	lookups atomic.Int64
}

// NewCounting wraps c.
func NewCounting(c ctxstore.Catalog) *Counting { return &Counting{Catalog: c} }

// Namespace counts the lookup and asks the wrapped catalog.
func (c *Counting) Namespace(name string) (block.Namespace, error) {
	c.lookups.Add(1)
	return c.Catalog.Namespace(name)
}

// Lookups is how many Namespace calls were made so far.
func (c *Counting) Lookups() int64 { return c.lookups.Load() }
