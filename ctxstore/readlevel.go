package ctxstore

import (
	"context"
	"fmt"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// ReadLevel chooses how fresh a read must be. It travels in the context of
// a Store call (WithReadLevel), so the Store API keeps its signatures and
// every wire surface sets it the same way.
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

type readLevelKey struct{}

// WithReadLevel returns ctx carrying level for the Store reads made with it
// (Get, Stat, Exists, Lookup, List, Descriptor and their batch forms).
// Writes ignore it.
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
	if rs, ok := s.tier.(ReadSyncer); ok {
		if err := rs.SyncRead(ctx); err != nil {
			return ctx, err
		}
	}
	return WithReadLevel(ctx, ReadLocal), nil
}
