package membudget

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

func TestBudgetBoundsAndOrder(t *testing.T) {
	b, err := New(10 << 20)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r1, err := b.Acquire(ctx, 6<<20)
	if err != nil {
		t.Fatal(err)
	}
	// 6 + 6 does not fit: the second waits until the first is released.
	got := make(chan func(), 1)
	go func() {
		r, err := b.Acquire(ctx, 6<<20)
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	select {
	case <-got:
		t.Fatal("acquired past the budget")
	case <-time.After(50 * time.Millisecond):
	}
	if b.InUse() != 6<<20 {
		t.Fatalf("in use %d", b.InUse())
	}
	r1()
	r1() // a second release is a no-op
	r2 := <-got
	if b.InUse() != 6<<20 || b.Waits() != 1 {
		t.Fatalf("in use %d, waits %d", b.InUse(), b.Waits())
	}
	r2()
	// Larger than the budget: takes all of it.
	r3, err := b.Acquire(ctx, 50<<20)
	if err != nil || b.InUse() != 10<<20 {
		t.Fatalf("oversized: %v, in use %d", err, b.InUse())
	}
	// A waiter whose context ends gives up with Unavailable.
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := b.Acquire(cctx, 1); !errors.Is(err, block.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("canceled wait: %v", err)
	}
	r3()
	if b.Acquired() != 6<<20+6<<20+10<<20 {
		t.Fatalf("acquired %d", b.Acquired())
	}
	if b.InUse() != 0 {
		t.Fatalf("in use %d after releasing all", b.InUse())
	}
}

func TestBudgetConcurrentNeverOver(t *testing.T) {
	b, _ := New(8 << 20)
	var wg sync.WaitGroup
	var mu sync.Mutex
	peak := int64(0)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := b.Acquire(context.Background(), int64(1+i%4)<<20)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			peak = max(peak, b.InUse())
			mu.Unlock()
			time.Sleep(time.Millisecond)
			r()
		}()
	}
	wg.Wait()
	if peak > 8<<20 || b.InUse() != 0 {
		t.Fatalf("peak %d over the budget, or %d left", peak, b.InUse())
	}
}

func TestNilAndInvalid(t *testing.T) {
	var b *Budget
	r, err := b.Acquire(context.Background(), 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	r()
	if b.Size() != 0 || b.InUse() != 0 || b.Waits() != 0 {
		t.Fatal("nil budget reports use")
	}
	if _, err := New(1000); !errors.Is(err, block.ErrInvalidArgument) {
		t.Fatalf("tiny budget: %v", err)
	}
}
