package console

import (
	"fmt"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Config configures the console.
type Config struct {
	// SampleInterval is how often the Sampler records the node's tier
	// numbers for the charts.
	SampleInterval time.Duration
	// Window is how much history the charts keep; the ring holds
	// Window/SampleInterval samples.
	Window time.Duration
	// NamespaceTTL is how long the namespace usage (a scan of this node's
	// index) is reused before it is computed again. The scan runs only
	// when a page asks for it.
	NamespaceTTL time.Duration
	// PeerTimeout bounds a request to another member's console (its tiers
	// and charts).
	PeerTimeout time.Duration
	// MaxBodyBytes bounds an action's JSON body.
	MaxBodyBytes int64
}

// DefaultConfig returns the defaults: a sample every 5 s for 15 minutes
// (180 samples), namespace usage reused for 5 s, 2 s peer requests.
func DefaultConfig() Config {
	return Config{
		SampleInterval: 5 * time.Second,
		Window:         15 * time.Minute,
		NamespaceTTL:   5 * time.Second,
		PeerTimeout:    2 * time.Second,
		MaxBodyBytes:   64 << 10,
	}
}

// Validate checks the configuration; errors wrap block.ErrInvalidArgument.
func (c Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: console: %s", block.ErrInvalidArgument, fmt.Sprintf(format, a...))
	}
	switch {
	case c.SampleInterval < 100*time.Millisecond:
		return bad("SampleInterval %v must be at least 100ms", c.SampleInterval)
	case c.Window < c.SampleInterval:
		return bad("Window %v must be at least SampleInterval %v", c.Window, c.SampleInterval)
	case c.Window/c.SampleInterval > 100_000:
		return bad("Window/SampleInterval %d exceeds 100000 samples", c.Window/c.SampleInterval)
	case c.NamespaceTTL < 0:
		return bad("NamespaceTTL must not be negative")
	case c.PeerTimeout <= 0:
		return bad("PeerTimeout must be positive")
	case c.MaxBodyBytes < 1024:
		return bad("MaxBodyBytes %d must be at least 1024", c.MaxBodyBytes)
	}
	return nil
}

// samples is the ring's capacity.
func (c Config) samples() int { return int(c.Window / c.SampleInterval) }
