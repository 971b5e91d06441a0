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

// StreamLayer is a raft.StreamLayer over TCP: every connection, in both
// directions, runs the cluster-secret handshake (PeerAuth) before any Raft
// byte, inside TLS when TLS is configured. It is also usable for other
// node-to-node streams.
type StreamLayer struct {
	net.Listener
	advertise net.Addr
	tls       *TLS
	server    *tls.Config
	auth      *PeerAuth
}

// NewStreamLayer wraps ln. advertise is the address peers dial (nil: the
// listener's). t nil means plain TCP. auth must not be nil: the Raft port
// never runs unauthenticated.
func NewStreamLayer(ln net.Listener, advertise net.Addr, t *TLS, auth *PeerAuth) *StreamLayer {
	if advertise == nil {
		advertise = ln.Addr()
	}
	if auth == nil {
		panic("raft: NewStreamLayer without PeerAuth")
	}
	s := &StreamLayer{Listener: ln, advertise: advertise, tls: t, auth: auth}
	if t != nil {
		s.server = t.ServerConfig()
	}
	return s
}

// Accept returns the next connection. The TLS and cluster-secret
// handshakes run on the connection's first read (in Raft's per-connection
// goroutine), so a slow peer never holds up the accept loop.
func (s *StreamLayer) Accept() (net.Conn, error) {
	c, err := s.Listener.Accept()
	if err != nil {
		return c, err
	}
	if s.server != nil {
		c = tls.Server(c, s.server)
	}
	return &serverConn{Conn: c, auth: s.auth}, nil
}

// Addr is the advertised address.
func (s *StreamLayer) Addr() net.Addr { return s.advertise }

// Dial connects to a peer, completing the TLS and cluster-secret
// handshakes within timeout.
func (s *StreamLayer) Dial(address hraft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.dial(ctx, string(address))
}

func (s *StreamLayer) dial(ctx context.Context, address string) (net.Conn, error) {
	c, err := s.tls.dial(ctx, address)
	if err != nil {
		return nil, err
	}
	dl, _ := ctx.Deadline()
	if err := s.auth.Client(c, address, dl); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
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

// CheckPeer proves that the node listening on raftAddr holds the cluster
// secret (and, with TLS, a certificate this node trusts, and trusts this
// node's) by connecting to it as Raft would. In TLS 1.3 a refusal of this
// node's client certificate shows only on the first read, which the
// cluster-secret handshake does. A peer that refuses this node or fails to
// prove itself is ErrPermissionDenied; one that cannot be reached,
// ErrUnavailable with TLS and ErrInvalidArgument without (as a join names
// it: an address nobody answers on).
func (s *StreamLayer) CheckPeer(ctx context.Context, raftAddr string) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	c, err := s.dial(ctx, raftAddr)
	if c != nil {
		c.Close()
	}
	switch {
	case err == nil:
		return nil
	case certRefused(err):
		return fmt.Errorf("%w: raft tls: %s does not present a certificate this node trusts, or refuses this node's: %v", block.ErrPermissionDenied, raftAddr, err)
	case errors.Is(err, ErrPeerRefused), errors.Is(err, ErrPeerProof):
		return fmt.Errorf("%w: %v", block.ErrPermissionDenied, err)
	case errors.Is(err, ErrPeerSilent):
		return fmt.Errorf("%w: %v", block.ErrUnavailable, err)
	case s.tls != nil:
		return fmt.Errorf("%w: raft tls: checking %s: %v", block.ErrUnavailable, raftAddr, err)
	default:
		return fmt.Errorf("%w: joiner's raft address %s does not answer: %v", block.ErrInvalidArgument, raftAddr, err)
	}
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
