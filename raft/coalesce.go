package raft

import (
	"context"
	"fmt"
	"sync"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Coalescer shares one run of a function among concurrent callers. A caller
// waits for a run that started after it arrived, so the result reflects
// everything that happened before its call, and one run serves every caller
// that arrived while the previous run was going. The leader's linearizable
// reads share Raft barriers through one; ctxstore/cluster shares a
// follower's read-index round trips to the leader through another.
type Coalescer struct {
	fn      func() (uint64, error)
	mu      sync.Mutex
	running bool
	next    *coalescedCall
}

type coalescedCall struct {
	done    chan struct{}
	v       uint64
	err     error
	callers int // callers waiting on this run (under Coalescer.mu)
}

// NewCoalescer returns a Coalescer of fn. fn runs in its own goroutine, at
// most one at a time, with no caller's context: it must bound itself.
func NewCoalescer(fn func() (uint64, error)) *Coalescer {
	return &Coalescer{fn: fn}
}

// Do returns the result of a run of fn that started after Do was called.
// When ctx ends first it returns block.ErrUnavailable (the run goes on for
// the other callers).
func (c *Coalescer) Do(ctx context.Context) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("%w: %v", block.ErrUnavailable, err)
	}
	c.mu.Lock()
	if c.next == nil {
		c.next = &coalescedCall{done: make(chan struct{})}
	}
	call := c.next
	call.callers++
	if !c.running {
		c.running = true
		c.next = nil
		go c.run(call)
	}
	c.mu.Unlock()
	select {
	case <-call.done:
		return call.v, call.err
	case <-ctx.Done():
		return 0, fmt.Errorf("%w: %v", block.ErrUnavailable, ctx.Err())
	}
}

// waiting returns how many callers wait for the run after the current one.
func (c *Coalescer) waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.next == nil {
		return 0
	}
	return c.next.callers
}

func (c *Coalescer) run(call *coalescedCall) {
	for call != nil {
		call.v, call.err = c.fn()
		close(call.done)
		c.mu.Lock()
		call, c.next = c.next, nil
		if call == nil {
			c.running = false
		}
		c.mu.Unlock()
	}
}
