package client

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/blocktest"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/native"
	"github.com/ctxtier/ctxtier/gateway/native/nativetest"
)

func start(t *testing.T, cfg native.Config, extra ...block.Namespace) (*nativetest.Server, *Client) {
	t.Helper()
	srv, err := nativetest.Start(t, cfg, extra...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, srv.Addr, Options{Conns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return srv, c
}

func payload(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n+8)
	for i := 0; i < n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	return b[:n:n]
}

func TestRoundTrip(t *testing.T) {
	srv, c := start(t, native.DefaultConfig())
	ctx := context.Background()
	tests := []struct {
		name string
		key  block.Key
		size int
	}{
		{"one byte", block.NewKey("default", 1), 1},
		{"4KiB", block.NewKey("default", 2), 4 << 10},
		{"with part", block.NewKey("default", 2).WithPart(3), 100},
		{"part zero", block.NewKey("default", 2).WithPart(0), 101},
		{"2MiB odd", block.NewKey("default", ^uint64(0)), 2<<20 + 3},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := payload(uint64(i), tc.size)
			if err := c.Put(ctx, tc.key, data); err != nil {
				t.Fatalf("Put: %v", err)
			}
			// Re-putting the same bytes is idempotent.
			if err := c.Put(ctx, tc.key, data); err != nil {
				t.Fatalf("re-Put: %v", err)
			}
			got, err := c.Get(ctx, tc.key)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("Get: err %v, equal %v", err, bytes.Equal(got, data))
			}
			got, sum, err := c.GetSum(ctx, tc.key)
			if err != nil || !bytes.Equal(got, data) || sum != block.Checksum(data) {
				t.Fatalf("GetSum: err %v, equal %v, sum %08x want %08x", err, bytes.Equal(got, data), sum, block.Checksum(data))
			}
			buf := make([]byte, tc.size+10)
			n, err := c.GetInto(ctx, tc.key, buf)
			if err != nil || n != tc.size || !bytes.Equal(buf[:n], data) {
				t.Fatalf("GetInto: n %d err %v", n, err)
			}
			if ok, err := c.Exists(ctx, tc.key); err != nil || !ok {
				t.Fatalf("Exists: %v %v", ok, err)
			}
		})
	}
	if got := srv.Tier.Len(); got != len(tests) {
		t.Fatalf("tier holds %d blocks, want %d", got, len(tests))
	}
	if n := srv.Tier.WaitLeases(time.Second); n != 0 {
		t.Fatalf("%d leases still open", n)
	}
}

