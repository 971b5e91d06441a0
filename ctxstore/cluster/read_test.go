package cluster

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// readIndexCalls counts fakeForwarder.ReadIndex calls; while readIndexGate
// holds a channel, each call waits for it to close, so concurrent reads
// overlap however the goroutines are scheduled.
var (
	readIndexCalls atomic.Int64
	readIndexGate  atomic.Pointer[chan struct{}]
)

// ReadIndex asks the leader's node for its read index, as clusterapi's
// read-index endpoint does.
func (f *fakeForwarder) ReadIndex(ctx context.Context, leader fsm.Member) (uint64, error) {
	readIndexCalls.Add(1)
	if g := readIndexGate.Load(); g != nil {
		<-*g
	}
	f.mu.Lock()
	b := f.backends[leader.ID]
	f.mu.Unlock()
	if b == nil {
		return 0, errors.New("no such backend")
	}
	return b.node.ReadIndex(ctx)
}

// TestLinearizableReadThroughFollower puts through one follower and at once
// reads through the other with ReadLinearizable: the block is always there.
func TestLinearizableReadThroughFollower(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	var followers []*testNode
	for _, tn := range tc.nodes {
		if !tn.node.IsLeader() {
			followers = append(followers, tn)
		}
	}
	if len(followers) != 2 {
		t.Fatalf("%d followers", len(followers))
	}
	a, b := followers[0], followers[1]
	ctx := withTimeout(t, 30*time.Second)
	lin := ctxstore.ReadOptions{Level: ctxstore.ReadLinearizable}
	before := readIndexCalls.Load()
	for i := range 30 {
		key := block.NewKey(block.DefaultNamespace, uint64(1000+i))
		data := payload(i, 512)
		if err := a.store.Put(ctx, key, data, block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if ok, err := b.store.Exists(ctx, key, lin); err != nil || !ok {
			t.Fatalf("put %d: linearizable exists on %s: %v %v", i, b.id, ok, err)
		}
		if n, err := b.store.Lookup(ctx, []block.Key{key}, lin); err != nil || n != 1 {
			t.Fatalf("put %d: linearizable lookup on %s: %d %v", i, b.id, n, err)
		}
		mustGet(t, b.store, key, data)
	}
	if readIndexCalls.Load() == before {
		t.Fatal("the follower never asked the leader for a read index")
	}
	// On the leader a linearizable read is a barrier, no round trip.
	before = readIndexCalls.Load()
	if ok, err := tc.leader().store.Exists(ctx, block.NewKey(block.DefaultNamespace, 1000), lin); err != nil || !ok {
		t.Fatalf("leader: %v %v", ok, err)
	}
	if got := readIndexCalls.Load() - before; got != 0 {
		t.Fatalf("the leader made %d read-index requests", got)
	}
}

func TestFollowerReadIndexRequestsCoalesce(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	f := tc.follower()
	gate := make(chan struct{})
	readIndexGate.Store(&gate)
	defer readIndexGate.Store(nil)
	before := readIndexCalls.Load()
	var entered atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			entered.Add(1)
			errs[i] = f.backend.SyncRead(withTimeout(t, time.Minute))
		}()
	}
	// The first read-index request is held until every reader has called
	// SyncRead; the others must wait for a shared request, not send their
	// own.
	waitCond(t, "a read-index request and 20 readers", func() bool {
		return readIndexCalls.Load()-before >= 1 && entered.Load() == 20
	})
	close(gate)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	got := readIndexCalls.Load() - before
	t.Logf("%d read-index requests for 20 concurrent reads", got)
	if got < 1 || got >= 20 {
		t.Fatalf("%d read-index requests for 20 concurrent reads: not coalesced", got)
	}
	// A reader that cannot wait gets ErrUnavailable.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.backend.SyncRead(ctx); !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("canceled read: %v", err)
	}
}

// waitCond polls cond for up to a minute (a bound that only catches a hang).
func waitCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
