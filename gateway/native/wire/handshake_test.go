package wire

import (
	"bytes"
	"errors"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
)

// TestClientHandshake runs the client's handshake against scripted server
// bytes and checks what it sent and what it concluded.
func TestClientHandshake(t *testing.T) {
	limits := Limits{MaxFrameSize: 1 << 20, MaxBlockSize: 1 << 19, MaxBatch: 8, MaxInFlight: 4, MaxResponseSize: 1 << 20}
	var nonce [NonceSize]byte
	for i := range nonce {
		nonce[i] = byte(i)
	}
	hello := func(v uint16, code errcode.Code, l Limits, flags uint16) []byte {
		return AppendHelloReply(nil, HelloReply{Version: v, Code: code, Limits: l, Flags: flags})
	}
	challenge := func(required bool) []byte {
		c := Challenge{Nonce: nonce}
		if required {
			c.Flags = ChallengeAuthRequired
		}
		return AppendChallenge(nil, c)
	}
	verdict := func(code errcode.Code) []byte { return AppendAuthReply(nil, AuthReply{Code: code}) }
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	cases := []struct {
		name    string
		flags   uint16
		key     string
		server  []byte
		want    error // nil: success
		notWant error
	}{
		{"accepted with a key", HelloPutHints, "node", cat(hello(Version, errcode.OK, limits, HelloPutHints), challenge(true), verdict(errcode.OK)), nil, nil},
		{"accepted anonymously", 0, "", cat(hello(Version, errcode.OK, limits, 0), challenge(false), verdict(errcode.OK)), nil, nil},
		{"flags refused", HelloPutHints, "", hello(Version, errcode.MalformedFrame, Limits{}, 0), ErrHelloFlagsRefused, nil},
		{"malformed without flags is no flag refusal", 0, "", hello(Version, errcode.MalformedFrame, Limits{}, 0), errcode.ErrMalformedFrame, ErrHelloFlagsRefused},
		{"other version", 0, "", hello(Version1, errcode.OK, limits, 0), errcode.ErrVersionMismatch, nil},
		{"unusable limits", 0, "", hello(Version, errcode.OK, Limits{MaxFrameSize: 1 << 20, MaxResponseSize: 1 << 20}, 0), errcode.ErrMalformedFrame, nil},
		{"credentials required, none given", 0, "", cat(hello(Version, errcode.OK, limits, 0), challenge(true)), block.ErrUnauthenticated, nil},
		{"credentials refused", 0, "node", cat(hello(Version, errcode.OK, limits, 0), challenge(true), verdict(errcode.Unauthenticated)), block.ErrUnauthenticated, nil},
		{"reply cut short", 0, "", hello(Version, errcode.OK, limits, 0)[:5], block.ErrUnavailable, nil},
		{"challenge cut short", 0, "", cat(hello(Version, errcode.OK, limits, 0), challenge(false)[:3]), block.ErrUnavailable, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var sent bytes.Buffer
			secret := ""
			if tc.key != "" {
				secret = "s3cret"
			}
			rep, err := ClientHandshake(&sent, bytes.NewReader(tc.server), Version, tc.flags, tc.key, secret)
			if tc.want != nil {
				if !errors.Is(err, tc.want) || (tc.notWant != nil && errors.Is(err, tc.notWant)) {
					t.Fatalf("got %v, want %v (and not %v)", err, tc.want, tc.notWant)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rep.Limits != limits || rep.Flags != tc.flags {
				t.Fatalf("reply %+v", rep)
			}
			h, err := DecodeHello(sent.Next(HelloSize))
			if err != nil || h.Version != Version || h.Flags != tc.flags {
				t.Fatalf("sent hello %+v, %v", h, err)
			}
			a, err := DecodeAuth(sent.Bytes())
			if err != nil || a.AccessKeyID != tc.key {
				t.Fatalf("sent auth %+v, %v", a, err)
			}
			if tc.key != "" && a.Proof != AuthProof(secret, nonce, tc.key) {
				t.Fatal("sent proof does not prove the secret")
			}
		})
	}
}

// FuzzReadAnswer feeds arbitrary streams to a pipelined connection's
// reader, with one request pending (id 7, a GET of 2 items, or when the
// first byte is odd a PUT of 1): it must never panic, and an answer it
// accepts is for that request, of its opcode, with one result per item
// when it succeeded.
func FuzzReadAnswer(f *testing.F) {
	d := []byte("data")
	get := AppendStatus(nil, errcode.OK, "")
	get = AppendGetMeta(get, block.Checksum(d), uint32(len(d)), block.TierDRAM)
	get = append(get, d...)
	get = AppendStatus(get, errcode.NotFound, "missing")
	f.Add(append(AppendHeader(nil, Header{Length: uint32(len(get)), Op: OpGet, Flags: FlagResponse, ID: 7, Count: 2}), get...))
	f.Add(append(AppendHeader(nil, Header{Length: uint32(len(get)), Op: OpGet, Flags: FlagResponse, ID: 8, Count: 2}), get...))
	f.Add(append(AppendHeader(nil, Header{Length: 5, Op: OpPut, Flags: FlagResponse, ID: 9, Code: errcode.TooLarge}), AppendErrorBody(nil, "big")...))
	put := AppendStatus(nil, errcode.OK, "")
	f.Add(append(AppendHeader(nil, Header{Length: uint32(len(put)), Op: OpPut, Flags: FlagResponse, ID: 7, Count: 1}), put...))
	f.Fuzz(func(t *testing.T, b []byte) {
		op, count := OpGet, uint32(2)
		if len(b) > 0 && b[0]&1 == 1 {
			op, count = OpPut, 1
		}
		h, resp, err := ReadAnswer(bytes.NewReader(b), 1<<20, func(id uint64) (Op, uint32, Dest, bool) {
			return op, count, nil, id == 7
		})
		if err != nil {
			return
		}
		if h.ID != 7 || h.Op != op || resp == nil {
			t.Fatalf("accepted %+v for request 7 (%s)", h, op)
		}
		if h.Code == errcode.OK && resp.Items != nil && len(resp.Items) != int(count) {
			t.Fatalf("accepted %d results for %d items", len(resp.Items), count)
		}
	})
}
