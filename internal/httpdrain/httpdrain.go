// Package httpdrain stops an http.Server without leaving a handler running
// behind it.
//
// http.Server.Shutdown returns when its context ends even if handlers are
// still running (a slow client being sent a large block), and Close closes
// the connections without waiting for their handlers. A handler that holds
// a DRAM lease (a Ref into the tier's mapped arena) must return before the
// tier unmaps it, or its next write from the arena faults. A Tracker counts
// the handlers in flight; its Shutdown drains gracefully, then closes the
// connections (so the handlers' reads and writes fail at once) and waits
// for the handlers to return.
package httpdrain

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// ErrHandlersRunning: handlers still ran when Shutdown stopped waiting.
var ErrHandlersRunning = errors.New("httpdrain: handlers still running")

// DefaultGrace is how long Shutdown waits for handlers once their
// connections are closed: long enough for a handler to see its write fail
// and release what it holds.
const DefaultGrace = 10 * time.Second

// Tracker counts the handlers in flight of the handlers it wrapped.
type Tracker struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0 while someone waits
}

// Wrap returns h counted by t.
func (t *Tracker) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.mu.Lock()
		t.n++
		t.mu.Unlock()
		defer t.done()
		h.ServeHTTP(w, r)
	})
}

func (t *Tracker) done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n--
	if t.n == 0 && t.idle != nil {
		close(t.idle)
		t.idle = nil
	}
}

// Running returns the number of handlers in flight.
func (t *Tracker) Running() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

// wait waits until no handler runs or ctx ends.
func (t *Tracker) wait(ctx context.Context) error {
	t.mu.Lock()
	if t.n == 0 {
		t.mu.Unlock()
		return nil
	}
	if t.idle == nil {
		t.idle = make(chan struct{})
	}
	ch := t.idle
	t.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %d after the connections closed", ErrHandlersRunning, t.Running())
	}
}

// Shutdown stops srv: gracefully until ctx ends (srv.Shutdown), then with
// its connections closed; either way it returns once no handler t wrapped
// runs, or after grace more when some still do. It returns srv.Shutdown's
// error (nil for a graceful stop), joined with ErrHandlersRunning when it
// gave up waiting.
func (t *Tracker) Shutdown(ctx context.Context, srv *http.Server, grace time.Duration) error {
	err := srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, srv.Close())
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	return errors.Join(err, t.wait(wctx))
}
