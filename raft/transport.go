package raft

import (
	"context"
	"crypto/tls"
	"crypto/x509"
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
	d := net.Dialer{Timeout: timeout}
	c, err := d.Dial("tcp", string(address))
	if err != nil || s.tls == nil {
		return c, err
	}
	host, _, err := net.SplitHostPort(string(address))
	if err != nil {
		c.Close()
		return nil, err
	}
	tc := tls.Client(c, s.tls.ClientConfig(host))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("raft tls handshake with %s: %w", address, err)
	}
	return tc, nil
}
