package weights

import (
	"context"
	"fmt"
)

// Sink takes the verified chunks of a streamed checkpoint: b holds f's
// bytes at off. It is called from several goroutines at once and b is
// reused once it returns.
type Sink func(f File, off int64, b []byte) error

// Stream reads model's whole checkpoint from the tier without writing it
// to disk: every chunk of every file is fetched (ranged GETs, Parallel at a
// time, failing over between endpoints like Pull), checked against the
// manifest's digest (Config.Verify) and handed to sink (nil discards the verified bytes).
// It is what a loader filling memory does, and what `ctxbench weights`
// measures.
func (c *Client) Stream(ctx context.Context, model string, sink Sink, progress *Progress) (PullStats, error) {
	var st PullStats
	m, progress, err := c.begin(ctx, model, progress)
	if err != nil {
		return st, err
	}
	todo := make([][]int, len(m.Files))
	for fi, f := range m.Files {
		st.FilesFetched++
		todo[fi] = make([]int, len(f.Chunks))
		for i := range todo[fi] {
			todo[fi][i] = i
		}
	}
	err = c.fetchPlanned(ctx, m, todo, func(seg segment) error {
		f := m.Files[seg.file]
		return c.fetchChunks(ctx, m, f, seg.chunks, progress, &st, func(_ int, off int64, b []byte) error {
			if sink == nil {
				return nil
			}
			if err := sink(f, off, b); err != nil {
				return fmt.Errorf("weights: stream %s at %d: %w", f.Path, off, err)
			}
			return nil
		})
	})
	return st, err
}
