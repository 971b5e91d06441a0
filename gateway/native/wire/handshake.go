package wire

import (
	"errors"
	"fmt"
	"io"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
)

// ErrHelloFlagsRefused marks a handshake that the server refused
// (MalformedFrame) while the hello carried flags: what a server older than
// one of the flags answers. The client connects again with fewer flags.
var ErrHelloFlagsRefused = errors.New("wire: hello flags refused")

// ClientHandshake runs a client's side of the handshake: it writes the
// hello for version v with flags to w, reads the reply from r and checks
// it (code, version, usable limits), and at version 2 answers the
// server's challenge with accessKeyID's proof of secret (anonymously when
// accessKeyID is empty) and reads the verdict. It returns the reply: the
// server's limits and the hello flags it accepted. I/O failures wrap
// block.ErrUnavailable; a refusal carries the server's code, and a
// MalformedFrame refusal of a hello with flags also wraps
// ErrHelloFlagsRefused.
func ClientHandshake(w io.Writer, r io.Reader, v, flags uint16, accessKeyID, secret string) (HelloReply, error) {
	if _, err := w.Write(AppendHello(nil, v, flags)); err != nil {
		return HelloReply{}, fmt.Errorf("%w: handshake: %v", block.ErrUnavailable, err)
	}
	var hb [HelloReplySize]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return HelloReply{}, fmt.Errorf("%w: handshake: %v", block.ErrUnavailable, err)
	}
	rep, err := DecodeHelloReply(hb[:])
	switch {
	case err != nil:
		return HelloReply{}, err
	case rep.Code != errcode.OK:
		err := rep.Code.Err(fmt.Sprintf("handshake refused: %s (client version %d, server version %d, hello flags %#04x)", rep.Code, v, rep.Version, flags))
		if rep.Code == errcode.MalformedFrame && flags != 0 {
			err = fmt.Errorf("%w: %w", ErrHelloFlagsRefused, err)
		}
		return HelloReply{}, err
	case rep.Version != v:
		return HelloReply{}, errcode.VersionMismatch.Err(fmt.Sprintf("server speaks protocol version %d, client %d", rep.Version, v))
	case rep.Limits.MaxFrameSize < HeaderSize || rep.Limits.MaxResponseSize < HeaderSize || rep.Limits.MaxBatch == 0:
		return HelloReply{}, errcode.MalformedFrame.Err("handshake reply announces unusable limits")
	}
	if v == Version1 {
		return rep, nil
	}
	var cb [ChallengeSize]byte
	if _, err := io.ReadFull(r, cb[:]); err != nil {
		return HelloReply{}, fmt.Errorf("%w: handshake challenge: %v", block.ErrUnavailable, err)
	}
	ch, err := DecodeChallenge(cb[:])
	if err != nil {
		return HelloReply{}, err
	}
	a := Auth{AccessKeyID: accessKeyID}
	switch {
	case a.AccessKeyID != "":
		a.Proof = AuthProof(secret, ch.Nonce, a.AccessKeyID)
	case ch.AuthRequired():
		return HelloReply{}, fmt.Errorf("%w: the server requires credentials (an access key id and its secret)", block.ErrUnauthenticated)
	}
	if _, err := w.Write(AppendAuth(nil, a)); err != nil {
		return HelloReply{}, fmt.Errorf("%w: handshake auth: %v", block.ErrUnavailable, err)
	}
	var ab [AuthReplySize]byte
	if _, err := io.ReadFull(r, ab[:]); err != nil {
		return HelloReply{}, fmt.Errorf("%w: handshake auth reply: %v", block.ErrUnavailable, err)
	}
	ar, err := DecodeAuthReply(ab[:])
	if err != nil {
		return HelloReply{}, err
	}
	if ar.Code != errcode.OK {
		return HelloReply{}, ar.Code.Err(fmt.Sprintf("authentication refused for access key %q: %s", accessKeyID, ar.Code))
	}
	return rep, nil
}
