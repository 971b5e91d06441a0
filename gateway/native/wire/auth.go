package wire

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
)

// Version 2 of the handshake adds a challenge/response after the hello
// reply (docs/protocol.md, "Authentication"):
//
//	client → hello (version 2)
//	server → hello reply (32 bytes), then, when its code is 0, a Challenge
//	client → Auth: an access key id and HMAC-SHA256(secret, challenge ...)
//	server → AuthReply: code 0, or 15 Unauthenticated and the connection closes
//
// The secret never crosses the wire; the nonce is fresh per connection, so a
// recorded proof cannot be replayed on another connection.
const (
	// ChallengeSize is the size of the server's challenge.
	ChallengeSize = 4 + NonceSize
	// NonceSize is the size of the challenge's random nonce.
	NonceSize = 32
	// ProofSize is the size of an Auth proof (an HMAC-SHA256).
	ProofSize = sha256.Size
	// MaxAccessKeyIDLen bounds the access key id in an Auth message.
	MaxAccessKeyIDLen = 128
	// AuthReplySize is the size of the server's answer to Auth.
	AuthReplySize = 8
)

// Challenge flags.
const (
	// ChallengeAuthRequired: the server refuses an Auth without valid credentials.
	ChallengeAuthRequired uint16 = 1 << 0
	challengeFlagsKnown          = ChallengeAuthRequired
)

// proofContext separates this HMAC from any other use of the secret (SigV4
// derives its keys from "AWS4"+secret, never from the secret itself).
const proofContext = "ctxtier-native-auth-v2\x00"

// Challenge is what a version-2 server sends after a successful hello reply.
type Challenge struct {
	Flags uint16
	Nonce [NonceSize]byte
}

// AuthRequired reports whether the server needs credentials.
func (c Challenge) AuthRequired() bool { return c.Flags&ChallengeAuthRequired != 0 }

// AppendChallenge appends c's ChallengeSize bytes.
func AppendChallenge(b []byte, c Challenge) []byte {
	b = le.AppendUint16(b, c.Flags)
	b = le.AppendUint16(b, 0) // reserved
	return append(b, c.Nonce[:]...)
}

// DecodeChallenge parses a challenge. Unknown flags or non-zero reserved
// bytes are ErrMalformedFrame.
func DecodeChallenge(b []byte) (Challenge, error) {
	if len(b) < ChallengeSize {
		return Challenge{}, fmt.Errorf("%w: challenge is %d bytes, want %d", errcode.ErrMalformedFrame, len(b), ChallengeSize)
	}
	c := Challenge{Flags: le.Uint16(b)}
	if c.Flags&^challengeFlagsKnown != 0 || le.Uint16(b[2:]) != 0 {
		return Challenge{}, fmt.Errorf("%w: challenge flags %#04x / reserved %#04x", errcode.ErrMalformedFrame, c.Flags, le.Uint16(b[2:]))
	}
	copy(c.Nonce[:], b[4:ChallengeSize])
	return c, nil
}

// Auth is the client's answer to a challenge. An empty AccessKeyID is an
// anonymous client (its proof is all zeros), accepted only when the server
// does not require credentials.
type Auth struct {
	AccessKeyID string
	Proof       [ProofSize]byte
}

// AuthSize is the encoded size of an Auth with an access key id of idLen bytes.
func AuthSize(idLen int) int { return 2 + idLen + ProofSize }

// AppendAuth appends a: u8 id length, u8 reserved, the id, the proof.
func AppendAuth(b []byte, a Auth) []byte {
	b = append(b, byte(len(a.AccessKeyID)), 0)
	b = append(b, a.AccessKeyID...)
	return append(b, a.Proof[:]...)
}

// AuthIDLen reads the id length from an Auth's first two bytes, so a reader
// knows how much more to read; a bad length or reserved byte is
// ErrMalformedFrame.
func AuthIDLen(b []byte) (int, error) {
	if len(b) < 2 {
		return 0, fmt.Errorf("%w: auth message shorter than 2 bytes", errcode.ErrMalformedFrame)
	}
	if b[1] != 0 {
		return 0, fmt.Errorf("%w: auth reserved byte %#02x", errcode.ErrMalformedFrame, b[1])
	}
	n := int(b[0])
	if n > MaxAccessKeyIDLen {
		return 0, fmt.Errorf("%w: access key id of %d bytes (at most %d)", errcode.ErrMalformedFrame, n, MaxAccessKeyIDLen)
	}
	return n, nil
}

// DecodeAuth parses a whole Auth message.
func DecodeAuth(b []byte) (Auth, error) {
	n, err := AuthIDLen(b)
	if err != nil {
		return Auth{}, err
	}
	if len(b) != AuthSize(n) {
		return Auth{}, fmt.Errorf("%w: auth message is %d bytes, want %d", errcode.ErrMalformedFrame, len(b), AuthSize(n))
	}
	a := Auth{AccessKeyID: string(b[2 : 2+n])}
	copy(a.Proof[:], b[2+n:])
	return a, nil
}

// AuthProof is HMAC-SHA256 under secret of the context string, the
// challenge's nonce, and the access key id (length-prefixed), binding the
// proof to this connection and this key.
func AuthProof(secret string, nonce [NonceSize]byte, accessKeyID string) [ProofSize]byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(proofContext))
	m.Write(nonce[:])
	m.Write([]byte{byte(len(accessKeyID))})
	m.Write([]byte(accessKeyID))
	var p [ProofSize]byte
	m.Sum(p[:0])
	return p
}

// AuthReply is the server's verdict on an Auth.
type AuthReply struct {
	Code errcode.Code
}

// AppendAuthReply appends r's AuthReplySize bytes: u16 code, 6 reserved.
func AppendAuthReply(b []byte, r AuthReply) []byte {
	b = le.AppendUint16(b, uint16(r.Code))
	b = le.AppendUint16(b, 0)
	return le.AppendUint32(b, 0)
}

// DecodeAuthReply parses an auth reply.
func DecodeAuthReply(b []byte) (AuthReply, error) {
	if len(b) < AuthReplySize {
		return AuthReply{}, fmt.Errorf("%w: auth reply is %d bytes, want %d", errcode.ErrMalformedFrame, len(b), AuthReplySize)
	}
	if le.Uint16(b[2:]) != 0 || le.Uint32(b[4:]) != 0 {
		return AuthReply{}, fmt.Errorf("%w: auth reply reserved bytes must be zero", errcode.ErrMalformedFrame)
	}
	return AuthReply{Code: errcode.Code(le.Uint16(b))}, nil
}

// ValidAccessKeyID checks an id before it goes on the wire.
func ValidAccessKeyID(id string) error {
	if len(id) > MaxAccessKeyIDLen {
		return fmt.Errorf("%w: access key id of %d bytes (at most %d)", block.ErrInvalidArgument, len(id), MaxAccessKeyIDLen)
	}
	return nil
}
