package native_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/blocktest"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/native"
	"github.com/ctxtier/ctxtier/gateway/native/nativetest"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
)

// raw is a hand-driven protocol connection, for sending what a well-behaved
// client never would.
type raw struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

// dialRaw completes the handshake for version (anonymously for version 2).
func dialRaw(t *testing.T, addr string, version uint16) (*raw, wire.HelloReply) {
	t.Helper()
	r, rep := dialHello(t, addr, version)
	if rep.Code == errcode.OK && version == wire.Version {
		r.authenticate(wire.Auth{}, errcode.OK)
	}
	return r, rep
}

// dialHello sends the hello and reads the reply, nothing more.
func dialHello(t *testing.T, addr string, version uint16) (*raw, wire.HelloReply) {
	t.Helper()
	return dialHelloFlags(t, addr, version, 0)
}

// dialHelloFlags is dialHello with hello flags.
func dialHelloFlags(t *testing.T, addr string, version, flags uint16) (*raw, wire.HelloReply) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	r := &raw{t: t, nc: nc, br: bufio.NewReader(nc)}
	r.send(wire.AppendHello(nil, version, flags))
	var b [wire.HelloReplySize]byte
	if _, err := io.ReadFull(r.br, b[:]); err != nil {
		t.Fatalf("handshake reply: %v", err)
	}
	rep, err := wire.DecodeHelloReply(b[:])
	if err != nil {
		t.Fatal(err)
	}
	return r, rep
}

// authenticateWith reads a version-2 challenge, sends a (with a's proof
// computed over the nonce from secret, when a has a key id) and checks the
// reply's code.
func (r *raw) authenticateWith(a wire.Auth, secret string, want errcode.Code) wire.Challenge {
	r.t.Helper()
	var cb [wire.ChallengeSize]byte
	if _, err := io.ReadFull(r.br, cb[:]); err != nil {
		r.t.Fatalf("challenge: %v", err)
	}
	ch, err := wire.DecodeChallenge(cb[:])
	if err != nil {
		r.t.Fatal(err)
	}
	if secret != "" {
		a.Proof = wire.AuthProof(secret, ch.Nonce, a.AccessKeyID)
	}
	r.send(wire.AppendAuth(nil, a))
	var rb [wire.AuthReplySize]byte
	if _, err := io.ReadFull(r.br, rb[:]); err != nil {
		r.t.Fatalf("auth reply: %v", err)
	}
	rep, err := wire.DecodeAuthReply(rb[:])
	if err != nil || rep.Code != want {
		r.t.Fatalf("auth reply %+v (%v), want code %v", rep, err, want)
	}
	return ch
}

func (r *raw) authenticate(a wire.Auth, want errcode.Code) { r.authenticateWith(a, "", want) }

