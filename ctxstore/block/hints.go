package block

import (
	"context"
	"fmt"
	"time"
)

// Reuse is an agent harness's hint of whether a block will be read again
// (Dynamo's agent hints call it cache control). The zero value is no hint.
type Reuse uint8

// Reuse hints. Never renumber: the values travel on the native wire.
const (
	// ReuseUnknown is no hint: the block is an ordinary block.
	ReuseUnknown Reuse = 0
	// ReuseNever marks a block that will not be read again (reasoning
	// tokens, generated output): it is evicted before any other block.
	ReuseNever Reuse = 1
	// ReuseSession marks a block of a session that will come back (a tool
	// call is running): within its retain window it is kept ahead of
	// unhinted blocks.
	ReuseSession Reuse = 2
	// ReuseShared marks a block shared across sessions (system prompt,
	// tool definitions): it lives in a higher eviction class than
	// ordinary blocks, and is retained like a session block.
	ReuseShared Reuse = 3
	// MaxReuse is the largest defined Reuse.
	MaxReuse = ReuseShared
)

var reuseNames = [...]string{"", "never", "session", "shared"}

// String is the hint's name ("" for ReuseUnknown).
func (r Reuse) String() string {
	if r <= MaxReuse {
		return reuseNames[r]
	}
	return fmt.Sprintf("reuse(%d)", uint8(r))
}

// ParseReuse reads a Reuse name: "", "never", "session" or "shared". Any
// other value is ErrInvalidArgument.
func ParseReuse(s string) (Reuse, error) {
	for i, n := range reuseNames {
		if s == n {
			return Reuse(i), nil
		}
	}
	return 0, fmt.Errorf("%w: reuse hint %q (want never, session or shared)", ErrInvalidArgument, s)
}

// MaxRetain bounds a retain window: the native wire carries it in
// milliseconds in a u32 (about 49.7 days).
const MaxRetain = time.Duration(1<<32-1) * time.Millisecond

// ValidateHints checks the agent hints of o: a defined Reuse, a retain
// window in [0, MaxRetain], and no retain window on a block that will never
// be read again. Errors wrap ErrInvalidArgument.
func (o PutOptions) ValidateHints() error {
	switch {
	case o.Reuse > MaxReuse:
		return fmt.Errorf("%w: reuse hint %d (defined: 0..%d)", ErrInvalidArgument, o.Reuse, MaxReuse)
	case o.Retain < 0:
		return fmt.Errorf("%w: negative retain window %v", ErrInvalidArgument, o.Retain)
	case o.Retain > MaxRetain:
		return fmt.Errorf("%w: retain window %v above the maximum %v", ErrInvalidArgument, o.Retain, MaxRetain)
	case o.Reuse == ReuseNever && o.Retain > 0:
		return fmt.Errorf("%w: a retain window on a block hinted reuse never", ErrInvalidArgument)
	}
	return nil
}

// HasHints reports whether o carries an agent hint (Reuse, Retain or
// Session).
func (o PutOptions) HasHints() bool {
	return o.Reuse != ReuseUnknown || o.Retain != 0 || o.Session != 0
}

// ValidateRetain checks a read's retain window (GetOptions.Retain): in
// (0, MaxRetain]. Errors wrap ErrInvalidArgument.
func ValidateRetain(d time.Duration) error {
	switch {
	case d <= 0:
		return fmt.Errorf("%w: read retain window %v must be positive", ErrInvalidArgument, d)
	case d > MaxRetain:
		return fmt.Errorf("%w: read retain window %v above the maximum %v", ErrInvalidArgument, d, MaxRetain)
	}
	return nil
}

// SessionReleaser is implemented by storage that can drop the retain
// windows of an agent session's blocks (PutOptions.Session) once the
// harness says the session ended: those blocks become the first eviction
// candidates, except blocks hinted ReuseShared. It returns how many blocks
// it released. Session 0 is no session and is ErrInvalidArgument.
type SessionReleaser interface {
	ReleaseSession(ctx context.Context, namespace string, session uint64) (int, error)
}
