package main

import (
	"context"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/ctxtier/ctxtier/internal/membudget"
)

// idleCheckEvery is how often releaseIdleMemory looks at the budget.
const idleCheckEvery = 2 * time.Second

// releaseIdleMemory hands the request buffers of a finished burst back to
// the OS: once the in-flight budget has been used and then not touched for
// a whole idleCheckEvery (nothing acquired, nothing in use), it runs
// debug.FreeOSMemory (a GC and a scavenge) twice (the request-buffer pools
// are sync.Pools, whose objects survive one GC in the victim cache), once
// per burst. Without it the runtime returns them over minutes. A load that
// keeps acquiring never triggers it: an instant of zero in use between two
// requests is not idleness, and forcing GCs and scavenges then cost CPU on
// every interval (docs/benchmarks.md, "Where a native GET's CPU goes"). It
// runs until ctx ends.
func releaseIdleMemory(ctx context.Context, b *membudget.Budget, log *slog.Logger) {
	t := time.NewTicker(idleCheckEvery)
	defer t.Stop()
	var w idleWatch
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if w.due(b.Acquired(), b.InUse()) {
			start := time.Now()
			debug.FreeOSMemory()
			debug.FreeOSMemory()
			log.Debug("returned idle request memory to the OS", "took", time.Since(start))
		}
	}
}

// idleWatch decides, one look at a time, when a burst of use of the budget
// has ended: the budget's acquired count did not move since the previous
// look and nothing is in use, and there was use since the last release.
type idleWatch struct {
	last     uint64 // the acquired count at the previous look
	released uint64 // the acquired count at the last release
}

// due records one look (the budget's acquired count and bytes in use) and
// reports whether to release memory now.
func (w *idleWatch) due(acquired uint64, inUse int64) bool {
	quiet := acquired == w.last && inUse == 0
	w.last = acquired
	if !quiet || acquired == w.released {
		return false
	}
	w.released = acquired
	return true
}
