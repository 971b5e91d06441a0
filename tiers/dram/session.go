package dram

import (
	"context"
	"fmt"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/tiers/policy"
	"github.com/zeebo/xxh3"
)

// hintPolicy is what a hint-aware policy (policy.Hinted) offers beyond
// policy.Policy: re-arming a block's retain window on a read, and releasing
// an agent session's blocks.
type hintPolicy interface {
	Retain(h policy.Handle, until int64)
	ReleaseSession(session uint64) int
}

// sessionKey names an agent session of a namespace for the policy: the
// harness's session id mixed with the namespace, so equal ids of two
// namespaces are two sessions (0 stays no session).
func sessionKey(ns string, session uint64) uint64 {
	if session == 0 {
		return 0
	}
	k := xxh3.HashString(ns) ^ (session * 0x9e3779b97f4a7c15)
	if k == 0 {
		k = 1
	}
	return k
}

// retainLocked re-arms the retain window of the tracked block h to end
// retain after now (a read's block.GetOptions.Retain), if the policy honours
// hints.
func (t *Tier) retainLocked(h uint32, now int64, retain time.Duration) {
	if retain <= 0 {
		return
	}
	if hp, ok := t.policy.(hintPolicy); ok {
		hp.Retain(policy.Handle(h), now+int64(retain))
	}
}

// Retain re-arms key's retain window to end d from now (a LOOKUP's read
// hint), without a read or a recency touch. A block not resident here is
// not an error: it reports false.
func (t *Tier) Retain(key block.Key, d time.Duration) bool {
	now := t.now().UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	h, ok := t.index[key]
	if t.closed || !ok || !t.entries.At(h).tracked {
		return false
	}
	t.setClockLocked(now)
	t.retainLocked(h, now, d)
	return true
}

// ReleaseSession implements block.SessionReleaser: the resident blocks
// put with session in namespace ns lose their retain windows and become
// the first eviction candidates (not the ones hinted shared). It costs a
// walk of that session's blocks only, and nothing under a policy that
// ignores hints.
func (t *Tier) ReleaseSession(_ context.Context, ns string, session uint64) (int, error) {
	if session == 0 {
		return 0, fmt.Errorf("%w: session 0 is no session", block.ErrInvalidArgument)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return 0, block.ErrClosed
	}
	hp, ok := t.policy.(hintPolicy)
	if !ok {
		return 0, nil
	}
	t.setClockLocked(t.now().UnixNano())
	return hp.ReleaseSession(sessionKey(ns, session)), nil
}
