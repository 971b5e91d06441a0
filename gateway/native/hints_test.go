package native_test

import (
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
)

// TestPutHintsFrame: a PUT with the hint flag stores each item with its
// hints; an item with a bad hint record answers InvalidArgument on its own
// and stores nothing, and the connection stays usable.
func TestPutHintsFrame(t *testing.T) {
	srv := startServer(t, smallConfig())
	r, rep := dialHelloFlags(t, srv.Addr, wire.Version, wire.HelloPutHints)
	if rep.Code != errcode.OK || rep.Flags != wire.HelloPutHints {
		t.Fatalf("hello reply %+v", rep)
	}
	r.authenticate(wire.Auth{}, errcode.OK)
	opts := []block.PutOptions{
		{Reuse: block.ReuseShared, Retain: time.Hour},
		{Reuse: block.ReuseNever},
		{Reuse: block.ReuseSession}, // its record is spoiled below
		{},
	}
	body := wire.AppendNamespace(nil, "default")
	spoil := 0
	for i, o := range opts {
		d := []byte{byte(i), 'x'}
		body = wire.AppendPutItem(body, block.NewKey("default", uint64(i+1)), block.Checksum(d), uint32(len(d)), o)
		if i == 2 {
			spoil = len(body)
		}
		body = wire.AppendPutHints(body, o)
		body = append(body, d...)
	}
	body[spoil] = 200 // an undefined reuse value
	h := wire.AppendHeader(nil, wire.Header{Length: uint32(len(body)), Op: wire.OpPut, Flags: wire.FlagPutHints, ID: 3, Count: uint32(len(opts))})
	r.send(append(h, body...))
	resp := r.recv()
	if resp.Code != errcode.OK || len(resp.Items) != len(opts) {
		t.Fatalf("put: %+v", resp)
	}
	for i, it := range resp.Items {
		k := block.NewKey("default", uint64(i+1))
		got, stored := srv.Tier.PutOptions(k)
		if i == 2 {
			if it.Code != errcode.InvalidArgument || stored {
				t.Fatalf("spoiled item: code %v, stored %v", it.Code, stored)
			}
			continue
		}
		if it.Code != errcode.OK || !stored || got.Reuse != opts[i].Reuse || got.Retain != opts[i].Retain {
			t.Fatalf("item %d: code %v (%s), stored %v with %+v", i, it.Code, it.Message, stored, got)
		}
	}
	r.send(frame(wire.OpPing, 4, 0, nil))
	if resp := r.recv(); resp.Code != errcode.OK {
		t.Fatalf("ping after the put: %+v", resp)
	}
}