func TestErrors(t *testing.T) {
	srv, c := start(t, native.DefaultConfig())
	ctx := context.Background()
	k := block.NewKey("default", 42)
	if err := c.Put(ctx, k, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		do   func() error
		want error
	}{
		{"get missing", func() error { _, err := c.Get(ctx, block.NewKey("default", 7)); return err }, block.ErrNotFound},
		{"get missing with sum", func() error { _, _, err := c.GetSum(ctx, block.NewKey("default", 7)); return err }, block.ErrNotFound},
		{"conflicting re-put", func() error { return c.Put(ctx, k, []byte("world")) }, block.ErrConflict},
		{"unknown namespace", func() error { return c.Put(ctx, block.NewKey("nope", 1), []byte("x")) }, block.ErrUnknownNamespace},
		{"unknown namespace get", func() error { _, err := c.Get(ctx, block.NewKey("nope", 1)); return err }, block.ErrUnknownNamespace},
		{"checksum mismatch", func() error {
			return c.PutWithOptions(ctx, block.NewKey("default", 9), []byte("data"), block.PutOptions{Sum: 1, HasSum: true})
		}, block.ErrChecksum},
		{"empty block", func() error { return c.Put(ctx, block.NewKey("default", 10), nil) }, block.ErrInvalidArgument},
		{"delete missing", func() error { return c.Delete(ctx, block.NewKey("default", 11)) }, block.ErrNotFound},
		{"pin missing", func() error { return c.Pin(ctx, block.NewKey("default", 11), time.Minute) }, block.ErrNotFound},
		{"pin zero ttl", func() error { return c.Pin(ctx, k, 0) }, block.ErrInvalidArgument},
		{"buffer too small", func() error { _, err := c.GetInto(ctx, k, make([]byte, 2)); return err }, block.ErrTooLarge},
		{"block over limit", func() error {
			return c.Put(ctx, block.NewKey("default", 12), make([]byte, block.DefaultMaxBlockSize+1))
		}, block.ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want errors.Is %v", err, tc.want)
			}
		})
	}
	// Nothing but the first block was stored, and it kept its bytes.
	if n := srv.Tier.Len(); n != 1 {
		t.Fatalf("tier holds %d blocks, want 1", n)
	}
	if got, err := c.Get(ctx, k); err != nil || string(got) != "hello" {
		t.Fatalf("Get after errors: %q %v", got, err)
	}
	// The connections survived every per-request error.
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestBatches(t *testing.T) {
	cfg := native.DefaultConfig()
	cfg.MaxBatch = 4 // force the client to split
	ns := block.Namespace{Name: "other", BlockTokens: 16}
	srv, c := start(t, cfg, ns)
	ctx := context.Background()
	var items []PutItem
	var keys []block.Key
	for i := range 10 {
		name := "default"
		if i >= 7 {
			name = "other"
		}
		k := block.NewKey(name, uint64(100+i))
		keys = append(keys, k)
		items = append(items, PutItem{Key: k, Data: payload(uint64(i), 1000+i)})
	}
	items[3].Opts = block.PutOptions{Sum: 5, HasSum: true} // one bad item
	errs, err := c.PutBatch(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if want := i == 3; errors.Is(e, block.ErrChecksum) != want || (!want && e != nil) {
			t.Fatalf("item %d: %v", i, e)
		}
	}
	if srv.Tier.Len() != 9 {
		t.Fatalf("stored %d, want 9", srv.Tier.Len())
	}
	out, gerrs, err := c.GetBatch(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		if i == 3 {
			if !errors.Is(gerrs[i], block.ErrNotFound) {
				t.Fatalf("get %d: %v", i, gerrs[i])
			}
			continue
		}
		if gerrs[i] != nil || !bytes.Equal(out[i], items[i].Data) {
			t.Fatalf("get %d: %v", i, gerrs[i])
		}
	}
	bufs := make([][]byte, len(keys))
	for i := range bufs {
		bufs[i] = make([]byte, 2000)
	}
	sizes, gerrs, err := c.GetBatchInto(ctx, keys, bufs)
	if err != nil || gerrs[0] != nil || sizes[5] != 1005 || !bytes.Equal(bufs[5][:1005], items[5].Data) {
		t.Fatalf("GetBatchInto: %v %v %v", err, gerrs[0], sizes)
	}
	present, eerrs, err := c.ExistsBatch(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		if eerrs[i] != nil || present[i] != (i != 3) {
			t.Fatalf("exists %d: %v %v", i, present[i], eerrs[i])
		}
	}
	// Lookup: the prefix stops at the first miss (item 3), across frames.
	if n, err := c.Lookup(ctx, keys[:3]); err != nil || n != 3 {
		t.Fatalf("Lookup[:3] = %d, %v", n, err)
	}
	if n, err := c.Lookup(ctx, keys); err != nil || n != 3 {
		t.Fatalf("Lookup = %d, %v", n, err)
	}
	if n, err := c.Lookup(ctx, keys[4:7]); err != nil || n != 3 {
		t.Fatalf("Lookup[4:7] = %d, %v", n, err)
	}
	perrs, err := c.PinBatch(ctx, keys[:2], time.Hour)
	if err != nil || perrs[0] != nil || perrs[1] != nil || srv.Tier.PinnedUntil(keys[0]).IsZero() {
		t.Fatalf("PinBatch: %v %v", err, perrs)
	}
	derrs, err := c.DeleteBatch(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range derrs {
		if (i == 3) != errors.Is(e, block.ErrNotFound) || (i != 3 && e != nil) {
			t.Fatalf("delete %d: %v", i, e)
		}
	}
	if srv.Tier.Len() != 0 || srv.Tier.WaitLeases(time.Second) != 0 {
		t.Fatalf("after delete: %d blocks, %d leases", srv.Tier.Len(), srv.Tier.WaitLeases(0))
	}
}

func TestPipelinedConcurrent(t *testing.T) {
	srv, c := start(t, native.DefaultConfig())
	ctx := context.Background()
	const workers, per = 8, 25
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 64<<10)
			for i := range per {
				k := block.NewKey("default", uint64(w*1000+i))
				data := payload(uint64(w*1000+i), 1+(w*per+i)*331%(64<<10))
				if err := c.Put(ctx, k, data); err != nil {
					errc <- err
					return
				}
				n, err := c.GetInto(ctx, k, buf)
				if err != nil || !bytes.Equal(buf[:n], data) {
					errc <- fmt.Errorf("worker %d item %d: %v", w, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if srv.Tier.Len() != workers*per || srv.Tier.WaitLeases(time.Second) != 0 {
		t.Fatalf("%d blocks, %d leases", srv.Tier.Len(), srv.Tier.WaitLeases(0))
	}
}

func TestVersionMismatch(t *testing.T) {
	srv, err := nativetest.Start(t, native.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	_, err = Dial(context.Background(), srv.Addr, Options{Conns: 1, version: 99})
	if !errors.Is(err, errcode.ErrVersionMismatch) {
		t.Fatalf("Dial with version 99: %v", err)
	}
}

func TestCloseAndCancel(t *testing.T) {
	_, c := start(t, native.DefaultConfig())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Get(ctx, block.NewKey("default", 1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get with canceled ctx: %v", err)
	}
	// The connection stays usable after an abandoned call.
	if err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := c.Ping(context.Background()); !errors.Is(err, block.ErrClosed) {
		t.Fatalf("Ping after Close: %v", err)
	}
}

func TestRedialAfterServerDrop(t *testing.T) {
	srv, c := start(t, native.DefaultConfig())
	ctx := context.Background()
	if err := c.Put(ctx, block.NewKey("default", 1), []byte("x")); err != nil {
		t.Fatal(err)
	}
	// Break both pooled connections from the client side.
	for _, s := range c.slots {
		s.c.nc.Close()
	}
	// Calls may fail while the break is noticed, then the pool redials.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := c.Get(ctx, block.NewKey("default", 1))
		if err == nil {
			break
		}
		if !errors.Is(err, block.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("Get after drop: %v", err)
		}
	}
	_ = srv
}

// corruptTier serves every block with a wrong checksum, as a broken server
// or a flipped bit on the way would.
type corruptTier struct{ *blocktest.Tier }

func (c corruptTier) Get(ctx context.Context, k block.Key, opts block.GetOptions) (*block.Ref, error) {
	ref, err := c.Tier.Get(ctx, k, opts)
	if err != nil {
		return nil, err
	}
	bad := block.NewRef(ref.Data, ref.Sum^1, ref.Tier, ref.Release)
	return bad, nil
}

func TestGetChecksumMismatch(t *testing.T) {
	mt := blocktest.New()
	srv, err := nativetest.StartWithTier(t, native.DefaultConfig(), corruptTier{mt})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := Dial(ctx, srv.Addr, Options{Conns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k := block.NewKey("default", 5)
	if err := c.Put(ctx, k, []byte("bytes")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, k); !errors.Is(err, block.ErrChecksum) {
		t.Fatalf("Get: %v", err)
	}
	if _, err := c.GetInto(ctx, k, make([]byte, 10)); !errors.Is(err, block.ErrChecksum) {
		t.Fatalf("GetInto: %v", err)
	}
}
