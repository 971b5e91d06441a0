package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// fakeLeader answers forwarded commands: each op's result carries its
// key's hash as the generation, so a caller can tell its own results.
type fakeLeader struct {
	gate     chan struct{} // each send takes one token before answering (nil: none)
	fail     error
	mu       sync.Mutex
	forwards []int // operations per forward, in order
	inflight atomic.Int32
	maxIn    atomic.Int32
}

func (l *fakeLeader) send(ctx context.Context, body []byte, n int) ([]fsm.OpResult, error) {
	in := l.inflight.Add(1)
	defer l.inflight.Add(-1)
	for {
		m := l.maxIn.Load()
		if in <= m || l.maxIn.CompareAndSwap(m, in) {
			break
		}
	}
	cmd, err := fsm.DecodeCommand(body)
	if err != nil || cmd.Type != fsm.CmdIndex || len(cmd.Ops) != n {
		return nil, fmt.Errorf("bad forward (%d ops for %d): %v", len(cmd.Ops), n, err)
	}
	l.mu.Lock()
	l.forwards = append(l.forwards, n)
	l.mu.Unlock()
	if l.gate != nil {
		select {
		case <-l.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if l.fail != nil {
		return nil, l.fail
	}
	out := make([]fsm.OpResult, n)
	for i, o := range cmd.Ops {
		out[i] = fsm.OpResult{Status: fsm.StatusCreated, Generation: o.Key.Hash}
	}
	return out, nil
}

func fwdOps(first uint64, n int) []fsm.Op {
	ops := make([]fsm.Op, n)
	for i := range ops {
		k := block.NewKey(block.DefaultNamespace, first+uint64(i))
		ops[i] = fsm.PutOp(k, fsm.Entry{Size: 1, Sum: 1, Placement: []fsm.Shard{{NodeID: "n1"}}})
	}
	return ops
}

// Proposals that arrive while every forward is running share the next
// ones, each caller gets exactly its own operations' results, no forward
// exceeds its limits and at most fwdInflight run at once.
func TestForwardQueueCoalesces(t *testing.T) {
	for _, tc := range []struct {
		name    string
		callers int
		ops     int
	}{
		{"small proposals", 40, 21},
		{"large proposals", 12, 1500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &fakeLeader{gate: make(chan struct{})}
			var observed atomic.Int64
			q := newForwardQueue(5*time.Second, l.send, func(n int) { observed.Add(int64(n)) })
			var wg sync.WaitGroup
			errs := make(chan error, tc.callers)
			for c := range tc.callers {
				wg.Go(func() {
					first := uint64(c) << 32
					res, err := q.do(context.Background(), fwdOps(first, tc.ops))
					if err != nil {
						errs <- err
						return
					}
					if len(res) != tc.ops || cap(res) != tc.ops {
						errs <- fmt.Errorf("caller %d: %d results (cap %d) for %d ops", c, len(res), cap(res), tc.ops)
						return
					}
					for i, r := range res {
						if r.Generation != first+uint64(i) {
							errs <- fmt.Errorf("caller %d: result %d is for key %x", c, i, r.Generation)
							return
						}
					}
				})
			}
			// Wait until every caller's ops are in a forward (held by the
			// gate) or queued, then answer.
			waitFor(t, func() bool {
				n := 0
				l.mu.Lock()
				for _, k := range l.forwards {
					n += k
				}
				l.mu.Unlock()
				q.mu.Lock()
				for _, c := range q.queue {
					n += c.n
				}
				q.mu.Unlock()
				return n == tc.callers*tc.ops
			})
			close(l.gate)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			l.mu.Lock()
			defer l.mu.Unlock()
			total := 0
			for _, n := range l.forwards {
				total += n
				if n > fwdMaxOps && n != tc.ops {
					t.Errorf("a forward of %d operations (limit %d)", n, fwdMaxOps)
				}
			}
			if total != tc.callers*tc.ops || observed.Load() != int64(total) {
				t.Fatalf("%d operations forwarded, %d observed, want %d", total, observed.Load(), tc.callers*tc.ops)
			}
			if m := l.maxIn.Load(); m > fwdInflight {
				t.Fatalf("%d forwards ran at once, limit %d", m, fwdInflight)
			}
			if tc.ops*2 <= fwdMaxOps && len(l.forwards) >= tc.callers {
				t.Fatalf("%d callers sent %d forwards: nothing coalesced (%v)", tc.callers, len(l.forwards), l.forwards)
			}
			t.Logf("%d callers, %d forwards: %v", tc.callers, len(l.forwards), l.forwards)
		})
	}
}

// busy starts fwdInflight callers one at a time, each once the previous
// one's forward is running (held by l's gate), so every runner is busy.
func busy(t *testing.T, q *forwardQueue, l *fakeLeader, wg *sync.WaitGroup) {
	t.Helper()
	for c := range fwdInflight {
		wg.Go(func() {
			if _, err := q.do(context.Background(), fwdOps(uint64(c)<<32, 1)); err != nil {
				t.Errorf("busy caller %d: %v", c, err)
			}
		})
		waitFor(t, func() bool { return l.inflight.Load() == int32(c+1) })
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

// A forward's error reaches every caller that shared it; a malformed op
// fails its own caller before anything is sent; a caller whose context
// ends while queued is answered and its ops are not sent; after stop,
// queued and new calls fail as closed.
func TestForwardQueueFailures(t *testing.T) {
	t.Run("forward error reaches every caller", func(t *testing.T) {
		boom := fmt.Errorf("%w: leader gone", block.ErrUnavailable)
		l := &fakeLeader{fail: boom}
		q := newForwardQueue(time.Second, l.send, func(int) {})
		var wg sync.WaitGroup
		for c := range 10 {
			wg.Go(func() {
				if _, err := q.do(context.Background(), fwdOps(uint64(c)<<32, 3)); !errors.Is(err, boom) {
					t.Errorf("caller %d: %v, want %v", c, err, boom)
				}
			})
		}
		wg.Wait()
	})
	t.Run("malformed op", func(t *testing.T) {
		l := &fakeLeader{}
		q := newForwardQueue(time.Second, l.send, func(int) {})
		ops := fwdOps(1, 2)
		ops[1].Key.Namespace = "Bad Name!"
		if _, err := q.do(context.Background(), ops); !errors.Is(err, block.ErrInvalidArgument) {
			t.Fatalf("malformed op: %v, want invalid argument", err)
		}
		if len(l.forwards) != 0 {
			t.Fatalf("%d forwards sent for a malformed proposal", len(l.forwards))
		}
	})
	t.Run("caller gives up while queued", func(t *testing.T) {
		l := &fakeLeader{gate: make(chan struct{})}
		q := newForwardQueue(5*time.Second, l.send, func(int) {})
		var wg sync.WaitGroup
		busy(t, q, l, &wg)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := q.do(ctx, fwdOps(99<<32, 5))
			done <- err
		}()
		time.Sleep(10 * time.Millisecond)
		cancel()
		if err := <-done; !errors.Is(err, block.ErrUnavailable) {
			t.Fatalf("cancelled caller: %v, want unavailable", err)
		}
		close(l.gate)
		wg.Wait()
		waitFor(t, func() bool { q.mu.Lock(); defer q.mu.Unlock(); return q.running == 0 })
		for _, n := range l.forwards {
			if n == 5 {
				t.Fatalf("the cancelled caller's ops were forwarded: %v", l.forwards)
			}
		}
	})
	t.Run("stop", func(t *testing.T) {
		l := &fakeLeader{gate: make(chan struct{})}
		q := newForwardQueue(5*time.Second, l.send, func(int) {})
		var wg sync.WaitGroup
		busy(t, q, l, &wg)
		for c := range 3 {
			wg.Go(func() {
				if _, err := q.do(context.Background(), fwdOps(uint64(c+100)<<32, 1)); !errors.Is(err, block.ErrClosed) {
					t.Errorf("queued caller %d: %v, want closed", c, err)
				}
			})
		}
		waitFor(t, func() bool { q.mu.Lock(); defer q.mu.Unlock(); return len(q.queue) == 3 })
		q.stop()
		close(l.gate)
		wg.Wait()
		if _, err := q.do(context.Background(), fwdOps(1, 1)); !errors.Is(err, block.ErrClosed) {
			t.Fatalf("after stop: %v, want closed", err)
		}
	})
}
