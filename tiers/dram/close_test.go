package dram

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TestCloseWaitsForWorkOutsideTheLock runs puts (whose copy into the arena
// is outside the lock), verifying reads (whose hash is outside the lock)
// and write-back demotions (a slow Demote that reads the arena bytes it was
// handed) concurrently with Close. Close must wait for all of them before it
// unmaps the arena: otherwise the race detector reports the t.arena field,
// or a goroutine faults on the unmapped pages. After Close every call
// answers block.ErrClosed, and every Demote that started also finished
// reading its bytes.
func TestCloseWaitsForWorkOutsideTheLock(t *testing.T) {
	const (
		size    = 64 << 10
		blocks  = 16 // the arena holds 16 blocks: puts evict, and so demote
		workers = 4
	)
	for round := range 5 {
		var started, finished atomic.Int64
		cfg := DefaultConfig()
		cfg.Capacity = blocks * size
		cfg.Demote = func(_ context.Context, _ block.Key, data []byte, sum uint32, _ block.Info) {
			started.Add(1)
			time.Sleep(2 * time.Millisecond) // slow lower tier: Close comes in meanwhile
			if block.Checksum(data) != sum { // reads every byte of the arena's copy
				t.Errorf("demoted bytes do not match their checksum")
			}
			finished.Add(1)
		}
		tr, err := New(cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		data := payload(uint64(round), size)
		sum, fp := block.Checksum(data), xxh3.Hash(data)
		var (
			wg      sync.WaitGroup
			ops     atomic.Int64
			closing = make(chan struct{})
		)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				for i := 0; ; i++ {
					k := key(w*1_000_000 + i)
					err := tr.Put(ctx, k, data, sum, block.PutOptions{})
					if errors.Is(err, block.ErrClosed) {
						return
					}
					if err != nil && !errors.Is(err, block.ErrNoSpace) {
						t.Errorf("put: %v", err)
						return
					}
					ref, err := tr.Get(ctx, k, block.GetOptions{})
					if errors.Is(err, block.ErrClosed) {
						return
					}
					if err == nil {
						if xxh3.Hash(ref.Data) != fp {
							t.Errorf("read of %s returned other bytes", k)
						}
						ref.Release()
					}
					if ops.Add(1) == 64 {
						close(closing)
					}
				}
			}()
		}
		select {
		case <-closing:
		case <-time.After(2 * time.Minute):
			t.Fatal("workers made no progress")
		}
		if err := tr.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if s, f := started.Load(), finished.Load(); s != f || s == 0 {
			t.Fatalf("round %d: %d demotions started, %d finished by Close's return (want equal and > 0)", round, s, f)
		}
		if err := tr.Put(context.Background(), key(-1), data, sum, block.PutOptions{}); !errors.Is(err, block.ErrClosed) {
			t.Fatalf("Put after Close: %v, want ErrClosed", err)
		}
		if _, err := tr.Get(context.Background(), key(0), block.GetOptions{}); !errors.Is(err, block.ErrClosed) {
			t.Fatalf("Get after Close: %v, want ErrClosed", err)
		}
	}
}

// TestCloseWaitsForADemoteInProgress: a Close that comes while a Demote
// holds arena bytes returns only after that Demote returned, and the
// Demote could read its bytes to the end; the put that was evicting
// answers ErrClosed.
func TestCloseWaitsForADemoteInProgress(t *testing.T) {
	const size = 8 * PageSize
	entered, proceed := make(chan struct{}), make(chan struct{})
	var demoted atomic.Bool
	cfg := DefaultConfig()
	cfg.Capacity = size // one block: the second put evicts the first
	cfg.Demote = func(_ context.Context, _ block.Key, data []byte, sum uint32, _ block.Info) {
		close(entered)
		<-proceed
		demoted.Store(block.Checksum(data) == sum)
	}
	tr, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := put(t, tr, key(1), payload(1, size), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	putErr := make(chan error, 1)
	go func() { putErr <- put(t, tr, key(2), payload(2, size), block.PutOptions{}) }()
	<-entered
	closed := make(chan error, 1)
	go func() { closed <- tr.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a Demote still held arena bytes", err)
	case <-time.After(100 * time.Millisecond): // a chance for a wrong Close to return; not a timing assertion
	}
	close(proceed)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if !demoted.Load() {
		t.Fatal("the Demote in progress did not read the block's bytes intact")
	}
	if err := <-putErr; !errors.Is(err, block.ErrClosed) {
		t.Fatalf("the put that was evicting: %v, want ErrClosed", err)
	}
}
