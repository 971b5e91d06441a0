package cluster

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// shardEvent is one shard outcome delivered after a delay from the start.
type shardEvent struct {
	at  time.Duration
	blk int
	i   int
	err error
}

// TestCollectBatch: the batch collector gives each block the outcome
// collectShards would: every shard when all answer, a failure as the first
// error, and a straggler counted only within its own block's grace, which
// starts at that block's enough'th success, not another block's.
func TestCollectBatch(t *testing.T) {
	const grace = time.Second
	place := func(n int) []fsm.Shard {
		out := make([]fsm.Shard, n)
		for i := range out {
			out[i] = fsm.Shard{NodeID: fmt.Sprintf("n%d", i+1), Index: uint16(i)}
		}
		return out
	}
	refused := fmt.Errorf("%w: refused", block.ErrUnavailable)
	type want struct {
		ok        int
		firstIs   error // nil: no failure
		straggled bool  // the failure is "still writing"
	}
	tests := []struct {
		name    string
		shards  []int // per block: placement entries
		enough  []int // per block
		events  []shardEvent
		want    []want
		atLeast time.Duration // the collector may not return before this
	}{
		{
			name: "all answer", shards: []int{1, 1, 3}, enough: []int{1, 1, 2},
			events: []shardEvent{{0, 0, 0, nil}, {0, 1, 0, nil}, {0, 2, 2, nil}, {0, 2, 0, nil}, {0, 2, 1, nil}},
			want:   []want{{ok: 1}, {ok: 1}, {ok: 3}},
		},
		{
			name: "a failure", shards: []int{2, 1}, enough: []int{2, 1},
			events: []shardEvent{{0, 0, 1, refused}, {0, 1, 0, nil}, {0, 0, 0, nil}},
			want:   []want{{ok: 1, firstIs: block.ErrUnavailable}, {ok: 1}},
		},
		{
			// Block 0 reaches enough at once (grace ends at 1 s), block 1
			// at 0.5 s (grace ends at 1.5 s); both stragglers answer at
			// 1.25 s: block 1 keeps its, block 0 does not.
			name: "graces per block", shards: []int{3, 3}, enough: []int{2, 2},
			events: []shardEvent{
				{0, 0, 0, nil}, {0, 0, 1, nil}, {0, 1, 0, nil},
				{grace / 2, 1, 1, nil},
				{grace * 5 / 4, 0, 2, nil}, {grace * 5 / 4, 1, 2, nil},
			},
			want:    []want{{ok: 2, firstIs: block.ErrUnavailable, straggled: true}, {ok: 3}},
			atLeast: grace,
		},
		{
			name: "never enough waits for every answer", shards: []int{3}, enough: []int{3},
			events: []shardEvent{{0, 0, 0, nil}, {0, 0, 1, refused}, {grace / 10, 0, 2, nil}},
			want:   []want{{ok: 2, firstIs: block.ErrUnavailable}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tallies := make([]*shardTally, len(tc.shards))
			var idx []int
			writes := 0
			for b, n := range tc.shards {
				tallies[b] = newShardTally(place(n), tc.enough[b])
				idx = append(idx, b)
				writes += n
			}
			results := make(chan batchShard, writes)
			start := time.Now()
			go func() {
				for _, e := range tc.events {
					time.Sleep(time.Until(start.Add(e.at)))
					results <- batchShard{e.blk, shardResult{e.i, e.err}}
				}
			}()
			collectBatch(results, tallies, idx, grace)
			if took := time.Since(start); took < tc.atLeast {
				t.Fatalf("collector returned after %v, before %v", took, tc.atLeast)
			}
			for b, w := range tc.want {
				ok, first := tallies[b].outcome()
				if len(ok) != w.ok {
					t.Errorf("block %d: %d shards written, want %d (%v)", b, len(ok), w.ok, first)
				}
				switch {
				case w.firstIs == nil && first != nil:
					t.Errorf("block %d: unexpected failure %v", b, first)
				case w.firstIs != nil && !errors.Is(first, w.firstIs):
					t.Errorf("block %d: failure %v, want %v", b, first, w.firstIs)
				}
				if straggled := first != nil && strings.Contains(first.Error(), "still writing"); straggled != w.straggled {
					t.Errorf("block %d: failure %v, straggler %v, want %v", b, first, straggled, w.straggled)
				}
			}
		})
	}
}
