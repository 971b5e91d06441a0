package clusterapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Membership calls (remove, drain) are idempotent: making one
// again after it committed changes nothing. The node that answers them
// relays them to the leader, so they can fail for a moment while
// leadership moves ("not the raft leader", "raft outcome unknown": 503,
// block.ErrUnavailable), and a reply can be lost after the change
// committed. The client makes such a call again, as an operator would
// re-run the command, instead of handing the 503 to the operator.
const (
	// membershipCalls bounds the calls of one membership change.
	membershipCalls = 5
	// membershipBackoff is the wait before the second call; it doubles
	// before each further one (0.2 + 0.4 + 0.8 + 1.6 s at most in all).
	membershipBackoff = 200 * time.Millisecond
)

// retryMembership makes call, and makes it again while it fails with
// block.ErrUnavailable, at most membershipCalls times in all, waiting
// membershipBackoff (doubling) in between. Any other error, the last
// ErrUnavailable, or ctx's end is returned. When gone is set and a call
// after an ErrUnavailable answers block.ErrNotFound, the change an earlier
// call asked for has taken effect (its reply was lost), and the result is
// nil: remove uses it, since a removed member is no longer found.
func retryMembership(ctx context.Context, what string, gone bool, call func() error) error {
	wait := membershipBackoff
	var last error
	for try := 1; ; try++ {
		err := call()
		switch {
		case err == nil:
			return nil
		case gone && last != nil && errors.Is(err, block.ErrNotFound):
			return nil
		case !errors.Is(err, block.ErrUnavailable) || try == membershipCalls:
			if last != nil {
				return fmt.Errorf("%s (call %d of %d): %w", what, try, membershipCalls, err)
			}
			return err
		}
		last = err
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s: %w (last answer: %w)", what, ctx.Err(), err)
		case <-t.C:
		}
		wait *= 2
	}
}
