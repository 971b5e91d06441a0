// Package membudget is one budget of in-flight request bytes shared by every
// connection and surface of a node: a request body is read into memory only
// after its size was acquired from the budget, so slow senders (or many of
// them) hold at most the budget between them, and a sender that cannot get
// its bytes waits (its connection is not read: TCP pushes back) in arrival
// order.
package membudget

import (
	"context"
	"fmt"
	"sync/atomic"

	"golang.org/x/sync/semaphore"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Budget is a byte budget; a nil *Budget is unlimited.
type Budget struct {
	size     int64
	sem      *semaphore.Weighted
	inUse    atomic.Int64
	waits    atomic.Uint64
	acquired atomic.Uint64 // bytes ever acquired
}

// New returns a budget of size bytes.
func New(size int64) (*Budget, error) {
	if size < 1<<20 {
		return nil, fmt.Errorf("%w: in-flight budget %d: want at least 1 MiB", block.ErrInvalidArgument, size)
	}
	return &Budget{size: size, sem: semaphore.NewWeighted(size)}, nil
}

// Acquire waits until n bytes of the budget are free (FIFO), or ctx ends. A
// request larger than the whole budget takes all of it. release returns
// the bytes; call it exactly once.
func (b *Budget) Acquire(ctx context.Context, n int64) (release func(), err error) {
	if b == nil || n <= 0 {
		return func() {}, nil
	}
	n = min(n, b.size)
	if !b.sem.TryAcquire(n) {
		b.waits.Add(1)
		if err := b.sem.Acquire(ctx, n); err != nil {
			return nil, fmt.Errorf("%w: waiting for %d bytes of the in-flight budget: %w", block.ErrUnavailable, n, err)
		}
	}
	b.inUse.Add(n)
	b.acquired.Add(uint64(n))
	var done atomic.Bool
	return func() {
		if done.CompareAndSwap(false, true) {
			b.inUse.Add(-n)
			b.sem.Release(n)
		}
	}, nil
}

// Size is the budget in bytes (0 for nil: unlimited).
func (b *Budget) Size() int64 {
	if b == nil {
		return 0
	}
	return b.size
}

// InUse is the bytes held now.
func (b *Budget) InUse() int64 {
	if b == nil {
		return 0
	}
	return b.inUse.Load()
}

// Waits counts acquisitions that had to wait.
func (b *Budget) Waits() uint64 {
	if b == nil {
		return 0
	}
	return b.waits.Load()
}

// Acquired counts the bytes ever acquired (0 for nil).
func (b *Budget) Acquired() uint64 {
	if b == nil {
		return 0
	}
	return b.acquired.Load()
}
