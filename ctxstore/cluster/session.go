package cluster

import (
	"context"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// SessionPeers ends an agent session on every other live member, best
// effort (control.SessionFanout over the cluster's internal HTTP
// API): it reports nothing back, what failed is its own to count and log.
type SessionPeers interface {
	EndSessionOnPeers(ctx context.Context, ns string, session uint64)
}

type sessionPeersRef struct{ p SessionPeers }

// SetSessionPeers makes ReleaseSession end sessions on the other members
// through p too (nil: this node only).
func (b *Backend) SetSessionPeers(p SessionPeers) {
	if p == nil {
		b.sessions.Store(nil)
		return
	}
	b.sessions.Store(&sessionPeersRef{p})
}

// ReleaseSession implements block.SessionReleaser: it releases the session
// on this node's own tier stack, then (with SessionPeers set) on every
// other live member, so the copies they hold (replicas, shards) lose their
// retain windows too; it waits for those, each bounded by the fan-out's
// timeout. It returns the blocks released here (docs/protocol.md,
// END_SESSION).
func (b *Backend) ReleaseSession(ctx context.Context, ns string, session uint64) (int, error) {
	n, err := b.ReleaseLocalSession(ctx, ns, session)
	if err != nil {
		return n, err
	}
	if ref := b.sessions.Load(); ref != nil {
		ref.p.EndSessionOnPeers(ctx, ns, session)
	}
	return n, nil
}

// ReleaseLocalSession releases the session on this node's own tier stack
// only: what a member does when another one fans a session's end out to it.
func (b *Backend) ReleaseLocalSession(ctx context.Context, ns string, session uint64) (int, error) {
	r, ok := b.local.(block.SessionReleaser)
	if !ok {
		return 0, nil
	}
	return r.ReleaseSession(ctx, ns, session)
}
