package ctxstore

import (
	"context"
	"errors"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// SyncedCatalog wraps a replicated catalog so that a namespace this node
// does not know yet is looked up once more after sync (a linearizable read
// barrier: the node's copy then holds every namespace committed before the
// call). A namespace created through another node is then usable here at
// once, instead of answering unknown until replication catches up. Only
// misses pay for the sync, bounded by timeout; a sync that fails leaves the
// miss as it was.
func SyncedCatalog(c Catalog, sync func(ctx context.Context) error, timeout time.Duration) Catalog {
	return &syncedCatalog{Catalog: c, sync: sync, timeout: timeout}
}

type syncedCatalog struct {
	Catalog
	sync    func(ctx context.Context) error
	timeout time.Duration
}

func (c *syncedCatalog) Namespace(name string) (block.Namespace, error) {
	ns, err := c.Catalog.Namespace(name)
	if err == nil || !errors.Is(err, block.ErrUnknownNamespace) || block.ValidNamespaceName(name) != nil {
		return ns, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if c.sync(ctx) != nil {
		return ns, err
	}
	return c.Catalog.Namespace(name)
}
