package native_test

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/blocktest"
	"github.com/ctxtier/ctxtier/gateway/client"
	"github.com/ctxtier/ctxtier/gateway/native"
	"github.com/ctxtier/ctxtier/gateway/native/nativetest"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
	"github.com/ctxtier/ctxtier/internal/membudget"
)

// stallPut opens a raw connection, announces a PUT frame of size bytes and
// sends only its first byte: a stalled upload.
func stallPut(t *testing.T, addr string, size int) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write(wire.AppendHello(nil, 1, 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(nc, make([]byte, wire.HelloReplySize)); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write(append(wire.AppendHeader(nil, wire.Header{Length: uint32(size), Op: wire.OpPut, ID: 1, Count: 1}), 0)); err != nil {
		t.Fatal(err)
	}
	return nc
}

// TestBudgetBackpressure: a stalled upload holds its bytes of the budget;
// a put that does not fit beside it waits (its body is not read) until the
// stalled one goes, then completes.
func TestBudgetBackpressure(t *testing.T) {
	b, err := membudget.New(4 << 20)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := nativetest.StartWithOptions(t, native.DefaultConfig(), blocktest.New(), []native.Option{native.WithBudget(b)})
	if err != nil {
		t.Fatal(err)
	}
	stalled := stallPut(t, srv.Addr, 3<<20)
	deadline := time.Now().Add(5 * time.Second)
	for b.InUse() != 3<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("the stalled upload holds %d bytes, want %d", b.InUse(), 3<<20)
		}
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, srv.Addr, client.Options{Conns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	done := make(chan error, 1)
	go func() { done <- c.Put(ctx, block.NewKey(block.DefaultNamespace, 1), make([]byte, 2<<20)) }()
	select {
	case err := <-done:
		t.Fatalf("the put did not wait for the budget: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if b.InUse() > 4<<20 || b.Waits() == 0 {
		t.Fatalf("in use %d, waits %d", b.InUse(), b.Waits())
	}
	stalled.Close() // the server drops the truncated frame and its bytes
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the put never got the budget back")
	}
	if !srv.Tier.Contains(block.NewKey(block.DefaultNamespace, 1)) {
		t.Fatal("the block was not stored")
	}
	deadline = time.Now().Add(5 * time.Second)
	for b.InUse() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still held", b.InUse())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
