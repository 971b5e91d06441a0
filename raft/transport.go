package raft

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TLS configures transport security for Raft and node-to-node traffic. Every
// node presents Certificate (as server, and as client when Mutual) and
// trusts peers whose certificate chains to RootCAs.
type TLS struct {
	Certificate tls.Certificate
	RootCAs     *x509.CertPool
	// ServerName is the name peers' certificates carry; empty means the host
	// part of the dialled address (then certificates need IP or DNS SANs for
	// every node's address).
	ServerName string
	// Mutual requires and verifies a client certificate on every connection.
	Mutual bool
}

// LoadTLS reads a PEM certificate, key and CA bundle.
func LoadTLS(certFile, keyFile, caFile, serverName string, mutual bool) (*TLS, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: raft tls: %v", block.ErrInvalidArgument, err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("%w: raft tls ca: %v", block.ErrInvalidArgument, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: raft tls ca %s: no certificates", block.ErrInvalidArgument, caFile)
	}
	return &TLS{Certificate: cert, RootCAs: pool, ServerName: serverName, Mutual: mutual}, nil
}

// ServerConfig is the crypto/tls configuration for accepting connections.
func (t *TLS) ServerConfig() *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{t.Certificate}}
	if t.Mutual {
		c.ClientAuth = tls.RequireAndVerifyClientCert
		c.ClientCAs = t.RootCAs
	}
	return c
}

// ClientConfig is the crypto/tls configuration for dialling host.
func (t *TLS) ClientConfig(host string) *tls.Config {
	name := t.ServerName
	if name == "" {
		name = host
	}
	c := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: t.RootCAs, ServerName: name}
	if t.Mutual {
		c.Certificates = []tls.Certificate{t.Certificate}
	}
	return c
}

// StreamLayer is a raft.StreamLayer over TCP that wraps every connection in
// TLS when configured. It is also usable for other node-to-node streams.
type StreamLayer struct {
	net.Listener
	advertise net.Addr
	tls       *TLS
	server    *tls.Config
}

// NewStreamLayer wraps ln. advertise is the address peers dial (nil: the
// listener's). t nil means plain TCP.
func NewStreamLayer(ln net.Listener, advertise net.Addr, t *TLS) *StreamLayer {
	if advertise == nil {
		advertise = ln.Addr()
	}
	s := &StreamLayer{Listener: ln, advertise: advertise, tls: t}
	if t != nil {
		s.server = t.ServerConfig()
	}
	return s
}

// Accept returns the next connection; with TLS, the handshake runs on the
// connection's first read (in Raft's per-connection goroutine).
func (s *StreamLayer) Accept() (net.Conn, error) {
	c, err := s.Listener.Accept()
	if err != nil || s.server == nil {
		return c, err
	}
	return tls.Server(c, s.server), nil
}

// Addr is the advertised address.
func (s *StreamLayer) Addr() net.Addr { return s.advertise }

// Dial connects to a peer, completing the TLS handshake within timeout.
func (s *StreamLayer) Dial(address hraft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.tls.dial(ctx, string(address))
}

// dial connects to address over TCP and, when t is not nil, completes a TLS
// handshake as a client before ctx ends.
func (t *TLS) dial(ctx context.Context, address string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", address)
	if err != nil || t == nil {
		return c, err
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		c.Close()
		return nil, err
	}
	tc := tls.Client(c, t.ClientConfig(host))
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("raft tls handshake with %s: %w", address, err)
	}
	return tc, nil
}

// rejectWait bounds how long CheckPeer waits for a peer to refuse this
// node's client certificate after a TLS 1.3 handshake that looked complete.
const rejectWait = 300 * time.Millisecond

// CheckPeer proves that the node listening on raftAddr holds a certificate
// this node trusts, by a TLS handshake with it. With Mutual it also waits
// briefly (rejectWait) for the peer to refuse this node's certificate: in
// TLS 1.3 the client's side of the handshake completes before the server
// has checked the client certificate, so a refusal only shows on the first
// read. A certificate either side does not trust is ErrPermissionDenied; a
// peer that cannot be reached, ErrUnavailable.
func (t *TLS) CheckPeer(ctx context.Context, raftAddr string) error {
	c, err := t.dial(ctx, raftAddr)
	if err == nil && t.Mutual {
		dl := time.Now().Add(rejectWait)
		if d, ok := ctx.Deadline(); ok && d.Before(dl) {
			dl = d
		}
		c.SetReadDeadline(dl)
		// Raft's server side never speaks first, so a read ends only on
		// the deadline, a refusal (a TLS alert) or the peer closing.
		if _, rerr := c.Read(make([]byte, 1)); !isTimeout(rerr) {
			err = rerr
		}
	}
	if c != nil {
		c.Close()
	}
	switch {
	case err == nil:
		return nil
	case certRefused(err):
		return fmt.Errorf("%w: raft tls: %s does not present a certificate this node trusts, or refuses this node's: %v", block.ErrPermissionDenied, raftAddr, err)
	default:
		return fmt.Errorf("%w: raft tls: checking %s: %v", block.ErrUnavailable, raftAddr, err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// certRefused reports whether a TLS failure is about certificates: ours
// failed to verify theirs, or they sent an alert (which, after a complete
// handshake, is their refusal of ours).
func certRefused(err error) bool {
	var verr *tls.CertificateVerificationError
	var uerr x509.UnknownAuthorityError
	var herr x509.HostnameError
	var ierr x509.CertificateInvalidError
	var oerr *net.OpError
	return errors.As(err, &verr) || errors.As(err, &uerr) || errors.As(err, &herr) || errors.As(err, &ierr) ||
		errors.As(err, &oerr) && oerr.Op == "remote error"
}
