package wire

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Dial connects to a native-protocol server at addr over TCP (with no
// Nagle delay) and, when cfg is set, in TLS, whose handshake completes
// before ctx ends; an empty cfg.ServerName becomes the host part of addr.
// Failures wrap block.ErrUnavailable (block.ErrInvalidArgument for an
// address TLS cannot take a server name from).
func Dial(ctx context.Context, addr string, cfg *tls.Config) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: dial %s: %v", block.ErrUnavailable, addr, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if cfg == nil {
		return nc, nil
	}
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("%w: dial %s: %v", block.ErrInvalidArgument, addr, err)
		}
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("%w: tls handshake with %s: %v", block.ErrUnavailable, addr, err)
	}
	return tc, nil
}
