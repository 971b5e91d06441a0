package ctxstore

import (
	"context"
	"fmt"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// ReadLevel chooses how fresh a read must be. Every Store read takes it
// explicitly, as ReadOptions.Level (Read, GetBatch, Lookup, Stat, Exists,
// ExistsBatch, List, Descriptor, Locate); no read finds it in its context.
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

// ReadOptions are the explicit options of every Store read. The zero value
// reads at ReadLocal, looks the namespace up, has the tier verify the bytes
// and carries no agent hint. Level and Namespace apply to every read;
// ReaderVerifies only to the reads that return bytes (Read, GetBatch);
// Retain only to Read, GetBatch and Lookup. The reads that return no bytes
// (Stat, Exists, ExistsBatch, List, Descriptor, Locate) ignore the fields
// that do not apply to them.
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

// ReadSyncer is implemented by a Tier whose index is replicated
// (ctxstore/cluster's Backend). SyncRead returns once this node's view holds
// every write acknowledged, through any node, before the call. A tier
// without it has one writer and is always current.
type ReadSyncer interface {
	SyncRead(ctx context.Context) error
}

// Linearize prepares a batch of reads made with opts: at ReadLinearizable
// it syncs the tier once (ReadSyncer) and returns opts at ReadLocal, so the
// reads made with them need no further sync and a batch, or a handler that
// reads many keys, pays for one sync. At ReadLocal it returns opts as they
// are.
func (s *Store) Linearize(ctx context.Context, opts ReadOptions) (ReadOptions, error) {
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
