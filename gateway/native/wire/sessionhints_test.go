package wire

import (
	"errors"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
)

// readFrame encodes a GET or LOOKUP body with a read hint record.
func readFrame(op Op, retain time.Duration, hashes ...uint64) (Header, []byte) {
	b := AppendReadHints(AppendNamespace(nil, "default"), retain)
	for _, h := range hashes {
		b = AppendKey(b, block.NewKey("default", h))
	}
	return Header{Length: uint32(len(b)), Op: op, Flags: FlagReadHints, ID: 1, Count: uint32(len(hashes))}, b
}

func TestReadHints(t *testing.T) {
	for _, tc := range []struct {
		name       string
		op         Op
		flags      uint8
		mod        func(b []byte) []byte // the body after the namespace
		want       error                 // nil: accepted
		wantRetain time.Duration
	}{
		{name: "get", op: OpGet, wantRetain: 12 * time.Second},
		{name: "lookup", op: OpLookup, wantRetain: 12 * time.Second},
		{name: "linearizable get", op: OpGet, flags: FlagLinearizable, wantRetain: 12 * time.Second},
		{name: "window 0", op: OpGet, mod: func(b []byte) []byte { le.PutUint32(b, 0); return b }, want: block.ErrInvalidArgument},
		{name: "reserved bytes", op: OpGet, mod: func(b []byte) []byte { b[5] = 1; return b }, want: block.ErrInvalidArgument},
		{name: "record cut short", op: OpLookup, mod: func(b []byte) []byte { return b[:3] }, want: errcode.ErrMalformedFrame},
		{name: "on exists", op: OpExists, want: errcode.ErrMalformedFrame},
		{name: "on delete", op: OpDelete, want: errcode.ErrMalformedFrame},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, body := readFrame(tc.op, 12*time.Second, 7, 8)
			h.Flags |= tc.flags
			if tc.mod != nil {
				at := 1 + len("default")
				body = append(body[:at:at], tc.mod(append([]byte(nil), body[at:]...))...)
				h.Length = uint32(len(body))
				if len(body) < at+ReadHintsSize {
					h.Count = 0
				}
			}
			req, err := DecodeRequest(h, body, testLimits)
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("err %v, want %v", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if req.Retain != tc.wantRetain || len(req.Keys) != 2 || req.Keys[1].Hash != 8 {
				t.Fatalf("decoded retain %v keys %v", req.Retain, req.Keys)
			}
		})
	}
	// Below a millisecond rounds up; above the u32 clamps.
	if got := le.Uint32(AppendReadHints(nil, time.Microsecond)); got != 1 {
		t.Fatalf("1µs encodes as %d ms", got)
	}
	if got := le.Uint32(AppendReadHints(nil, 2*block.MaxRetain)); got != ^uint32(0) {
		t.Fatalf("2*MaxRetain encodes as %d ms", got)
	}
}

func TestPutSessionHints(t *testing.T) {
	in := []block.PutOptions{
		{},
		{Reuse: block.ReuseSession, Retain: 3 * time.Second, Session: 42},
		{Reuse: block.ReuseShared, Session: ^uint64(0)},
	}
	b := AppendNamespace(nil, "default")
	for i, o := range in {
		d := []byte{byte(i), 1}
		b = AppendPutItem(b, block.NewKey("default", uint64(i+1)), block.Checksum(d), uint32(len(d)), o)
		b = AppendPutSession(AppendPutHints(b, o), o.Session)
		b = append(b, d...)
	}
	h := Header{Length: uint32(len(b)), Op: OpPut, Flags: FlagPutHints | FlagPutSession, ID: 1, Count: uint32(len(in))}
	req, err := DecodeRequest(h, b, testLimits)
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range req.Items {
		if it.Err != nil || it.Opts.Session != in[i].Session || it.Opts.Reuse != in[i].Reuse || it.Opts.Retain != in[i].Retain {
			t.Fatalf("item %d: %+v err %v, sent %+v", i, it.Opts, it.Err, in[i])
		}
		if string(it.Data) != string([]byte{byte(i), 1}) {
			t.Fatalf("item %d data %x: misparsed", i, it.Data)
		}
	}
	// The session flag needs the put-hints flag, and a PUT.
	h.Flags = FlagPutSession
	if _, err := DecodeRequest(h, b, testLimits); !errors.Is(err, errcode.ErrMalformedFrame) {
		t.Fatalf("session flag without put hints: %v", err)
	}
	g, gb := readFrame(OpGet, time.Second, 1)
	g.Flags = FlagPutHints | FlagPutSession
	if _, err := DecodeRequest(g, gb, testLimits); !errors.Is(err, errcode.ErrMalformedFrame) {
		t.Fatalf("session flag on a GET: %v", err)
	}
}

func TestEndSession(t *testing.T) {
	body := AppendEndSession(nil, "default", 99)
	h := Header{Length: uint32(len(body)), Op: OpEndSession, ID: 3}
	req, err := DecodeRequest(h, body, testLimits)
	if err != nil || req.Namespace != "default" || req.Session != 99 {
		t.Fatalf("decoded %q %d, err %v", req.Namespace, req.Session, err)
	}
	for _, tc := range []struct {
		name string
		h    Header
		body []byte
		want error
	}{
		{"session 0", Header{Op: OpEndSession}, AppendEndSession(nil, "default", 0), block.ErrInvalidArgument},
		{"count 1", Header{Op: OpEndSession, Count: 1}, body, errcode.ErrMalformedFrame},
		{"short", Header{Op: OpEndSession}, body[:len(body)-1], errcode.ErrMalformedFrame},
		{"long", Header{Op: OpEndSession}, append(append([]byte(nil), body...), 0), errcode.ErrMalformedFrame},
		{"linearizable", Header{Op: OpEndSession, Flags: FlagLinearizable}, body, errcode.ErrMalformedFrame},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.h.Length = uint32(len(tc.body))
			if _, err := DecodeRequest(tc.h, tc.body, testLimits); !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
	if OpEndSession.String() != "end_session" || !OpEndSession.Known() {
		t.Fatalf("OpEndSession: %q known %v", OpEndSession, OpEndSession.Known())
	}
}
