package resp

import (
	"fmt"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Config configures a Server.
type Config struct {
	// Addr is where ListenAndServe listens.
	Addr string
	// Databases maps a SELECT index to a namespace: Databases[0] is the
	// namespace of database 0, where every connection starts.
	Databases []string
	// MaxBulk bounds one argument (a value's bytes); longer ones are read,
	// dropped and answered with an error. A namespace's own max block size
	// (less the record header and key) may be smaller.
	MaxBulk int64
	// MaxRequest bounds one request's arguments together (MSET of many values).
	MaxRequest int64
	// MaxDrop bounds a bulk the server reads and drops; a longer declared
	// length is a protocol error and closes the connection.
	MaxDrop int64
	// MaxArgs bounds the arguments of one request.
	MaxArgs int
	// MaxConns bounds open connections; the next one is answered with an
	// error and closed.
	MaxConns int
	// IdleTimeout closes a connection with no request for this long (0: never, as Redis).
	IdleTimeout time.Duration
	// ReadTimeout bounds reading the rest of a request once its first byte
	// arrived (a slow sender), 0 for none.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing the replies to a batch of requests (a
	// client that does not read), 0 for none. The deadline is moved at most
	// once per quarter of it, so a batch has between 3/4 of WriteTimeout
	// and WriteTimeout.
	WriteTimeout time.Duration
	// BudgetWait bounds how long a request that already holds part of the
	// in-flight budget (WithBudget) waits for more (an MSET of several
	// large values); past it the request is dropped with an error. A
	// request's first reservation waits without bound.
	BudgetWait time.Duration
}

// DefaultConfig returns the defaults: 127.0.0.1:7405, database 0 is the
// "default" namespace, 64 MiB values, 256 MiB requests, bulks up to 1 GiB
// dropped with an error, a million arguments, 16384 connections, no idle
// timeout, 30 s to finish reading a request or writing its replies, 5 s for
// a request holding in-flight budget to get more.
func DefaultConfig() Config {
	return Config{
		Addr:         "127.0.0.1:7405",
		Databases:    []string{block.DefaultNamespace},
		MaxBulk:      block.DefaultMaxBlockSize,
		MaxRequest:   256 << 20,
		MaxDrop:      1 << 30,
		MaxArgs:      1 << 20,
		MaxConns:     16384,
		ReadTimeout:  30 * time.Second,
		WriteTimeout: 30 * time.Second,
		BudgetWait:   5 * time.Second,
	}
}

// Validate checks the configuration; errors wrap block.ErrInvalidArgument.
func (c Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: resp config: %s", block.ErrInvalidArgument, fmt.Sprintf(format, a...))
	}
	switch {
	case len(c.Databases) == 0 || len(c.Databases) > 1024:
		return bad("%d databases: want 1..1024", len(c.Databases))
	case c.MaxBulk < 1 || c.MaxBulk > block.HardMaxBlockSize:
		return bad("MaxBulk %d out of range 1..%d", c.MaxBulk, block.HardMaxBlockSize)
	case c.MaxRequest < c.MaxBulk:
		return bad("MaxRequest %d below MaxBulk %d", c.MaxRequest, c.MaxBulk)
	case c.MaxDrop < c.MaxBulk:
		return bad("MaxDrop %d below MaxBulk %d", c.MaxDrop, c.MaxBulk)
	case c.MaxArgs < 3 || c.MaxArgs > 1<<24:
		return bad("MaxArgs %d out of range 3..16777216", c.MaxArgs)
	case c.MaxConns < 1:
		return bad("MaxConns %d must be positive", c.MaxConns)
	case c.IdleTimeout < 0 || c.ReadTimeout < 0 || c.WriteTimeout < 0:
		return bad("timeouts must not be negative")
	case c.BudgetWait <= 0:
		return bad("BudgetWait %v must be positive", c.BudgetWait)
	}
	for i, ns := range c.Databases {
		if err := block.ValidNamespaceName(ns); err != nil {
			return bad("database %d: %v", i, err)
		}
	}
	return nil
}

func (c Config) limits() Limits {
	return Limits{MaxBulk: c.MaxBulk, MaxRequest: c.MaxRequest, MaxDrop: c.MaxDrop, MaxArgs: c.MaxArgs}
}
