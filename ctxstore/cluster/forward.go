package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// Limits of one coalesced forward (forwardQueue).
const (
	fwdInflight = 4       // forwards running at once per follower
	fwdMaxOps   = 4096    // operations per forward (a larger proposal travels alone)
	fwdMaxBytes = 1 << 20 // encoded operations per forward, well under the leader's body bound
)

// forwardQueue coalesces a follower's concurrent index proposals into
// shared forwards to the leader, the follower's half of group commit: each
// forward is an HTTP round trip on both nodes, and a node taking many puts
// at once (each batch put proposes once) would otherwise send one per
// proposal. Up to fwdInflight forwards run at once, so a lone proposal goes
// out at once; one that arrives while they all run waits for the next free
// one, which takes every proposal queued meanwhile (up to fwdMaxOps and
// fwdMaxBytes) as one CmdIndex command. The leader's batcher commits it as
// it would commit their concatenation, and each caller gets back its own
// operations' results. An error of the forward is every caller's: each
// retries on its own (Backend.propose), as every index operation is
// idempotent.
type forwardQueue struct {
	// send forwards body, a CmdIndex command of n operations, and returns
	// their results.
	send    func(ctx context.Context, body []byte, n int) ([]fsm.OpResult, error)
	timeout time.Duration // bounds one forward
	// observe is told the operations of each forward sent.
	observe func(ops int)

	mu      sync.Mutex
	running int
	queue   []*fwdCall
	stopped bool
}

type fwdCall struct {
	ctx  context.Context
	ops  []byte // encoded back to back with fsm.AppendOp
	n    int
	done chan struct{}
	res  []fsm.OpResult
	err  error
}

func newForwardQueue(timeout time.Duration, send func(context.Context, []byte, int) ([]fsm.OpResult, error), observe func(int)) *forwardQueue {
	return &forwardQueue{send: send, timeout: timeout, observe: observe}
}

// do forwards ops and returns their results. Each op is validated here, so
// one caller's malformed op cannot fail the others sharing its forward.
// When ctx ends first, the outcome is unknown (block.ErrUnavailable).
func (q *forwardQueue) do(ctx context.Context, ops []fsm.Op) ([]fsm.OpResult, error) {
	if len(ops) == 0 {
		return nil, nil
	}
	var enc []byte
	for _, o := range ops {
		if err := o.Validate(); err != nil {
			return nil, err
		}
		enc = fsm.AppendOp(enc, o)
	}
	c := &fwdCall{ctx: ctx, ops: enc, n: len(ops), done: make(chan struct{})}
	q.mu.Lock()
	if q.stopped {
		q.mu.Unlock()
		return nil, fmt.Errorf("%w: cluster backend closed", block.ErrClosed)
	}
	q.queue = append(q.queue, c)
	if q.running < fwdInflight {
		q.running++
		go q.run()
	}
	q.mu.Unlock()
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: forwarding to the leader: %v (outcome unknown)", block.ErrUnavailable, ctx.Err())
	}
}

// stop fails the calls still queued and every later one; forwards already
// sent finish.
func (q *forwardQueue) stop() {
	q.mu.Lock()
	q.stopped = true
	rest := q.queue
	q.queue = nil
	q.mu.Unlock()
	for _, c := range rest {
		c.err = fmt.Errorf("%w: cluster backend closed", block.ErrClosed)
		close(c.done)
	}
}

// run sends forwards until the queue is empty.
func (q *forwardQueue) run() {
	for {
		q.mu.Lock()
		batch := q.take()
		if len(batch) == 0 {
			q.running--
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		q.forward(batch)
	}
}

// take removes the next forward's calls from the queue: the first one
// always, then as many as fit its limits. The caller holds mu.
func (q *forwardQueue) take() []*fwdCall {
	n, size, k := 0, 0, 0
	for _, c := range q.queue {
		if k > 0 && (n+c.n > fwdMaxOps || size+len(c.ops) > fwdMaxBytes) {
			break
		}
		n, size, k = n+c.n, size+len(c.ops), k+1
	}
	batch := q.queue[:k:k]
	q.queue = q.queue[k:]
	if len(q.queue) == 0 {
		q.queue = nil // let the backing array go
	}
	return batch
}

// forward sends the calls whose callers still wait as one command and
// answers each.
func (q *forwardQueue) forward(batch []*fwdCall) {
	live := batch[:0]
	n, size := 0, 0
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.err = fmt.Errorf("%w: %v", block.ErrUnavailable, err)
			close(c.done)
			continue
		}
		live = append(live, c)
		n, size = n+c.n, size+len(c.ops)
	}
	if len(live) == 0 {
		return
	}
	ops := make([]byte, 0, size)
	for _, c := range live {
		ops = append(ops, c.ops...)
	}
	q.observe(n)
	ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
	res, err := q.send(ctx, fsm.EncodeIndexEncoded(n, ops), n)
	cancel()
	if err == nil && len(res) != n {
		err = fmt.Errorf("%w: %d results for %d forwarded operations", block.ErrUnavailable, len(res), n)
	}
	off := 0
	for _, c := range live {
		if err != nil {
			c.err = err
		} else {
			c.res = res[off : off+c.n : off+c.n]
			off += c.n
		}
		close(c.done)
	}
}

// forwardIndex sends a CmdIndex command of n operations to the leader.
func (b *Backend) forwardIndex(ctx context.Context, body []byte, n int) ([]fsm.OpResult, error) {
	leader, ok := b.node.LeaderMember()
	if !ok || leader.ID == b.cfg.NodeID {
		return nil, raft.ErrNotLeader
	}
	out, err := b.fwd.Forward(ctx, leader, body)
	if err != nil {
		return nil, err
	}
	res, err := DecodeResults(out, n)
	if err == nil {
		b.own.note(res)
	}
	return res, err
}
