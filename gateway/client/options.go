package client

import (
	"crypto/tls"
	"fmt"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
)

// Options configure a Client.
type Options struct {
	// Conns is the number of pooled connections; calls are spread over them
	// round robin and pipelined on each.
	Conns int
	// DialTimeout bounds dialing and the handshake of one connection (the
	// context given to Dial may end it sooner).
	DialTimeout time.Duration
	// WriteTimeout bounds writing one request frame (0: none).
	WriteTimeout time.Duration
	// DirectFallback makes ReadDirect read with GET, from then on, when the
	// server is not co-located (a descriptor's file cannot be opened here),
	// instead of returning *NotColocatedError.
	DirectFallback bool
	// AccessKeyID and Secret are the credentials (from `ctxctl keys
	// create`) for a server started with --auth required. The handshake
	// proves the secret with an HMAC of a server-sent nonce; the secret
	// itself never crosses the wire. Empty: connect anonymously.
	AccessKeyID string
	Secret      string
	// TLS, when set, wraps every native connection in TLS; the TLS
	// handshake runs within DialTimeout, before the protocol's own. An
	// empty ServerName becomes the host part of the dialed address (ctxd
	// peers pass raft.TLS.ClientConfig). nil: plain TCP.
	TLS *tls.Config

	// version overrides the protocol version sent in the handshake (tests).
	version uint16
}

// DefaultOptions returns the defaults: 2 connections, 5 s dial timeout, 30 s
// write timeout.
func DefaultOptions() Options {
	return Options{Conns: 2, DialTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second}
}

// withDefaults fills zero fields from DefaultOptions.
func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.Conns == 0 {
		o.Conns = d.Conns
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = d.DialTimeout
	}
	return o
}

// Validate checks the options (after zero fields took their defaults).
func (o Options) Validate() error {
	switch {
	case o.Conns < 1 || o.Conns > 1024:
		return fmt.Errorf("%w: client: Conns %d out of range 1..1024", block.ErrInvalidArgument, o.Conns)
	case o.DialTimeout < 0 || o.WriteTimeout < 0:
		return fmt.Errorf("%w: client: timeouts must not be negative", block.ErrInvalidArgument)
	case (o.AccessKeyID == "") != (o.Secret == ""):
		return fmt.Errorf("%w: client: AccessKeyID and Secret go together", block.ErrInvalidArgument)
	}
	if err := wire.ValidAccessKeyID(o.AccessKeyID); err != nil {
		return fmt.Errorf("client: %w", err)
	}
	return nil
}
