package tiers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/blocktest"
	"github.com/ctxtier/ctxtier/tiers/dram"
)

// gatedLower counts lower-tier reads and holds each until gate closes (or
// fails it with failGets), so concurrent Gets pile up behind the first.
type gatedLower struct {
	*blocktest.Tier
	gets     atomic.Int64
	gate     chan struct{}
	failGets error
}

func (l *gatedLower) Get(ctx context.Context, k block.Key, opts block.GetOptions) (*block.Ref, error) {
	l.gets.Add(1)
	select {
	case <-l.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if l.failGets != nil {
		return nil, l.failGets
	}
	return l.Tier.Get(ctx, k, opts)
}

// refuseAll is a promotion admission that admits nothing.
type refuseAll struct{}

func (refuseAll) Record(uint64)     {}
func (refuseAll) Admit(uint64) bool { return false }

// TestConcurrentGetsShareOneLowerRead: readers of a block that only the
// lower tier holds cause one lower-tier read and one promotion when the
// promotion is admitted; when it is not (or the shared read fails), each
// reader reads the lower tier itself, and every reader gets the block.
func TestConcurrentGetsShareOneLowerRead(t *testing.T) {
	const readers = 8
	tests := []struct {
		name          string
		refuse        bool
		wantGets      int64
		wantShared    uint64
		wantPromotion uint64
	}{
		{name: "promoted once, shared", wantGets: 1, wantShared: readers - 1, wantPromotion: 1},
		{name: "promotion refused, each reads", refuse: true, wantGets: readers, wantShared: 0, wantPromotion: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := newMemLower()
			d := data(7)
			if err := mem.Put(context.Background(), k(7), d, block.Checksum(d), block.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			low := &gatedLower{Tier: mem, gate: make(chan struct{})}
			cfg := DefaultConfig()
			if tc.refuse {
				cfg.PromoteAdmission = refuseAll{}
			}
			dc := dram.DefaultConfig()
			dc.Capacity = 8 * bs
			m, err := New(cfg, dc, low, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			errs := make(chan error, readers)
			var wg sync.WaitGroup
			for range readers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ref, err := m.Get(context.Background(), k(7), block.GetOptions{})
					if err != nil {
						errs <- err
						return
					}
					if string(ref.Data) != string(d) {
						errs <- fmt.Errorf("read other bytes")
					}
					ref.Release()
				}()
			}
			// Every reader is in: one reads the lower tier, the rest wait on it.
			waitFor(t, func() bool { return low.gets.Load() == 1 && m.joins.Load() == readers-1 })
			close(low.gate)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			st := m.Stats()
			if low.gets.Load() != tc.wantGets || st.SharedReads != tc.wantShared || st.Promotions != tc.wantPromotion {
				t.Errorf("lower reads %d, shared %d, promotions %d; want %d, %d, %d",
					low.gets.Load(), st.SharedReads, st.Promotions, tc.wantGets, tc.wantShared, tc.wantPromotion)
			}
		})
	}
}

// TestSharedReadFailureFallsBack: when the shared lower-tier read fails,
// the readers waiting on it read for themselves and get the failure's
// cause only if it is theirs too.
func TestSharedReadFailureFallsBack(t *testing.T) {
	mem := newMemLower()
	d := data(9)
	mem.Put(context.Background(), k(9), d, block.Checksum(d), block.PutOptions{})
	low := &gatedLower{Tier: mem, gate: make(chan struct{}), failGets: errors.New("disk on fire")}
	m := newManager(t, low, 8)
	done := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := m.Get(context.Background(), k(9), block.GetOptions{})
			done <- err
		}()
	}
	waitFor(t, func() bool { return low.gets.Load() == 1 && m.joins.Load() == 1 })
	close(low.gate)
	for range 2 {
		if err := <-done; err == nil || err.Error() != "disk on fire" {
			t.Errorf("get with a failing lower tier: %v", err)
		}
	}
	if low.gets.Load() != 2 || m.Stats().SharedReads != 0 {
		t.Errorf("lower reads %d, shared %d: the waiter should have read for itself", low.gets.Load(), m.Stats().SharedReads)
	}
	// A waiter whose own context ends stops waiting.
	low2 := &gatedLower{Tier: mem, gate: make(chan struct{})}
	m2 := newManager(t, low2, 8)
	go m2.Get(context.Background(), k(9), block.GetOptions{})
	waitFor(t, func() bool { return low2.gets.Load() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := m2.Get(ctx, k(9), block.GetOptions{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiter past its deadline: %v", err)
	}
	close(low2.gate)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
		time.Sleep(time.Millisecond)
	}
}
