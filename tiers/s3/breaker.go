package s3

import (
	"sync"
	"time"
)

// breaker is a circuit breaker over S3 requests: after threshold consecutive
// failures it opens for cooldown, during which gets fail at once instead of
// waiting on a server that is down; then one probe is let through, and its
// outcome closes or re-opens the circuit.
type breaker struct {
	threshold int
	cooldown  time.Duration
	now       func() time.Time

	mu       sync.Mutex
	fails    int
	openTill time.Time
	probing  bool
}

// allow reports whether a request may go to S3 now.
func (b *breaker) allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fails < b.threshold {
		return true
	}
	if b.now().Before(b.openTill) || b.probing {
		return false
	}
	b.probing = true // half-open: one probe at a time
	return true
}

// success closes the circuit.
func (b *breaker) success() {
	b.mu.Lock()
	b.fails, b.probing = 0, false
	b.mu.Unlock()
}

// failure counts a failed request, (re)opening the circuit at the threshold.
func (b *breaker) failure() {
	b.mu.Lock()
	b.fails++
	b.probing = false
	if b.fails >= b.threshold {
		b.openTill = b.now().Add(b.cooldown)
	}
	b.mu.Unlock()
}

// open reports whether the circuit is open (requests are refused).
func (b *breaker) open() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.fails >= b.threshold && b.now().Before(b.openTill)
}
