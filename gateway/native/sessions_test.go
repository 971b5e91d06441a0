package native_test

import (
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
)

// TestAgentSessionFrames: the server echoes HelloAgentSessions; a read
// hint record or END_SESSION with a bad value answers InvalidArgument for
// the request, a frame with the record cut short MalformedFrame, and the
// connection stays usable; a good END_SESSION answers the released count.
func TestAgentSessionFrames(t *testing.T) {
	srv := startServer(t, smallConfig())
	r, rep := dialHelloFlags(t, srv.Addr, wire.Version, wire.HelloPutHints|wire.HelloAgentSessions)
	if rep.Code != errcode.OK || rep.Flags != wire.HelloPutHints|wire.HelloAgentSessions {
		t.Fatalf("hello reply %+v", rep)
	}
	r.authenticate(wire.Auth{}, errcode.OK)
	d := []byte("sess")
	o := block.PutOptions{Reuse: block.ReuseSession, Retain: time.Minute, Session: 11}
	put := wire.AppendPutItem(wire.AppendNamespace(nil, "default"), block.NewKey("default", 1), block.Checksum(d), uint32(len(d)), o)
	put = append(wire.AppendPutSession(wire.AppendPutHints(put, o), o.Session), d...)
	r.send(append(wire.AppendHeader(nil, wire.Header{Length: uint32(len(put)), Op: wire.OpPut, Flags: wire.FlagPutHints | wire.FlagPutSession, ID: 1, Count: 1}), put...))
	if resp := r.recv(); resp.Code != errcode.OK || resp.Items[0].Code != errcode.OK {
		t.Fatalf("put: %+v", resp)
	}
	if got, ok := srv.Tier.PutOptions(block.NewKey("default", 1)); !ok || got.Session != 11 {
		t.Fatalf("stored %v with %+v", ok, got)
	}
	key := wire.AppendKey(nil, block.NewKey("default", 1))
	for i, tc := range []struct {
		name string
		op   wire.Op
		body []byte
		want errcode.Code
	}{
		{"get, window 0", wire.OpGet, append(wire.AppendReadHints(wire.AppendNamespace(nil, "default"), 0), key...), errcode.InvalidArgument},
		{"lookup, record cut short", wire.OpLookup, append(wire.AppendNamespace(nil, "default"), 1, 0), errcode.MalformedFrame},
		{"get, 5 s", wire.OpGet, append(wire.AppendReadHints(wire.AppendNamespace(nil, "default"), 5*time.Second), key...), errcode.OK},
	} {
		count := uint32(1)
		if tc.op == wire.OpLookup {
			count = 0
		}
		r.send(append(wire.AppendHeader(nil, wire.Header{Length: uint32(len(tc.body)), Op: tc.op, Flags: wire.FlagReadHints, ID: uint64(10 + i), Count: count}), tc.body...))
		if resp := r.recv(); resp.Code != tc.want {
			t.Fatalf("%s: %+v, want %v", tc.name, resp, tc.want)
		}
	}
	if got := srv.Tier.Retains(); got[block.NewKey("default", 1)] != 5*time.Second || len(got) != 1 {
		t.Fatalf("the tier saw retain windows %v", got)
	}
	for i, tc := range []struct {
		session uint64
		want    errcode.Code
		n       uint32
	}{{0, errcode.InvalidArgument, 0}, {12, errcode.OK, 0}, {11, errcode.OK, 1}} {
		body := wire.AppendEndSession(nil, "default", tc.session)
		r.send(append(wire.AppendHeader(nil, wire.Header{Length: uint32(len(body)), Op: wire.OpEndSession, ID: uint64(20 + i)}), body...))
		if resp := r.recv(); resp.Code != tc.want || resp.Present != tc.n {
			t.Fatalf("end session %d: %+v, want %v with %d released", tc.session, resp, tc.want, tc.n)
		}
	}
}
