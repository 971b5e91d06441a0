package ctxstore

import (
	"context"
	"fmt"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// ReadLevel chooses how fresh a read must be. A Get or Lookup takes it
// explicitly (ReadOptions.Level, Store.Read); the other reads (Stat, Exists,
// List, Descriptor, Locate and their batch forms) still find it in their
// context (WithReadLevel), where the HTTP API and ctxstore/object put it.
type ReadLevel uint8

// Read levels.
const (
	// ReadLocal answers from this node's own state: no network hop. In a
	// cluster a follower may be a moment behind the leader, so a block just
	// acknowledged through another node can read as not found.
	ReadLocal ReadLevel = iota
	// ReadLinearizable first makes this node's state current: it then
	// holds every write acknowledged anywhere before the call. In a cluster
	// that costs a round trip to the leader (see ReadSyncer).
	ReadLinearizable
)

// String is the level's wire name: "local" or "linearizable".
func (l ReadLevel) String() string {
	if l == ReadLinearizable {
		return "linearizable"
	}
	return "local"
}

// ParseReadLevel parses a wire name ("" is local); anything else is
// block.ErrInvalidArgument.
func ParseReadLevel(s string) (ReadLevel, error) {
	switch s {
	case "", "local":
		return ReadLocal, nil
	case "linearizable":
		return ReadLinearizable, nil
	}
	return ReadLocal, fmt.Errorf("%w: read level %q (want local or linearizable)", block.ErrInvalidArgument, s)
}

// ReadOptions are the explicit options of a Store read (Read, GetBatch,
// Lookup). The zero value reads at ReadLocal, looks the namespace up, has
// the tier verify the bytes and carries no agent hint.
type ReadOptions struct {
	// Level is how fresh the read must be.
	Level ReadLevel
	// Namespace is the key's namespace when the caller has already looked
	// it up in this request (the native server does, once per frame;
	// ctxstore/object does, for a key's slots); the zero value (or another
	// namespace than the key's) has the Store look it up. It is handed down
	// (block.GetOptions.Namespace), so no layer below looks it up again.
	Namespace block.Namespace
	// ReaderVerifies: the reader checks the bytes end to end
	// (block.GetOptions.ReaderVerifies).
	ReaderVerifies bool
	// Retain is the read's agent hint, a retain window re-armed on every
	// block the read touches (block.GetOptions.Retain); 0 for none.
	Retain time.Duration
}

type readLevelKey struct{}

// WithReadLevel returns ctx carrying level for the Store reads that take no
// ReadOptions (Stat, Exists, List, Descriptor, Locate, ExistsBatch) and for
// Get, which reads at the level its context carries. Writes ignore it.
func WithReadLevel(ctx context.Context, level ReadLevel) context.Context {
	return context.WithValue(ctx, readLevelKey{}, level)
}

// ReadLevelOf returns the level ctx carries (ReadLocal when none).
func ReadLevelOf(ctx context.Context) ReadLevel {
	l, _ := ctx.Value(readLevelKey{}).(ReadLevel)
	return l
}

// ReadSyncer is implemented by a Tier whose index is replicated
// (ctxstore/cluster's Backend). SyncRead returns once this node's view holds
// every write acknowledged, through any node, before the call. A tier
// without it has one writer and is always current.
type ReadSyncer interface {
	SyncRead(ctx context.Context) error
}

// Linearize prepares the reads made with ctx: when ctx asks for
// ReadLinearizable it syncs the tier once (ReadSyncer) and returns a ctx
// whose reads need no further sync, so a batch or a handler that reads many
// keys pays for one sync. Otherwise it returns ctx unchanged.
func (s *Store) Linearize(ctx context.Context) (context.Context, error) {
	if ReadLevelOf(ctx) != ReadLinearizable {
		return ctx, nil
	}
	if err := s.sync(ctx, ReadLinearizable); err != nil {
		return ctx, err
	}
	return WithReadLevel(ctx, ReadLocal), nil
}

// LinearizeOptions is Linearize for explicit options: at ReadLinearizable
// it syncs the tier once and returns opts at ReadLocal, so the reads made
// with them need no further sync.
func (s *Store) LinearizeOptions(ctx context.Context, opts ReadOptions) (ReadOptions, error) {
	if err := s.sync(ctx, opts.Level); err != nil {
		return opts, err
	}
	opts.Level = ReadLocal
	return opts, nil
}

// sync makes this node's view current when level asks for it.
func (s *Store) sync(ctx context.Context, level ReadLevel) error {
	if level != ReadLinearizable {
		return nil
	}
	if rs, ok := s.tier.(ReadSyncer); ok {
		return rs.SyncRead(ctx)
	}
	return nil
}
