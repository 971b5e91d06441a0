package cluster

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// Read-your-writes through one node. A follower's write is committed by the
// leader; the follower's own FSM applies it a moment later (when the leader's
// next AppendEntries carries the commit index). Without care, a client that
// puts through a follower and reads back through the same follower could
// miss its own block. So each forwarded write raises a watermark (the log
// index its results carry); a local read that misses while this node's FSM
// is below the watermark waits for the FSM to reach it, then looks again.
// Hits never wait, and neither do misses once the node has caught up; reads
// through other nodes stay local (ask for linearizable reads for those).

// ownWriteWait bounds how long a miss waits for this node's own writes.
// An election between the leader's commit and this node learning of it
// can take seconds under load (CI saw a follower miss its own acknowledged
// put after waiting 1 s); only a miss with an own write not applied yet
// waits, and such a miss is then most likely that write.
const ownWriteWait = 5 * time.Second

// ownWrites is this node's own-write watermark: the highest log index of
// a write it forwarded to the leader.
type ownWrites struct {
	node *raft.Node
	met  *metrics
	mark atomic.Uint64
}

// note raises the watermark to the largest index in res.
func (w *ownWrites) note(res []fsm.OpResult) {
	var top uint64
	for _, r := range res {
		top = max(top, r.Generation)
	}
	for {
		cur := w.mark.Load()
		if top <= cur || w.mark.CompareAndSwap(cur, top) {
			return
		}
	}
}

// lookup reads key's index entry; on a miss while this node's own writes
// are not applied yet, it waits for them (bounded) and looks again.
func (w *ownWrites) lookup(ctx context.Context, key block.Key) (fsm.Entry, bool) {
	f := w.node.FSM()
	e, ok := f.Lookup(key)
	if ok {
		return e, true
	}
	mark := w.mark.Load()
	if mark == 0 || f.AppliedIndex() >= mark {
		return e, false
	}
	wctx, cancel := context.WithTimeout(ctx, ownWriteWait)
	defer cancel()
	if w.node.WaitApplied(wctx, mark) != nil {
		return e, false
	}
	w.met.ownWriteWaits.Inc()
	return w.node.FSM().Lookup(key)
}
