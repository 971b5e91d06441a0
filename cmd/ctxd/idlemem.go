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
// the OS: when the in-flight budget has been used since the last look and
// is empty now, it runs debug.FreeOSMemory (a GC and a scavenge) twice (the
// request-buffer pools are sync.Pools, whose objects survive one GC in the
// victim cache), at most once per idleCheckEvery. Without it the runtime
// returns them over minutes. It runs until ctx ends.
func releaseIdleMemory(ctx context.Context, b *membudget.Budget, log *slog.Logger) {
	t := time.NewTicker(idleCheckEvery)
	defer t.Stop()
	var seen uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if acq := b.Acquired(); acq != seen && b.InUse() == 0 {
			seen = acq
			start := time.Now()
			debug.FreeOSMemory()
			debug.FreeOSMemory()
			log.Debug("returned idle request memory to the OS", "took", time.Since(start))
		}
	}
}
