package client

import (
	"context"

	"github.com/ctxtier/ctxtier/gateway/native/wire"
)

type linearizableKey struct{}

// WithLinearizable returns ctx making the reads called with it linearizable,
// on both the native Client and the HTTPClient: Get, GetInto, Stat (HTTP),
// Exists, Lookup, Describe and their batch forms see every write
// acknowledged, through any node of the cluster, before the call. A
// cluster node pays one round trip to the Raft leader for it, shared by
// its concurrent reads; without it a read answers from the node's own
// index, and a block just put through another node may read as not found
// for a moment. Writes ignore it. Over HTTP it sends X-Ctxtier-Read:
// linearizable; over the native protocol it sets the frame's
// linearizable flag (a server older than that flag closes the connection).
func WithLinearizable(ctx context.Context) context.Context {
	return context.WithValue(ctx, linearizableKey{}, true)
}

// linearizable reports whether ctx came from WithLinearizable.
func linearizable(ctx context.Context) bool {
	v, _ := ctx.Value(linearizableKey{}).(bool)
	return v
}

// frameFlags are the request flags of a native op called with ctx.
func frameFlags(ctx context.Context, op wire.Op) uint8 {
	if op.ReadOp() && linearizable(ctx) {
		return wire.FlagLinearizable
	}
	return 0
}
