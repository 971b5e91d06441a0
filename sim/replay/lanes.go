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
//     loop goes on. Before a read of hashes H, the loop waits for every
//     put in flight that carries a block of H (the last put of each
//     hash, pending). Puts of other blocks stay in flight during the read.
//
// A read's answer depends only on the blocks of H, so while the tier does
// not evict, every answer, and with them every hit, route and virtual
// time, equals the sequential mode's with calls that take no time: the run
// is deterministic. When the tier evicts, which block a concurrent put
// evicts first can depend on the order ctxd sees concurrent calls in.

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
}

// lanes are the shared-tier policy's lanes of a concurrent run.
type lanes struct {
	ls      []*lane
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
	l := &lanes{pending: map[uint64]*putJob{}, jobs: make([]*putJob, requests)}
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
	for _, h := range j.hashes {
		l.pending[h] = j
	}
	if l.since++; l.since >= 4096 {
		l.sweep()
	}
	l.of(w).jobs <- j
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

// await waits for every put in flight that carries one of hashes.
func (l *lanes) await(ctx context.Context, hashes []uint64) error {
	for _, h := range hashes {
		j, ok := l.pending[h]
		if !ok {
			continue
		}
		select {
		case <-j.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if j.err != nil {
			return j.err
		}
		delete(l.pending, h)
	}
	return nil
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
