package native_test

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/blocktest"
	"github.com/ctxtier/ctxtier/ctxstore/catalogtest"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/native"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
)

// A frame looks its namespace up once, however many keys it reads: the
// native server resolves it and hands it to the store's reads
// (ctxstore.ReadOptions.Namespace), which hand it to the tier. This is the
// serving peer's side of a clustered read (a peer's shard GET is such a
// frame) as well as an engine's GET on the node it asks.
func TestFrameLooksNamespaceUpOnce(t *testing.T) {
	base, err := ctxstore.OpenFileCatalog("")
	if err != nil {
		t.Fatal(err)
	}
	cat := catalogtest.NewCounting(base)
	mt := blocktest.New()
	st, err := ctxstore.New(ctxstore.DefaultConfig(), cat, mt, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := native.New(smallConfig(), st, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	})
	keys := []block.Key{block.NewKey("default", 1), block.NewKey("default", 2), block.NewKey("default", 3)}
	for _, k := range keys {
		data := []byte("bytes of " + k.String())
		if err := mt.Put(context.Background(), k, data, block.Checksum(data), block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	r, rep := dialHelloFlags(t, ln.Addr().String(), wire.Version, wire.HelloVerifiesGets)
	if rep.Code != errcode.OK {
		t.Fatal(rep)
	}
	r.authenticate(wire.Auth{}, errcode.OK)
	for i, tc := range []struct {
		name  string
		op    wire.Op
		flags uint8
		keys  []block.Key
	}{
		{"get of one key", wire.OpGet, 0, keys[:1]},
		{"get of three keys", wire.OpGet, 0, keys},
		{"linearizable get of three keys", wire.OpGet, wire.FlagLinearizable, keys},
		{"get verified at rest", wire.OpGet, wire.FlagVerifyAtRest, keys},
		{"lookup of three keys", wire.OpLookup, 0, keys},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := cat.Lookups()
			body := keyBody("default", tc.keys...)
			f := wire.AppendHeader(nil, wire.Header{Length: uint32(len(body)), Op: tc.op, Flags: tc.flags, ID: uint64(i + 1), Count: uint32(len(tc.keys))})
			r.send(append(f, body...))
			resp := r.recv()
			if resp.Code != errcode.OK {
				t.Fatalf("%+v", resp)
			}
			if tc.op == wire.OpGet {
				if len(resp.Items) != len(tc.keys) {
					t.Fatalf("%d items, want %d", len(resp.Items), len(tc.keys))
				}
				for j, it := range resp.Items {
					if it.Code != errcode.OK || string(it.Data) != "bytes of "+tc.keys[j].String() {
						t.Fatalf("item %d: %+v", j, it)
					}
				}
			}
			if got := cat.Lookups() - before; got != 1 {
				t.Fatalf("%d namespace lookups for the frame, want 1", got)
			}
		})
	}
}
