package client

import (
	"context"
	"fmt"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// ReadDirectRun is ReadDirectBatch for a run of blocks, such as the prefix
// an engine fetches: keys are described in batches of batch keys, and the
// DESCRIBE of the next batch is sent before the current batch is copied, so
// its round trip overlaps the copies instead of adding to them. Each batch's
// leases are released (asynchronously, as ReadDirectBatch does) once it is
// copied. Every block goes through ReadLease, so a lease that ended, or a
// block whose pages were reused, is never returned as read: it is read with
// GET instead, in one GET batch at the end, like every other fallback.
// sizes and errs are per key as ReadDirectBatch gives them; err is the
// first frame-level error of any DESCRIBE or of the fallback GET.
func (c *Client) ReadDirectRun(ctx context.Context, keys []block.Key, bufs [][]byte, batch int) (sizes []int, errs []error, err error) {
	if len(bufs) != len(keys) {
		return nil, nil, fmt.Errorf("%w: %d buffers for %d keys", block.ErrInvalidArgument, len(bufs), len(keys))
	}
	if batch < 1 {
		return nil, nil, fmt.Errorf("%w: batch %d must be at least 1", block.ErrInvalidArgument, batch)
	}
	st := &c.direct
	if st.notColocated.Load() {
		st.fallbacks.Add(uint64(len(keys)))
		return c.GetBatchInto(ctx, keys, bufs)
	}
	n := len(keys)
	sizes = make([]int, n)
	errs = make([]error, n)
	var retry []int
	var next *pendingDescribe
	if n > 0 {
		next = c.startDescribe(ctx, keys[:min(batch, n)])
	}
	for lo := 0; lo < n; lo += batch {
		hi := min(lo+batch, n)
		leases, berrs, derr := c.waitDescribe(ctx, next)
		if hi < n {
			// The next batch's round trip runs while this one is copied.
			next = c.startDescribe(ctx, keys[hi:min(hi+batch, n)])
		}
		if derr != nil && err == nil {
			err = derr
		}
		copy(errs[lo:hi], berrs)
		retry = c.readLeases(leases, errs[lo:hi], bufs[lo:hi], sizes[lo:hi], lo, retry)
		c.ReleaseAsync(leases...)
	}
	if gerr := c.getFallbacks(ctx, keys, bufs, retry, sizes, errs); err == nil {
		err = gerr
	}
	return sizes, errs, err
}
