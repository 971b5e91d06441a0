package replay

// Concurrent real calls (Config.Concurrency > 1).
//
// Ordering rule. A tier read of a request (the router's lookup when it
// arrives, the worker's lookup and fetch when it starts) at virtual time t
// sees every block put by a request that finished before t, in event order
// (ties broken as the event queue breaks them), and no block put by a
// request that finishes later. The event loop enforces it so:
//
//   - Reads are synchronous: the loop waits for their answers, which steer
//     the schedule (a fetched prefix is not computed), so no later put can
//     overtake an earlier read.
//   - Puts are asynchronous: each goes to its worker's lane, a goroutine
//     with its own client that makes that worker's puts in order, and the
//     loop goes on. Before a read, the loop waits for every put in flight
//     (OrderAll: each lane's last put), or with OrderBlocks only for those
//     that carry one of the read's hashes H (the last put of each hash,
//     pending), leaving puts of other blocks in flight during the read.
//
// A read's answer depends only on the blocks of H, so while the tier does
// not evict, every answer, and with them every hit, route and virtual
// time, equals the sequential mode's with calls that take no time, under
// either ordering: the run is deterministic. When the tier evicts, a put
// may evict a block of H: OrderAll keeps those evictions before the read
// (only the order of puts in flight together is left to ctxd), while
// OrderBlocks lets the read see blocks that a put still in flight would
// have evicted first.

import (
	"context"
	"sync"
	"time"
)

// putJob is one request's put, made on a lane.
type putJob struct {
	hashes    []uint64
	sizes     []int64
	parent    uint64
	hasParent bool
	// Set by the lane before done is closed.
	wire int64
	el   time.Duration
	err  error
	done chan struct{}
}

// lane makes one worker's puts, in order, on its own goroutine.
type lane struct {
	tio  *tierIO // the lane's client and put buffers (the lane goroutine only)
	read *tierIO // the same client and fetch buffers for the loop's reads
	jobs chan *putJob
	last *putJob // the last put queued (the loop only)
}

// lanes are the shared-tier policy's lanes of a concurrent run.
type lanes struct {
	ls      []*lane
	all     bool // OrderAll
	wg      sync.WaitGroup
	pending map[uint64]*putJob // the last put in flight of each hash
	jobs    []*putJob          // per request: its put, nil when none
	order   []int              // requests in the order they finished
	since   int                // puts since pending was last swept
	mu      sync.Mutex
	err     error // the first failed put
}

// laneQueue bounds the puts queued on one lane before the loop waits.
const laneQueue = 256

// newLanes starts n lanes over clients (lane i uses clients[i mod len];
// tier when clients is empty) for a run of requests requests.
func newLanes(ctx context.Context, cfg Config, now func() time.Time, tier TierClient, clients []TierClient, n, requests int) *lanes {
	l := &lanes{all: cfg.Ordering == OrderAll, pending: map[uint64]*putJob{}, jobs: make([]*putJob, requests)}
	for i := range n {
		cl := tier
		if len(clients) > 0 {
			cl = clients[i%len(clients)]
		}
		ln := &lane{tio: &tierIO{cfg: cfg, client: cl, now: now}, read: &tierIO{cfg: cfg, client: cl, now: now},
			jobs: make(chan *putJob, laneQueue)}
		l.ls = append(l.ls, ln)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for j := range ln.jobs {
				if err := ctx.Err(); err != nil {
					j.err = err
				} else {
					j.wire, j.el, j.err = ln.tio.put(ctx, j.hashes, j.sizes, j.parent, j.hasParent)
				}
				if j.err != nil {
					l.mu.Lock()
					if l.err == nil {
						l.err = j.err
					}
					l.mu.Unlock()
				}
				close(j.done)
			}
		}()
	}
	return l
}

// of returns worker w's lane.
func (l *lanes) of(w int) *lane { return l.ls[w%len(l.ls)] }

// failed returns the first put that failed, if any.
func (l *lanes) failed() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// put queues request i's put on worker w's lane.
func (l *lanes) put(w, i int, j *putJob) {
	j.done = make(chan struct{})
	l.jobs[i] = j
	if !l.all {
		for _, h := range j.hashes {
			l.pending[h] = j
		}
		if l.since++; l.since >= 4096 {
			l.sweep()
		}
	}
	ln := l.of(w)
	ln.last = j
	ln.jobs <- j
}

// sweep forgets the puts that have completed.
func (l *lanes) sweep() {
	l.since = 0
	for h, j := range l.pending {
		select {
		case <-j.done:
			delete(l.pending, h)
		default:
		}
	}
}

// await waits for what a read of hashes must see: every put in flight
// (OrderAll) or those that carry one of hashes.
func (l *lanes) await(ctx context.Context, hashes []uint64) error {
	if l.all {
		for _, ln := range l.ls {
			if j := ln.last; j != nil {
				if err := wait(ctx, j); err != nil {
					return err
				}
				ln.last = nil // a lane's puts run in order: all done
			}
		}
		return nil
	}
	for _, h := range hashes {
		j, ok := l.pending[h]
		if !ok {
			continue
		}
		if err := wait(ctx, j); err != nil {
			return err
		}
		delete(l.pending, h)
	}
	return nil
}

// wait waits for j and returns its error.
func wait(ctx context.Context, j *putJob) error {
	select {
	case <-j.done:
		return j.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close stops the lanes after their queued puts and returns the first
// failed put.
func (l *lanes) close() error {
	for _, ln := range l.ls {
		close(ln.jobs)
	}
	l.wg.Wait()
	return l.failed()
}

// settle completes the records of c's requests, in the order they
// finished, once every put has: each request's measured put is added to
// its own TTFT and E2E (virtual time did not include it), then the record
// joins the results.
func (l *lanes) settle(c *cluster) {
	for _, i := range l.order {
		rec := &c.recs[i]
		if j := l.jobs[i]; j != nil {
			rec.Put, rec.PutWireBytes = j.el.Seconds(), j.wire
			rec.TTFT += rec.Put
			rec.E2E += rec.Put
		}
		c.res.add(rec)
	}
}
