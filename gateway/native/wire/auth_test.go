package wire

import (
	"bytes"
	"errors"
	"testing"

	"github.com/ctxtier/ctxtier/gateway/errcode"
)

func TestAuthMessagesRoundTrip(t *testing.T) {
	ch := Challenge{Flags: ChallengeAuthRequired}
	for i := range ch.Nonce {
		ch.Nonce[i] = byte(i)
	}
	cb := AppendChallenge(nil, ch)
	if got, err := DecodeChallenge(cb); len(cb) != ChallengeSize || err != nil || got != ch || !got.AuthRequired() {
		t.Fatalf("challenge %d bytes: %+v %v", len(cb), got, err)
	}
	a := Auth{AccessKeyID: "CTXABCDEFGHIJKLMNOPQ", Proof: AuthProof("s3cret", ch.Nonce, "CTXABCDEFGHIJKLMNOPQ")}
	ab := AppendAuth(nil, a)
	if got, err := DecodeAuth(ab); len(ab) != AuthSize(len(a.AccessKeyID)) || err != nil || got != a {
		t.Fatalf("auth: %+v %v", got, err)
	}
	anon := AppendAuth(nil, Auth{})
	if got, err := DecodeAuth(anon); err != nil || got != (Auth{}) || len(anon) != AuthSize(0) {
		t.Fatalf("anonymous auth: %+v %v", got, err)
	}
	rb := AppendAuthReply(nil, AuthReply{Code: errcode.Unauthenticated})
	if got, err := DecodeAuthReply(rb); len(rb) != AuthReplySize || err != nil || got.Code != errcode.Unauthenticated {
		t.Fatalf("auth reply: %+v %v", got, err)
	}
}

func TestAuthProofBindsEverything(t *testing.T) {
	var n1, n2 [NonceSize]byte
	n2[0] = 1
	base := AuthProof("secret", n1, "CTXKEY")
	for name, p := range map[string][ProofSize]byte{
		"secret": AuthProof("secreT", n1, "CTXKEY"),
		"nonce":  AuthProof("secret", n2, "CTXKEY"),
		"key id": AuthProof("secret", n1, "CTXKEZ"),
	} {
		if p == base {
			t.Errorf("changing the %s does not change the proof", name)
		}
	}
	if AuthProof("secret", n1, "CTXKEY") != base {
		t.Fatal("proof is not deterministic")
	}
}

func TestAuthMessagesMalformed(t *testing.T) {
	ch := AppendChallenge(nil, Challenge{})
	badFlags := bytes.Clone(ch)
	badFlags[0] = 0x80
	badReserved := bytes.Clone(ch)
	badReserved[3] = 1
	auth := AppendAuth(nil, Auth{AccessKeyID: "CTXK"})
	badAuthReserved := bytes.Clone(auth)
	badAuthReserved[1] = 1
	longID := []byte{MaxAccessKeyIDLen + 1, 0}
	reply := AppendAuthReply(nil, AuthReply{})
	badReply := bytes.Clone(reply)
	badReply[5] = 1
	tests := []struct {
		name string
		err  error
	}{
		{"short challenge", func() error { _, err := DecodeChallenge(ch[:10]); return err }()},
		{"challenge flags", func() error { _, err := DecodeChallenge(badFlags); return err }()},
		{"challenge reserved", func() error { _, err := DecodeChallenge(badReserved); return err }()},
		{"short auth", func() error { _, err := DecodeAuth(auth[:len(auth)-1]); return err }()},
		{"long auth", func() error { _, err := DecodeAuth(append(bytes.Clone(auth), 0)); return err }()},
		{"auth reserved", func() error { _, err := DecodeAuth(badAuthReserved); return err }()},
		{"auth id too long", func() error { _, err := AuthIDLen(longID); return err }()},
		{"short reply", func() error { _, err := DecodeAuthReply(reply[:4]); return err }()},
		{"reply reserved", func() error { _, err := DecodeAuthReply(badReply); return err }()},
	}
	for _, tc := range tests {
		if !errors.Is(tc.err, errcode.ErrMalformedFrame) {
			t.Errorf("%s: %v, want MalformedFrame", tc.name, tc.err)
		}
	}
}

// FuzzDecodeAuth: the server's decoder of untrusted Auth bytes never panics,
// and what it accepts re-encodes to the same bytes.
func FuzzDecodeAuth(f *testing.F) {
	f.Add(AppendAuth(nil, Auth{}))
	f.Add(AppendAuth(nil, Auth{AccessKeyID: "CTXABCDEFGHIJKLMNOPQ"}))
	f.Add([]byte{200, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := DecodeAuth(b)
		if err != nil {
			if !errors.Is(err, errcode.ErrMalformedFrame) {
				t.Fatalf("error %v does not wrap MalformedFrame", err)
			}
			return
		}
		if got := AppendAuth(nil, a); !bytes.Equal(got, b) {
			t.Fatalf("re-encoded %x, decoded from %x", got, b)
		}
	})
}

// FuzzDecodeChallenge: the client's decoder rejects with MalformedFrame
// anything shorter than a challenge, with unknown flags or with nonzero
// reserved bytes, and otherwise re-encodes to exactly the challenge's bytes.
func FuzzDecodeChallenge(f *testing.F) {
	f.Add(AppendChallenge(nil, Challenge{Flags: ChallengeAuthRequired}))
	f.Add(AppendChallenge(nil, Challenge{Nonce: [NonceSize]byte{1, 2, 3}}))
	f.Add(AppendChallenge(nil, Challenge{Flags: 0x8000}))
	f.Add(append(AppendChallenge(nil, Challenge{}), 9))
	bad := AppendChallenge(nil, Challenge{})
	bad[2] = 1
	f.Add(bad)
	f.Add([]byte{1, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeChallenge(b)
		valid := len(b) >= ChallengeSize && le.Uint16(b)&^challengeFlagsKnown == 0 && le.Uint16(b[2:]) == 0
		if err != nil {
			if !errors.Is(err, errcode.ErrMalformedFrame) {
				t.Fatalf("error %v does not wrap MalformedFrame", err)
			}
			if valid {
				t.Fatalf("valid challenge %x rejected: %v", b, err)
			}
			return
		}
		if !valid {
			t.Fatalf("invalid challenge %x accepted", b)
		}
		if got := AppendChallenge(nil, c); !bytes.Equal(got, b[:ChallengeSize]) {
			t.Fatalf("re-encoded %x, decoded from %x", got, b)
		}
	})
}
