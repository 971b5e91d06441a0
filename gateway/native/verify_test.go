package native_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/blocktest"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/native/nativetest"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
	"github.com/ctxtier/ctxtier/tiers"
	"github.com/ctxtier/ctxtier/tiers/dram"
	"github.com/ctxtier/ctxtier/tiers/tierstest"
)

// The hello's verify flag is echoed by the server, on either version; an
// unknown flag bit is refused (MalformedFrame) and the connection closed,
// which is what lets a client fall back to a plain hello.
func TestHelloVerifiesGets(t *testing.T) {
	srv := startServer(t, smallConfig())
	for _, tc := range []struct {
		name    string
		version uint16
		flags   uint16
		code    errcode.Code
	}{
		{"v2, none", wire.Version, 0, errcode.OK},
		{"v2, verifies gets", wire.Version, wire.HelloVerifiesGets, errcode.OK},
		{"v1, verifies gets", wire.Version1, wire.HelloVerifiesGets, errcode.OK},
		{"v2, put hints", wire.Version, wire.HelloPutHints, errcode.OK},
		{"v2, verifies gets and put hints", wire.Version, wire.HelloVerifiesGets | wire.HelloPutHints, errcode.OK},
		{"v2, unknown bit", wire.Version, 1 << 3, errcode.MalformedFrame},
		{"v2, verifies gets and an unknown bit", wire.Version, wire.HelloVerifiesGets | 1<<9, errcode.MalformedFrame},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, rep := dialHelloFlags(t, srv.Addr, tc.version, tc.flags)
			if rep.Code != tc.code {
				t.Fatalf("reply %+v, want code %v", rep, tc.code)
			}
			if tc.code != errcode.OK {
				if rep.Flags != 0 {
					t.Fatalf("a refused hello echoes flags %#x", rep.Flags)
				}
				r.closed()
				return
			}
			if rep.Flags != tc.flags {
				t.Fatalf("echoed flags %#x, want %#x", rep.Flags, tc.flags)
			}
			if tc.version == wire.Version {
				r.authenticate(wire.Auth{}, errcode.OK)
			}
			r.send(frame(wire.OpPing, 1, 0, nil))
			if resp := r.recv(); resp.Code != errcode.OK {
				t.Fatalf("ping: %+v", resp)
			}
		})
	}
}

// Only the GETs of a declaring connection reach the store marked, and not
// those that ask for verification at rest; the flag is refused (without
// closing) on anything but GET.
func TestGetReaderVerifyMark(t *testing.T) {
	mt := blocktest.New()
	srv, err := nativetest.StartWithTier(t, smallConfig(), mt)
	if err != nil {
		t.Fatal(err)
	}
	k1, k2 := block.NewKey("default", 1), block.NewKey("default", 2)
	for _, k := range []block.Key{k1, k2} {
		if err := mt.Put(context.Background(), k, []byte("bytes of "+k.String()), block.Checksum([]byte("bytes of "+k.String())), block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, declare := range []bool{false, true} {
		var flags uint16
		if declare {
			flags = wire.HelloVerifiesGets
		}
		r, rep := dialHelloFlags(t, srv.Addr, wire.Version, flags)
		if rep.Code != errcode.OK {
			t.Fatal(rep)
		}
		r.authenticate(wire.Auth{}, errcode.OK)
		for i, ff := range []uint8{0, wire.FlagVerifyAtRest, wire.FlagLinearizable, wire.FlagLinearizable | wire.FlagVerifyAtRest} {
			body := keyBody("default", k1, k2)
			f := wire.AppendHeader(nil, wire.Header{Length: uint32(len(body)), Op: wire.OpGet, Flags: ff, ID: uint64(i + 1), Count: 2})
			r.send(append(f, body...))
			resp := r.recv()
			if resp.Code != errcode.OK || len(resp.Items) != 2 || resp.Items[0].DataSum != resp.Items[0].Sum {
				t.Fatalf("declare %v, flags %#x: %+v", declare, ff, resp)
			}
			want := declare && ff&wire.FlagVerifyAtRest == 0
			if got := mt.TakeReaderMarks(); len(got) != 2 || got[0] != want || got[1] != want {
				t.Fatalf("declare %v, flags %#x: store calls marked %v, want %v", declare, ff, got, want)
			}
		}
		// Verify-at-rest on another opcode: refused, the connection kept.
		body := keyBody("default", k1)
		f := wire.AppendHeader(nil, wire.Header{Length: uint32(len(body)), Op: wire.OpExists, Flags: wire.FlagVerifyAtRest, ID: 9, Count: 1})
		r.send(append(f, body...))
		if resp := r.recv(); resp.Code != errcode.MalformedFrame || resp.ID != 9 {
			t.Fatalf("verify-at-rest on exists: %+v", resp)
		}
		r.send(frame(wire.OpPing, 10, 0, nil))
		if resp := r.recv(); resp.Code != errcode.OK || resp.ID != 10 {
			t.Fatalf("ping after a refused flag: %+v", resp)
		}
	}
}

// With a real DRAM tier: a declaring connection's GET of a block corrupted
// at rest goes out with the CRC-32C recorded at put (not one computed from
// the arena), so the client's check fails; the same GET with
// FlagVerifyAtRest makes the tier drop the block and count it, and answers
// NotFound.
func TestDeclaredGetSendsStoredSum(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dcfg := dram.DefaultConfig()
	dcfg.Capacity = 8 << 20
	m, err := tiers.New(tiers.DefaultConfig(), dcfg, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	srv, err := nativetest.StartWithTier(t, smallConfig(), m)
	if err != nil {
		t.Fatal(err)
	}
	k := block.NewKey("default", 5)
	data := make([]byte, 100_000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	sum := block.Checksum(data)
	r, _ := dialHelloFlags(t, srv.Addr, wire.Version, wire.HelloVerifiesGets)
	r.authenticate(wire.Auth{}, errcode.OK)
	r.send(frame(wire.OpPut, 1, 1, putBody("default", k, data, sum)))
	if resp := r.recv(); resp.Code != errcode.OK || resp.Items[0].Code != errcode.OK {
		t.Fatalf("put: %+v", resp)
	}
	tierstest.CorruptDRAM(t, m, k, 777)

	get := func(id uint64, ff uint8) *wire.Response {
		body := keyBody("default", k)
		h := wire.AppendHeader(nil, wire.Header{Length: uint32(len(body)), Op: wire.OpGet, Flags: ff, ID: id, Count: 1})
		r.send(append(h, body...))
		return r.recv()
	}
	resp := get(2, 0)
	it := resp.Items[0]
	if it.Code != errcode.OK || it.Sum != sum || it.DataSum == it.Sum {
		t.Fatalf("declared get of a corrupt block: code %v, sum %08x (put %08x), received %08x", it.Code, it.Sum, sum, it.DataSum)
	}
	if s := m.DRAM().Stats(); s.Corruptions != 0 || s.ReaderVerified != 1 {
		t.Fatalf("stats %+v", s)
	}
	if resp := get(3, wire.FlagVerifyAtRest); resp.Items[0].Code != errcode.NotFound {
		t.Fatalf("verify-at-rest get: %+v", resp.Items[0])
	}
	if s := m.DRAM().Stats(); s.Corruptions != 1 || m.Contains(k) {
		t.Fatalf("the corrupt block must be counted and dropped: %+v", s)
	}
}
