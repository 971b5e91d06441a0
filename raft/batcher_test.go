package raft

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// fakeFuture applies a command to an FSM after a delay, standing in for Raft.
type fakeFuture struct {
	done chan struct{}
	resp interface{}
	err  error
}

func (f *fakeFuture) Error() error          { <-f.done; return f.err }
func (f *fakeFuture) Response() interface{} { <-f.done; return f.resp }
func (f *fakeFuture) Index() uint64         { return 0 }

type fakeRaft struct {
	mu      sync.Mutex
	fsm     *fsm.FSM
	idx     uint64
	batches []int
	delay   time.Duration
	fail    error
}

func (r *fakeRaft) apply(cmd []byte) hraft.ApplyFuture {
	f := &fakeFuture{done: make(chan struct{})}
	c, err := fsm.DecodeCommand(cmd)
	if err != nil {
		panic(err)
	}
	r.mu.Lock()
	r.batches = append(r.batches, len(c.Ops))
	r.idx++
	idx := r.idx
	r.mu.Unlock()
	go func() {
		time.Sleep(r.delay)
		if r.fail != nil {
			f.err = r.fail
		} else {
			r.mu.Lock()
			f.resp = r.fsm.Apply(&hraft.Log{Index: idx, Type: hraft.LogCommand, Data: cmd})
			r.mu.Unlock()
		}
		close(f.done)
	}()
	return f
}

func TestBatcherCoalescesAndSplitsResults(t *testing.T) {
	tests := []struct {
		name string
		cfg  BatchConfig
	}{
		{"pipelined", BatchConfig{MaxOps: 64, MaxBytes: 1 << 20, MaxInflight: 1}},
		{"linger", BatchConfig{MaxOps: 64, MaxBytes: 1 << 20, MaxInflight: 2, Linger: 2 * time.Millisecond}},
		{"byte bound", BatchConfig{MaxOps: 1000, MaxBytes: 300, MaxInflight: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fr := &fakeRaft{fsm: fsm.New(quietLog()), delay: time.Millisecond}
			b := newBatcher(tc.cfg, fr.apply, func(err error) error { return err }, func(int) {})
			defer b.close()
			const callers = 300
			var wg sync.WaitGroup
			var bad, created0, conflict0 atomic.Int32
			var winner atomic.Int64
			for i := 0; i < callers; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					// Each caller puts its own key and re-puts key 0 with
					// its own sum: exactly one caller creates key 0, every
					// other one gets a conflict (different bytes).
					res, _, err := b.propose(context.Background(), []fsm.Op{putOp(uint64(i+1), uint32(i)), putOp(0, uint32(i))})
					if err != nil || len(res) != 2 || res[0].Status != fsm.StatusCreated {
						bad.Add(1)
						return
					}
					switch res[1].Status {
					case fsm.StatusCreated:
						created0.Add(1)
						winner.Store(int64(i))
					case fsm.StatusConflict:
						conflict0.Add(1)
					default:
						bad.Add(1)
					}
				}(i)
			}
			wg.Wait()
			if bad.Load() != 0 {
				t.Fatalf("%d callers got wrong results", bad.Load())
			}
			if created0.Load() != 1 || conflict0.Load() != callers-1 {
				t.Fatalf("key 0: %d created, %d conflicts, want 1 and %d", created0.Load(), conflict0.Load(), callers-1)
			}
			// The index holds the winner's entry for key 0.
			if e, ok := fr.fsm.Lookup(block.NewKey(block.DefaultNamespace, 0)); !ok || e.Sum != uint32(winner.Load()) {
				t.Fatalf("key 0 in the index: %+v %v, want the sum of caller %d", e, ok, winner.Load())
			}
			if fr.fsm.Len() != callers+1 {
				t.Fatalf("index has %d entries", fr.fsm.Len())
			}
			total := 0
			for _, n := range fr.batches {
				total += n
				if n > tc.cfg.MaxOps {
					t.Fatalf("batch of %d ops over MaxOps %d", n, tc.cfg.MaxOps)
				}
			}
			if total != 2*callers {
				t.Fatalf("%d ops sent, want %d", total, 2*callers)
			}
			if len(fr.batches) >= callers {
				t.Fatalf("%d log entries for %d proposals: no coalescing", len(fr.batches), callers)
			}
			t.Logf("%d proposals in %d log entries", callers, len(fr.batches))
		})
	}
}

func TestBatcherErrors(t *testing.T) {
	fr := &fakeRaft{fsm: fsm.New(quietLog()), fail: hraft.ErrLeadershipLost}
	mapErr := func(err error) error {
		if errors.Is(err, hraft.ErrLeadershipLost) {
			return fmt.Errorf("%w: %v", ErrOutcomeUnknown, err)
		}
		return err
	}
	b := newBatcher(BatchConfig{MaxOps: 8, MaxBytes: 1 << 20, MaxInflight: 1}, fr.apply, mapErr, func(int) {})
	if _, _, err := b.propose(context.Background(), []fsm.Op{putOp(1, 1)}); !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("leadership lost: %v", err)
	}
	if _, _, err := b.propose(context.Background(), []fsm.Op{{Kind: fsm.OpPut, Key: block.NewKey("default", 1)}}); !errors.Is(err, block.ErrInvalidArgument) {
		t.Fatalf("invalid op: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := b.propose(ctx, []fsm.Op{putOp(2, 2)}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	b.close()
	if _, _, err := b.propose(context.Background(), []fsm.Op{putOp(3, 3)}); !errors.Is(err, block.ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
}
