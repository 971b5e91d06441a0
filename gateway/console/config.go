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
	// OverviewInterval is how often the overview (GET /ui/api/overview) is
	// built again while pages ask for it; requests are served the bytes
	// built last.
	OverviewInterval time.Duration
	// OverviewMaxAge is the oldest overview a request is served; an older
	// one (no page asked for OverviewIdle, so the refresh stopped) is
	// built again on the request.
	OverviewMaxAge time.Duration
	// OverviewIdle stops the refresh when no page has asked for the
	// overview for that long.
	OverviewIdle time.Duration
	// TrafficWindow is the shortest window the namespaces' traffic rates
	// are computed over.
	TrafficWindow time.Duration
	// PeerTimeout bounds a request to another member's console (its tiers
	// and charts).
	PeerTimeout time.Duration
	// MemberTimeout bounds the request for another member's traffic
	// counters in each overview build (the members are asked in parallel,
	// so a dead or slow member delays a build by at most this, and is
	// named as missing).
	MemberTimeout time.Duration
	// MaxBodyBytes bounds an action's JSON body.
	MaxBodyBytes int64
}

// DefaultConfig returns the defaults: a sample every 5 s for 15 minutes
// (180 samples), namespace usage reused for 5 s, the overview built every
// second while a page asked within 30 s (served up to 2 s old), traffic
// rates over 5 s or more, 2 s peer requests, 500 ms for a member's
// traffic counters.
func DefaultConfig() Config {
	return Config{
		SampleInterval:   5 * time.Second,
		Window:           15 * time.Minute,
		NamespaceTTL:     5 * time.Second,
		OverviewInterval: time.Second,
		OverviewMaxAge:   2 * time.Second,
		OverviewIdle:     30 * time.Second,
		TrafficWindow:    5 * time.Second,
		PeerTimeout:      2 * time.Second,
		MemberTimeout:    500 * time.Millisecond,
		MaxBodyBytes:     64 << 10,
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
	case c.OverviewInterval < 10*time.Millisecond:
		return bad("OverviewInterval %v must be at least 10ms", c.OverviewInterval)
	case c.OverviewMaxAge < c.OverviewInterval:
		return bad("OverviewMaxAge %v must be at least OverviewInterval %v", c.OverviewMaxAge, c.OverviewInterval)
	case c.OverviewIdle < c.OverviewInterval:
		return bad("OverviewIdle %v must be at least OverviewInterval %v", c.OverviewIdle, c.OverviewInterval)
	case c.TrafficWindow <= 0:
		return bad("TrafficWindow must be positive")
	case c.PeerTimeout <= 0:
		return bad("PeerTimeout must be positive")
	case c.MemberTimeout <= 0:
		return bad("MemberTimeout must be positive")
	case c.MaxBodyBytes < 1024:
		return bad("MaxBodyBytes %d must be at least 1024", c.MaxBodyBytes)
	}
	return nil
}

// samples is the ring's capacity.
func (c Config) samples() int { return int(c.Window / c.SampleInterval) }
