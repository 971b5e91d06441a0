package blocktest

import (
	"context"
	"sync/atomic"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Syncing is a block.Storage made a ctxstore.ReadSyncer, as a cluster
// backend is: SyncRead counts the syncs a store asks for (a read at the
// linearizable level) and answers Err.
type Syncing struct {
	block.Storage
	// Err is what SyncRead returns; set it before the reads it is for.
	Err   error
	syncs atomic.Int64
}

// SyncRead counts the sync and returns Err.
func (s *Syncing) SyncRead(context.Context) error {
	s.syncs.Add(1)
	return s.Err
}

// Syncs is how many times SyncRead was called.
func (s *Syncing) Syncs() int64 { return s.syncs.Load() }
