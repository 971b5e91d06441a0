package native

import (
	"crypto/hmac"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
	"github.com/ctxtier/ctxtier/internal/membudget"
)

// Option adjusts a Server at construction.
type Option func(*Server)

// WithBudget makes every request body wait for its bytes in b, the node's
// in-flight budget shared with its other surfaces (nil: no bound).
func WithBudget(b *membudget.Budget) Option { return func(s *Server) { s.budget = b } }

// WithAuth makes the server require credentials: every connection must
// complete the version-2 handshake with an access key of keys and prove it
// holds the key's secret, and every request may only touch namespaces the
// key's scope allows. Without it (the default) every client may touch every
// namespace, and version-1 clients are accepted.
func WithAuth(keys credential.Lookuper) Option { return func(s *Server) { s.keys = keys } }

// errNoCredentials answers a handshake without credentials when they are required.
var errNoCredentials = fmt.Errorf("%w: this server requires credentials (protocol version 2 with an access key)", block.ErrUnauthenticated)

// denied is the answer for a namespace outside the key's scope. It is the
// same whether or not the namespace exists, so a key cannot probe for
// namespaces it may not touch.
func denied(ns string) error {
	return fmt.Errorf("%w: namespace %q is outside this access key's scope", block.ErrPermissionDenied, ns)
}

// authenticate runs the version-2 exchange after the hello reply was sent:
// read the client's Auth, check its proof against nonce, answer. It records
// the connection's access key id and returns false (after answering) when
// the client is refused.
func (c *conn) authenticate(ch wire.Challenge) bool {
	s := c.s
	var head [2]byte
	if _, err := io.ReadFull(c.br, head[:]); err != nil {
		s.log.Debug("auth read failed", "remote", c.nc.RemoteAddr(), "err", err)
		return false
	}
	var a wire.Auth
	n, err := wire.AuthIDLen(head[:])
	if err == nil {
		buf := make([]byte, wire.AuthSize(n))
		copy(buf, head[:])
		if _, rerr := io.ReadFull(c.br, buf[2:]); rerr != nil {
			s.log.Debug("auth read failed", "remote", c.nc.RemoteAddr(), "err", rerr)
			return false
		}
		a, err = wire.DecodeAuth(buf)
	}
	if err == nil {
		err = c.verify(a, ch.Nonce)
	}
	if _, werr := c.nc.Write(wire.AppendAuthReply(nil, wire.AuthReply{Code: errcode.Of(err)})); werr != nil {
		return false
	}
	if err != nil {
		s.log.Info("authentication refused", "remote", c.nc.RemoteAddr(), "access_key", a.AccessKeyID, "err", err)
		return false
	}
	return true
}

// verify checks an Auth. With authentication off, credentials are not
// checked (and grant nothing more than anonymity does).
func (c *conn) verify(a wire.Auth, nonce [wire.NonceSize]byte) error {
	keys := c.s.keys
	if keys == nil {
		return nil
	}
	if a.AccessKeyID == "" {
		return errNoCredentials
	}
	cred, err := keys.Lookup(a.AccessKeyID)
	if err != nil {
		return err
	}
	want := wire.AuthProof(cred.Secret, nonce, cred.AccessKeyID)
	if !hmac.Equal(want[:], a.Proof[:]) {
		return fmt.Errorf("%w: proof does not match access key %q", block.ErrUnauthenticated, a.AccessKeyID)
	}
	c.keyID = cred.AccessKeyID
	return nil
}

// newChallenge draws a fresh nonce.
func (s *Server) newChallenge() (wire.Challenge, error) {
	ch := wire.Challenge{}
	if s.keys != nil {
		ch.Flags |= wire.ChallengeAuthRequired
	}
	if _, err := rand.Read(ch.Nonce[:]); err != nil {
		return ch, fmt.Errorf("%w: random nonce: %v", errcode.ErrInternal, err)
	}
	return ch, nil
}

// authorize is the per-request access check of a request on namespace ns:
// nil when authentication is off or the connection's key allows ns. The key
// is looked up again on every request, so a revoked key or a narrowed scope
// takes effect on open connections too (within the credential store's
// reload interval).
func (c *conn) authorize(ns string) error {
	keys := c.s.keys
	if keys == nil {
		return nil
	}
	cred, err := keys.Lookup(c.keyID)
	if err != nil {
		if errors.Is(err, block.ErrUnauthenticated) {
			return fmt.Errorf("%w: access key %q is no longer valid", block.ErrUnauthenticated, c.keyID)
		}
		return err
	}
	if !cred.Allows(ns) {
		return denied(ns)
	}
	return nil
}

// deniedResponse answers a request that authorize refused. PermissionDenied
// on a batch opcode is answered per item (every item of the frame is in the
// refused namespace), like any other per-item failure, so a client batch
// spanning several namespaces keeps the items it may touch; everything else
// (LOOKUP and ROUTE, which have no items, and Unauthenticated) is request-level.
func (c *conn) deniedResponse(req *wire.Request, start time.Time, err error) *response {
	h := req.Header
	code := errcode.Of(err)
	n := len(req.Keys)
	switch h.Op {
	case wire.OpPut:
		n = len(req.Items)
	case wire.OpGet, wire.OpExists, wire.OpDelete, wire.OpDeleteIf, wire.OpPin:
	default:
		return errorResponse(h, start, code, err.Error(), false)
	}
	if code != errcode.PermissionDenied {
		return errorResponse(h, start, code, err.Error(), false)
	}
	msg := err.Error()
	b := make([]byte, wire.HeaderSize, wire.HeaderSize+n*wire.StatusLen(code, msg))
	for range n {
		b = wire.AppendStatus(b, code, msg)
		c.s.met.Block(Proto, h.Op.String(), code)
	}
	wire.PutHeader(b, wire.Header{Length: uint32(len(b) - wire.HeaderSize), Op: h.Op, Flags: wire.FlagResponse, ID: h.ID, Count: uint32(n)})
	return &response{op: h.Op, start: start, buf: b}
}
