package client

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/blocktest"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/native"
	"github.com/ctxtier/ctxtier/gateway/native/nativetest"
)

// startMapTier starts a native server whose store keeps blocks in a map
// tier the test can inspect (the options each put carried included).
func startMapTier(t *testing.T) (*blocktest.Tier, *nativetest.Server) {
	t.Helper()
	mt := blocktest.New()
	srv, err := nativetest.StartWithTier(t, native.DefaultConfig(), mt)
	if err != nil {
		t.Fatal(err)
	}
	return mt, srv
}

// dialNative dials addr with conns connections, closed when the test ends.
func dialNative(t *testing.T, addr string, conns int) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, Options{Conns: conns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestPutHints: the agent hints of a put travel to the store's tier over
// the native protocol, item by item in a batch; invalid hints fail their
// own item with InvalidArgument and store nothing.
func TestPutHints(t *testing.T) {
	mt, srv := startMapTier(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := dialNative(t, srv.Addr, 1)
	if !c.HintsAccepted() {
		t.Fatal("the server did not echo the put-hints hello flag")
	}
	items := []PutItem{
		{Key: block.NewKey("default", 1), Opts: block.PutOptions{Reuse: block.ReuseShared, Retain: 10 * time.Minute}},
		{Key: block.NewKey("default", 2), Opts: block.PutOptions{Reuse: block.ReuseSession, Retain: 1500 * time.Millisecond, Parent: 1, HasParent: true}},
		{Key: block.NewKey("default", 3), Opts: block.PutOptions{Reuse: block.ReuseNever}},
		{Key: block.NewKey("default", 4)},
		{Key: block.NewKey("default", 5), Opts: block.PutOptions{Reuse: block.ReuseNever, Retain: time.Second}}, // contradictory
		{Key: block.NewKey("default", 6), Opts: block.PutOptions{Reuse: 7}},                                     // undefined
		{Key: block.NewKey("default", 7), Opts: block.PutOptions{Retain: -time.Second}},                         // negative
	}
	for i := range items {
		items[i].Data = payload(uint64(i), 1000+i)
	}
	errs, err := c.PutBatch(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range items {
		invalid := i >= 4
		if invalid {
			if !errors.Is(errs[i], block.ErrInvalidArgument) || errcode.Of(errs[i]) != errcode.InvalidArgument {
				t.Fatalf("item %d: %v, want InvalidArgument", i, errs[i])
			}
			if _, ok := mt.PutOptions(it.Key); ok {
				t.Fatalf("item %d with invalid hints was stored", i)
			}
			continue
		}
		if errs[i] != nil {
			t.Fatalf("item %d: %v", i, errs[i])
		}
		got, ok := mt.PutOptions(it.Key)
		if !ok || got.Reuse != it.Opts.Reuse || got.Retain != it.Opts.Retain || got.HasParent != it.Opts.HasParent {
			t.Fatalf("item %d: the tier got %+v, the put sent %+v", i, got, it.Opts)
		}
		data, err := c.Get(ctx, it.Key)
		if err != nil || !bytes.Equal(data, it.Data) {
			t.Fatalf("item %d read back: %v", i, err)
		}
	}
}

// TestPutHintsToServerWithoutThem: a server that knows hello flags but not
// put hints refuses the hello; the client dials again without the hint flag
// (keeping end-to-end verification), sends hinted puts without the hint
// record (no frame flag the server does not know), and the blocks are
// stored.
func TestPutHintsToServerWithoutThem(t *testing.T) {
	mt, srv := startMapTier(t)
	addr, refused, badFrames := oldServerHello(t, srv.Addr, 1 /* wire.HelloVerifiesGets */)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := dialNative(t, addr, 2)
	if c.HintsAccepted() || refused.Load() != 2 || !c.noPutHints.Load() || c.noHelloFlags.Load() {
		t.Fatalf("hints accepted %v, %d refusals, latched %v/%v", c.HintsAccepted(), refused.Load(), c.noPutHints.Load(), c.noHelloFlags.Load())
	}
	for _, s := range c.slots {
		if !s.c.declared {
			t.Fatal("the verify flag was lost with the hint flag")
		}
	}
	k := block.NewKey("default", 9)
	data := payload(9, 4096)
	if err := c.PutWithOptions(ctx, k, data, block.PutOptions{Reuse: block.ReuseSession, Retain: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if got, ok := mt.PutOptions(k); !ok || got.HasHints() {
		t.Fatalf("stored %v with options %+v; want stored without hints", ok, got)
	}
	if got, err := c.Get(ctx, k); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %v", err)
	}
	if badFrames.Load() != 0 || refused.Load() != 2 {
		t.Fatalf("%d frames with unknown flags, %d refusals", badFrames.Load(), refused.Load())
	}
}