func (r *raw) send(b []byte) {
	r.t.Helper()
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

func (r *raw) recv() *wire.Response {
	r.t.Helper()
	var hb [wire.HeaderSize]byte
	if _, err := io.ReadFull(r.br, hb[:]); err != nil {
		r.t.Fatalf("read header: %v", err)
	}
	h, err := wire.DecodeHeader(hb[:], 1<<31)
	if err != nil {
		r.t.Fatal(err)
	}
	resp, err := wire.ReadResponse(r.br, h, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	return resp
}

// closed asserts the server closed the connection.
func (r *raw) closed() {
	r.t.Helper()
	if _, err := r.br.ReadByte(); !errors.Is(err, io.EOF) {
		r.t.Fatalf("connection not closed: %v", err)
	}
}

func frame(op wire.Op, id uint64, count uint32, body []byte) []byte {
	b := wire.AppendHeader(nil, wire.Header{Length: uint32(len(body)), Op: op, ID: id, Count: count})
	return append(b, body...)
}

func putBody(ns string, k block.Key, data []byte, sum uint32) []byte {
	b := wire.AppendNamespace(nil, ns)
	b = wire.AppendPutItem(b, k, sum, uint32(len(data)), block.PutOptions{})
	return append(b, data...)
}

func keyBody(ns string, keys ...block.Key) []byte {
	b := wire.AppendNamespace(nil, ns)
	for _, k := range keys {
		b = wire.AppendKey(b, k)
	}
	return b
}

func startServer(t *testing.T, cfg native.Config) *nativetest.Server {
	t.Helper()
	srv, err := nativetest.Start(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func smallConfig() native.Config {
	cfg := native.DefaultConfig()
	cfg.MaxBlockSize = 1 << 20
	cfg.MaxResponseSize = 4 << 20
	return cfg
}

func TestHandshake(t *testing.T) {
	srv := startServer(t, smallConfig())
	r, rep := dialRaw(t, srv.Addr, wire.Version)
	if rep.Code != errcode.OK || rep.Version != wire.Version || rep.Limits.MaxBlockSize != 1<<20 || rep.Limits.MaxFrameSize != 1<<20+wire.FrameOverhead {
		t.Fatalf("reply %+v", rep)
	}
	r.send(frame(wire.OpPing, 5, 0, nil))
	if resp := r.recv(); resp.ID != 5 || resp.Code != errcode.OK {
		t.Fatalf("ping: %+v", resp)
	}
	bad, rep := dialRaw(t, srv.Addr, wire.Version+1)
	if rep.Code != errcode.VersionMismatch || rep.Version != wire.Version {
		t.Fatalf("version %d reply %+v", wire.Version+1, rep)
	}
	bad.closed()

	nc, err := net.Dial("tcp", srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	hello := wire.AppendHello(nil, wire.Version, 0)
	copy(hello, "HTTP")
	nc.Write(hello)
	var b [wire.HelloReplySize]byte
	if _, err := io.ReadFull(nc, b[:]); err != nil {
		t.Fatal(err)
	}
	if rep, _ := wire.DecodeHelloReply(b[:]); rep.Code != errcode.MalformedFrame {
		t.Fatalf("bad magic reply %+v", rep)
	}
}

// TestBadFrames sends frames the server must refuse, checks the code, whether
// the connection was closed, and that nothing was stored.
func TestBadFrames(t *testing.T) {
	k := block.NewKey("default", 77)
	data := []byte("some block bytes")
	good := putBody("default", k, data, block.Checksum(data))
	tests := []struct {
		name      string
		send      []byte
		code      errcode.Code
		item      errcode.Code // per-item code when the request itself is OK
		closes    bool
		halfClose bool // the client stops sending after send (truncation)
	}{
		{"truncated body", frame(wire.OpPut, 1, 1, good)[:wire.HeaderSize+10], errcode.MalformedFrame, 0, true, true},
		{"truncated header", frame(wire.OpPut, 1, 1, good)[:10], errcode.MalformedFrame, 0, true, true},
		{"oversized frame", wire.AppendHeader(nil, wire.Header{Length: 1<<20 + wire.FrameOverhead, Op: wire.OpPut, ID: 1, Count: 1}), errcode.TooLarge, 0, true, false},
		{"reserved header bytes", append(frame(wire.OpPing, 1, 0, nil)[:20], 1, 0, 0, 0), errcode.MalformedFrame, 0, true, false},
		{"unknown header flag", func() []byte { b := frame(wire.OpPing, 1, 0, nil); b[5] = 0x80; return b }(), errcode.MalformedFrame, 0, true, false},
		{"response flag in request", func() []byte { b := frame(wire.OpPing, 1, 0, nil); b[5] = wire.FlagResponse; return b }(), errcode.MalformedFrame, 0, false, false},
		{"unknown opcode", frame(99, 1, 1, good), errcode.MalformedFrame, 0, false, false},
		{"count beyond body", frame(wire.OpPut, 1, 2, good), errcode.MalformedFrame, 0, false, false},
		{"trailing bytes", frame(wire.OpPut, 1, 1, append(good, 0)), errcode.MalformedFrame, 0, false, false},
		{"too many items", frame(wire.OpGet, 1, 2000, keyBody("default")), errcode.TooLarge, 0, false, false},
		{"unknown namespace", frame(wire.OpPut, 1, 1, putBody("nope", k.WithPart(0), data, block.Checksum(data))), errcode.UnknownNamespace, 0, false, false},
		{"checksum mismatch", frame(wire.OpPut, 1, 1, putBody("default", k, data, block.Checksum(data)+1)), errcode.OK, errcode.ChecksumMismatch, false, false},
		{"block over max", frame(wire.OpPut, 1, 1, putBody("default", k, make([]byte, 1<<20+1), 0)), errcode.OK, errcode.TooLarge, false, false},
		{"part without flag", func() []byte {
			b := putBody("default", k, data, block.Checksum(data))
			b[1+7+8] = 5 // part = 5, flags still 0
			return frame(wire.OpPut, 1, 1, b)
		}(), errcode.OK, errcode.InvalidKey, false, false},
		{"unknown key flag", func() []byte {
			b := keyBody("default", k)
			b[1+7+10] = 0x40
			return frame(wire.OpGet, 1, 1, b)
		}(), errcode.OK, errcode.InvalidKey, false, false},
		{"lookup bad key", func() []byte {
			b := keyBody("default", k)
			b[1+7+11] = 1 // pad byte
			return frame(wire.OpLookup, 1, 1, b)
		}(), errcode.InvalidKey, 0, false, false},
		{"pin zero ttl", frame(wire.OpPin, 1, 0, append(wire.AppendNamespace(nil, "default"), 0, 0, 0, 0, 0, 0, 0, 0)), errcode.InvalidArgument, 0, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServer(t, smallConfig())
			r, _ := dialRaw(t, srv.Addr, wire.Version)
			r.send(tc.send)
			if tc.halfClose {
				r.nc.(*net.TCPConn).CloseWrite()
			}
			resp := r.recv()
			if resp.Code != tc.code {
				t.Fatalf("code %s (%q), want %s", resp.Code, resp.Message, tc.code)
			}
			if tc.code != errcode.OK && resp.Message == "" {
				t.Fatal("error without a message")
			}
			if tc.code == errcode.OK && (len(resp.Items) != 1 || resp.Items[0].Code != tc.item) {
				t.Fatalf("items %+v, want one with code %s", resp.Items, tc.item)
			}
			if tc.closes {
				r.closed()
			} else {
				r.send(frame(wire.OpPing, 9, 0, nil))
				if p := r.recv(); p.ID != 9 || p.Code != errcode.OK {
					t.Fatalf("ping after error: %+v", p)
				}
			}
			if n := srv.Tier.Len(); n != 0 {
				t.Fatalf("%d blocks stored after a refused frame", n)
			}
		})
	}
}

func TestPipelineOrderAndIDs(t *testing.T) {
	srv := startServer(t, smallConfig())
	r, _ := dialRaw(t, srv.Addr, wire.Version)
	var out []byte
	for i := range 50 {
		d := []byte{byte(i), 1, 2}
		out = append(out, frame(wire.OpPut, uint64(1000+i), 1, putBody("default", block.NewKey("default", uint64(i)), d, block.Checksum(d)))...)
		out = append(out, frame(wire.OpGet, uint64(5000+i), 1, keyBody("default", block.NewKey("default", uint64(i))))...)
	}
	r.send(out) // all in flight at once
	for i := range 50 {
		if p := r.recv(); p.ID != uint64(1000+i) || p.Items[0].Code != errcode.OK {
			t.Fatalf("put %d: %+v", i, p)
		}
		g := r.recv()
		if g.ID != uint64(5000+i) || g.Items[0].Code != errcode.OK || g.Items[0].Data[0] != byte(i) || g.Items[0].Sum != block.Checksum(g.Items[0].Data) {
			t.Fatalf("get %d: %+v", i, g)
		}
	}
	if srv.Tier.WaitLeases(time.Second) != 0 {
		t.Fatal("leases left open")
	}
}

func TestResponseSizeLimit(t *testing.T) {
	cfg := smallConfig()
	cfg.MaxResponseSize = 1<<20 + wire.FrameOverhead
	srv := startServer(t, cfg)
	ctx := context.Background()
	for i := range 2 {
		if err := srv.Store.Put(ctx, block.NewKey("default", uint64(i)), make([]byte, 600<<10), block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	r, _ := dialRaw(t, srv.Addr, wire.Version)
	r.send(frame(wire.OpGet, 1, 2, keyBody("default", block.NewKey("default", 0), block.NewKey("default", 1))))
	resp := r.recv()
	if resp.Items[0].Code != errcode.OK || resp.Items[1].Code != errcode.TooLarge {
		t.Fatalf("codes %s %s", resp.Items[0].Code, resp.Items[1].Code)
	}
	if srv.Tier.WaitLeases(time.Second) != 0 {
		t.Fatal("leases left open")
	}
}

// gateTier holds every Get until released, to keep a request in flight.
type gateTier struct {
	*blocktest.Tier
	entered chan struct{}
	release chan struct{}
}

func (g *gateTier) Get(ctx context.Context, k block.Key, opts block.GetOptions) (*block.Ref, error) {
	g.entered <- struct{}{}
	<-g.release
	return g.Tier.Get(ctx, k, opts)
}

func TestShutdownDrains(t *testing.T) {
	srv := startServer(t, smallConfig())
	st := srv.Store
	ctx := context.Background()
	if err := st.Put(ctx, block.NewKey("default", 1), []byte("drained"), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	// Rebuild a server over a gated view of the same tier.
	g := &gateTier{Tier: srv.Tier, entered: make(chan struct{}, 1), release: make(chan struct{})}
	gsrv, err := nativetest.StartWithTier(t, smallConfig(), g)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := dialRaw(t, gsrv.Addr, wire.Version)
	r.send(frame(wire.OpGet, 3, 1, keyBody("default", block.NewKey("default", 1))))
	<-g.entered
	done := make(chan error, 1)
	go func() { done <- gsrv.Server.Shutdown(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned %v with a request in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(g.release)
	resp := r.recv()
	if resp.ID != 3 || resp.Items[0].Code != errcode.OK || string(resp.Items[0].Data) != "drained" {
		t.Fatalf("in-flight response: %+v", resp)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r.closed()
	if g.WaitLeases(time.Second) != 0 {
		t.Fatal("lease left open")
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*native.Config)
		ok   bool
	}{
		{"default", func(*native.Config) {}, true},
		{"zero block", func(c *native.Config) { c.MaxBlockSize = 0 }, false},
		{"huge block", func(c *native.Config) { c.MaxBlockSize = block.HardMaxBlockSize + 1 }, false},
		{"frame below block", func(c *native.Config) { c.MaxFrameSize = c.MaxBlockSize }, false},
		{"explicit frame", func(c *native.Config) { c.MaxFrameSize = c.MaxBlockSize + 1<<20 }, true},
		{"no batch", func(c *native.Config) { c.MaxBatch = 0 }, false},
		{"no in-flight", func(c *native.Config) { c.MaxInFlight = 0 }, false},
		{"negative idle", func(c *native.Config) { c.IdleTimeout = -1 }, false},
		{"small response", func(c *native.Config) { c.MaxResponseSize = 1 }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := native.DefaultConfig()
			tc.mod(&c)
			err := c.Validate()
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, block.ErrInvalidArgument)) {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}

func TestIdleTimeout(t *testing.T) {
	cfg := smallConfig()
	cfg.IdleTimeout = 50 * time.Millisecond
	srv := startServer(t, cfg)
	r, _ := dialRaw(t, srv.Addr, wire.Version)
	r.closed()
}
