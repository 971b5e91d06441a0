package raft

import (
	"context"
	"fmt"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// batcher coalesces concurrent proposals into single CmdIndex log entries
// (group commit) and hands each caller back its own results.
type batcher struct {
	cfg      BatchConfig
	apply    func(cmd []byte) hraft.ApplyFuture
	mapErr   func(error) error
	observe  func(ops int)
	reqs     chan *request
	inflight chan struct{}
	quit     chan struct{}
	done     chan struct{}
}

type request struct {
	ctx context.Context
	ops []byte // encoded back to back with fsm.AppendOp
	n   int
	res chan result
}

type result struct {
	results []fsm.OpResult
	index   uint64
	err     error
}

func newBatcher(cfg BatchConfig, apply func([]byte) hraft.ApplyFuture, mapErr func(error) error, observe func(int)) *batcher {
	b := &batcher{
		cfg: cfg, apply: apply, mapErr: mapErr, observe: observe,
		reqs:     make(chan *request, cfg.MaxOps),
		inflight: make(chan struct{}, cfg.MaxInflight),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go b.loop()
	return b
}

// propose submits ops and waits for their results. On a context error
// after submission the outcome is unknown (ErrOutcomeUnknown).
func (b *batcher) propose(ctx context.Context, ops []fsm.Op) ([]fsm.OpResult, uint64, error) {
	if len(ops) == 0 {
		return nil, 0, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	var enc []byte
	for _, o := range ops {
		if err := o.Validate(); err != nil {
			return nil, 0, err
		}
		enc = fsm.AppendOp(enc, o)
	}
	r := &request{ctx: ctx, ops: enc, n: len(ops), res: make(chan result, 1)}
	select {
	case b.reqs <- r:
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	case <-b.quit:
		return nil, 0, fmt.Errorf("%w: raft node closed", block.ErrClosed)
	}
	select {
	case res := <-r.res:
		return res.results, res.index, res.err
	case <-ctx.Done():
		return nil, 0, fmt.Errorf("%w: %w", ErrOutcomeUnknown, ctx.Err())
	case <-b.done:
		select {
		case res := <-r.res:
			return res.results, res.index, res.err
		default:
			return nil, 0, fmt.Errorf("%w: raft node closed", block.ErrClosed)
		}
	}
}

func (b *batcher) close() {
	close(b.quit)
	<-b.done
}

func (b *batcher) loop() {
	defer close(b.done)
	var carry *request
	for {
		first := carry
		carry = nil
		if first == nil {
			select {
			case first = <-b.reqs:
			case <-b.quit:
				b.drain()
				return
			}
		}
		batch := []*request{first}
		ops, size := first.n, len(first.ops)
		full := func() bool { return ops >= b.cfg.MaxOps || size >= b.cfg.MaxBytes }
		add := func(r *request) bool {
			if ops+r.n > b.cfg.MaxOps || size+len(r.ops) > b.cfg.MaxBytes {
				carry = r
				return false
			}
			batch = append(batch, r)
			ops, size = ops+r.n, size+len(r.ops)
			return true
		}
		// Take what is already queued.
	greedy:
		for !full() && carry == nil {
			select {
			case r := <-b.reqs:
				add(r)
			default:
				break greedy
			}
		}
		// Optionally linger for more.
		if b.cfg.Linger > 0 && !full() && carry == nil {
			t := time.NewTimer(b.cfg.Linger)
		linger:
			for !full() && carry == nil {
				select {
				case r := <-b.reqs:
					add(r)
				case <-t.C:
					break linger
				}
			}
			t.Stop()
		}
		// Wait for a slot in the pipeline, accumulating meanwhile.
	slot:
		for {
			if full() || carry != nil {
				select {
				case b.inflight <- struct{}{}:
					break slot
				case <-b.quit:
					b.fail(batch, fmt.Errorf("%w: raft node closed", block.ErrClosed))
					if carry != nil {
						b.fail([]*request{carry}, fmt.Errorf("%w: raft node closed", block.ErrClosed))
					}
					b.drain()
					return
				}
			}
			select {
			case b.inflight <- struct{}{}:
				break slot
			case r := <-b.reqs:
				add(r)
			case <-b.quit:
				b.fail(batch, fmt.Errorf("%w: raft node closed", block.ErrClosed))
				b.drain()
				return
			}
		}
		b.send(batch)
	}
}

// send drops callers that gave up before their ops entered Raft, then
// applies the rest as one log entry and answers them when it commits.
func (b *batcher) send(batch []*request) {
	live := batch[:0]
	n, size := 0, 0
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.res <- result{err: err}
			continue
		}
		live = append(live, r)
		n += r.n
		size += len(r.ops)
	}
	if len(live) == 0 {
		<-b.inflight
		return
	}
	ops := make([]byte, 0, size)
	for _, r := range live {
		ops = append(ops, r.ops...)
	}
	f := b.apply(fsm.EncodeIndexEncoded(n, ops))
	b.observe(n)
	go func() {
		err := f.Error()
		<-b.inflight
		if err != nil {
			b.fail(live, b.mapErr(err))
			return
		}
		resp, ok := f.Response().(*fsm.Response)
		switch {
		case !ok:
			b.fail(live, fmt.Errorf("%w: raft returned %T", block.ErrUnavailable, f.Response()))
			return
		case resp.Err != nil:
			b.fail(live, resp.Err)
			return
		case len(resp.Results) != n:
			b.fail(live, fmt.Errorf("%w: %d results for %d ops", block.ErrUnavailable, len(resp.Results), n))
			return
		}
		off := 0
		for _, r := range live {
			r.res <- result{results: resp.Results[off : off+r.n : off+r.n], index: resp.Index}
			off += r.n
		}
	}()
}

func (b *batcher) fail(rs []*request, err error) {
	for _, r := range rs {
		r.res <- result{err: err}
	}
}

func (b *batcher) drain() {
	for {
		select {
		case r := <-b.reqs:
			b.fail([]*request{r}, fmt.Errorf("%w: raft node closed", block.ErrClosed))
		default:
			return
		}
	}
}
