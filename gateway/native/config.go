package native

import (
	"fmt"
	"math"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
)

// Config configures a Server.
type Config struct {
	// Addr is where ListenAndServe listens.
	Addr string
	// MaxBlockSize bounds one block's bytes (the namespace's own limit still applies).
	MaxBlockSize int64
	// MaxFrameSize bounds a request frame, header included. 0 derives it
	// from MaxBlockSize: one maximal block plus wire.FrameOverhead.
	MaxFrameSize int64
	// MaxResponseSize bounds a response frame; GET blocks past it answer TooLarge.
	MaxResponseSize int64
	// MaxBatch bounds the items of one request.
	MaxBatch int
	// MaxInFlight is how many responses a connection queues for writing
	// before the server stops reading that connection's requests.
	MaxInFlight int
	// HandshakeTimeout bounds the handshake.
	HandshakeTimeout time.Duration
	// IdleTimeout closes a connection with no request for this long (0: never).
	IdleTimeout time.Duration
	// ReadTimeout bounds reading one frame once its header arrived (0: none).
	ReadTimeout time.Duration
	// WriteTimeout bounds writing one response (0: none).
	WriteTimeout time.Duration
	// LeaseTTL bounds a DESCRIBE lease: it ends then even if the client never
	// releases it (a tier may end it sooner; the response says when).
	LeaseTTL time.Duration
	// MaxLeases bounds the leases one connection holds at once; DESCRIBE
	// items past it answer Unavailable until the client releases some.
	MaxLeases int
	// Sendfile sends GET payloads of file-backed blocks (the DRAM tier's
	// memory file) from the file with splice(2) through a pipe per
	// connection (sendfile(2) if the pipe cannot be made), so the server
	// never copies them through user space. Connections over TLS, and
	// blocks that are not in a file, are written with writev as when it is
	// off. Off by default: on the development machine (loopback, 4 KiB
	// shmem pages) it cost more server CPU per GB than writev and halved
	// throughput (docs/benchmarks.md, issue 22).
	Sendfile bool
}

// DefaultConfig returns the defaults: 64 MiB blocks, frames derived from
// them, 1 GiB responses, 1024 items a batch, 64 responses in flight per
// connection, 5 minute idle and 30 second read/write timeouts, descriptor
// leases of 30 s, at most 4096 of them per connection, sendfile off.
func DefaultConfig() Config {
	return Config{
		Addr:             "127.0.0.1:7400",
		MaxBlockSize:     block.DefaultMaxBlockSize,
		MaxResponseSize:  1 << 30,
		MaxBatch:         1024,
		MaxInFlight:      64,
		HandshakeTimeout: 10 * time.Second,
		IdleTimeout:      5 * time.Minute,
		ReadTimeout:      30 * time.Second,
		WriteTimeout:     30 * time.Second,
		LeaseTTL:         30 * time.Second,
		MaxLeases:        4096,
	}
}

// FrameLimit is the effective maximum request frame size.
func (c Config) FrameLimit() int64 {
	if c.MaxFrameSize > 0 {
		return c.MaxFrameSize
	}
	return c.MaxBlockSize + wire.FrameOverhead
}

// Validate checks the configuration; errors wrap block.ErrInvalidArgument.
func (c Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: native config: %s", block.ErrInvalidArgument, fmt.Sprintf(format, a...))
	}
	switch {
	case c.MaxBlockSize < block.MinBlockSize || c.MaxBlockSize > block.HardMaxBlockSize:
		return bad("MaxBlockSize %d out of range %d..%d", c.MaxBlockSize, block.MinBlockSize, block.HardMaxBlockSize)
	case c.MaxFrameSize < 0 || (c.MaxFrameSize > 0 && c.MaxFrameSize < c.MaxBlockSize+wire.FrameOverhead):
		return bad("MaxFrameSize %d must be 0 (derived) or at least MaxBlockSize+%d", c.MaxFrameSize, wire.FrameOverhead)
	case c.FrameLimit() > math.MaxUint32:
		return bad("MaxFrameSize %d above %d", c.FrameLimit(), uint64(math.MaxUint32))
	case c.MaxResponseSize < c.MaxBlockSize+wire.FrameOverhead || c.MaxResponseSize > math.MaxUint32:
		return bad("MaxResponseSize %d must be in MaxBlockSize+%d..%d", c.MaxResponseSize, wire.FrameOverhead, uint64(math.MaxUint32))
	case c.MaxBatch < 1 || c.MaxBatch > 1<<16:
		return bad("MaxBatch %d out of range 1..65536", c.MaxBatch)
	case c.MaxInFlight < 1 || c.MaxInFlight > 1<<12:
		return bad("MaxInFlight %d out of range 1..4096", c.MaxInFlight)
	case c.HandshakeTimeout <= 0:
		return bad("HandshakeTimeout must be positive")
	case c.IdleTimeout < 0 || c.ReadTimeout < 0 || c.WriteTimeout < 0:
		return bad("timeouts must not be negative")
	case c.LeaseTTL <= 0 || c.LeaseTTL > time.Duration(math.MaxUint32)*time.Millisecond:
		return bad("LeaseTTL %v out of range 1ms..%v", c.LeaseTTL, time.Duration(math.MaxUint32)*time.Millisecond)
	case c.MaxLeases < 1 || c.MaxLeases > 1<<20:
		return bad("MaxLeases %d out of range 1..1048576", c.MaxLeases)
	}
	return nil
}

func (c Config) limits() wire.Limits {
	return wire.Limits{
		MaxFrameSize:    uint32(c.FrameLimit()),
		MaxBlockSize:    uint32(c.MaxBlockSize),
		MaxBatch:        uint32(c.MaxBatch),
		MaxInFlight:     uint32(c.MaxInFlight),
		MaxResponseSize: uint32(c.MaxResponseSize),
	}
}
