package raft

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/internal/clustersecret"
)

// The Raft transport's peer authentication. Before any Raft byte, the
// dialling node (client) and the accepting one (server) run a mutual
// challenge-response keyed by the cluster secret:
//
//	client → server  hello  nonce_c (32 random bytes)
//	server → client  hello  nonce_s (32 random bytes)
//	client → server  proof  HMAC(K, "client" | nonce_c | nonce_s)
//	server → client  accept HMAC(K, "server" | nonce_c | nonce_s)
//	             or  refuse (the client's proof was wrong)
//
// K is derived from the secret with HKDF-SHA256 and its own label, so the
// secret never travels and K serves nothing else. Both nonces are fresh per
// connection, so a recorded exchange proves nothing on a new one, and the
// role label keeps one side's proof from passing as the other's. The
// server proves itself only after the client has, so an anonymous caller
// learns nothing but a refusal. Every frame is bounded (maxFramePayload)
// and the whole exchange has a deadline.

// authKeyLabel is the HKDF label of the Raft transport's key.
const authKeyLabel = "ctxtier raft transport auth v1"

// Frame layout: magic (4) | kind (1) | payload length (1) | payload.
const (
	frameMagic      = "CXRA"
	frameHeaderLen  = len(frameMagic) + 2
	nonceLen        = 32
	macLen          = sha256.Size
	maxFramePayload = 64
	maxFrameLen     = frameHeaderLen + maxFramePayload
)

// Frame kinds.
const (
	kindHello  byte = 1
	kindProof  byte = 2
	kindAccept byte = 3
	kindRefuse byte = 4
)

// DefaultAuthTimeout bounds one handshake when Config.AuthTimeout is 0.
const DefaultAuthTimeout = 5 * time.Second

// Handshake errors. ErrPeerAuth is the family; errors.Is matches the
// specific one and ErrPeerAuth.
var (
	ErrPeerAuth = errors.New("raft: peer authentication failed")
	// ErrPeerRefused: the peer refused this node's proof (its cluster
	// secret differs from ours).
	ErrPeerRefused = fmt.Errorf("%w: refused our cluster secret", ErrPeerAuth)
	// ErrPeerProof: the peer's own proof was wrong.
	ErrPeerProof = fmt.Errorf("%w: the peer could not prove the cluster secret", ErrPeerAuth)
	// ErrPeerSilent: the peer hung up, timed out or spoke something else
	// during the handshake (a node of a version without it, or not a
	// ctxtier Raft port).
	ErrPeerSilent = fmt.Errorf("%w: no cluster-secret handshake", ErrPeerAuth)
	// errFrame is a malformed frame.
	errFrame = fmt.Errorf("%w: malformed handshake frame", ErrPeerAuth)
)

// frame is one decoded handshake message.
type frame struct {
	kind    byte
	payload []byte
}

// payloadLen is the exact length of a kind's payload (-1: up to
// maxFramePayload; 0 with ok false: unknown kind).
func payloadLen(kind byte) (n int, ok bool) {
	switch kind {
	case kindHello:
		return nonceLen, true
	case kindProof, kindAccept:
		return macLen, true
	case kindRefuse:
		return -1, true
	}
	return 0, false
}

// encode appends f's wire form to b.
func (f frame) encode(b []byte) []byte {
	b = append(b, frameMagic...)
	b = append(b, f.kind, byte(len(f.payload)))
	return append(b, f.payload...)
}

// parseHeader checks a frame header and returns its kind and payload length.
func parseHeader(h []byte) (kind byte, n int, err error) {
	if len(h) < frameHeaderLen {
		return 0, 0, fmt.Errorf("%w: %d-byte header", errFrame, len(h))
	}
	if string(h[:len(frameMagic)]) != frameMagic {
		return 0, 0, fmt.Errorf("%w: bad magic %q", errFrame, h[:len(frameMagic)])
	}
	kind, n = h[len(frameMagic)], int(h[len(frameMagic)+1])
	want, ok := payloadLen(kind)
	switch {
	case !ok:
		return 0, 0, fmt.Errorf("%w: unknown kind %d", errFrame, kind)
	case n > maxFramePayload:
		return 0, 0, fmt.Errorf("%w: %d-byte payload (at most %d)", errFrame, n, maxFramePayload)
	case want >= 0 && n != want:
		return 0, 0, fmt.Errorf("%w: kind %d with a %d-byte payload (want %d)", errFrame, kind, n, want)
	}
	return kind, n, nil
}

// decodeFrame decodes the frame at the start of b and returns it with the
// number of bytes it took.
func decodeFrame(b []byte) (frame, int, error) {
	kind, n, err := parseHeader(b)
	if err != nil {
		return frame{}, 0, err
	}
	if len(b) < frameHeaderLen+n {
		return frame{}, 0, fmt.Errorf("%w: truncated payload", errFrame)
	}
	p := append([]byte(nil), b[frameHeaderLen:frameHeaderLen+n]...)
	return frame{kind: kind, payload: p}, frameHeaderLen + n, nil
}

// readFrame reads exactly one frame from r, never more than maxFrameLen
// bytes (so it does not consume the Raft bytes after the handshake).
func readFrame(r io.Reader) (frame, error) {
	var buf [maxFrameLen]byte
	if _, err := io.ReadFull(r, buf[:frameHeaderLen]); err != nil {
		return frame{}, err
	}
	kind, n, err := parseHeader(buf[:frameHeaderLen])
	if err != nil {
		return frame{}, err
	}
	if _, err := io.ReadFull(r, buf[frameHeaderLen:frameHeaderLen+n]); err != nil {
		return frame{}, err
	}
	return frame{kind: kind, payload: append([]byte(nil), buf[frameHeaderLen:frameHeaderLen+n]...)}, nil
}

// PeerAuth runs the handshake for one node: the key, the deadline, and a
// rate-limited log of refused peers.
type PeerAuth struct {
	key     []byte
	timeout time.Duration
	log     *slog.Logger

	mu         sync.Mutex
	nextLog    time.Time
	suppressed int

	// inflight counts server-side handshakes in progress; refused counts
	// peers this node refused (tests read both).
	inflight atomic.Int64
	refused  atomic.Int64
}

// logEvery is the least time between two log lines about refused peers.
const logEvery = 5 * time.Second

// NewPeerAuth derives the transport key from the cluster secret. timeout
// bounds each handshake (0: DefaultAuthTimeout).
func NewPeerAuth(secret string, timeout time.Duration, log *slog.Logger) (*PeerAuth, error) {
	if err := clustersecret.Validate(secret); err != nil {
		return nil, fmt.Errorf("raft peer auth: %w", err)
	}
	if timeout <= 0 {
		timeout = DefaultAuthTimeout
	}
	if log == nil {
		log = slog.Default()
	}
	key, err := hkdf.Key(sha256.New, []byte(secret), nil, authKeyLabel, 32)
	if err != nil {
		return nil, fmt.Errorf("raft peer auth: %w", err)
	}
	return &PeerAuth{key: key, timeout: timeout, log: log}, nil
}

// mac is the proof of role over both nonces.
func (a *PeerAuth) mac(role string, nc, ns []byte) []byte {
	h := hmac.New(sha256.New, a.key)
	h.Write([]byte(role))
	h.Write(nc)
	h.Write(ns)
	return h.Sum(nil)
}

func nonce() ([]byte, error) {
	b := make([]byte, nonceLen)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("raft peer auth: random: %w", err)
	}
	return b, nil
}

// deadline is the handshake's end: now plus the timeout, or limit when
// that is earlier (zero: none).
func (a *PeerAuth) deadline(limit time.Time) time.Time {
	d := time.Now().Add(a.timeout)
	if !limit.IsZero() && limit.Before(d) {
		d = limit
	}
	return d
}

// Client runs the dialling side on c (peer names the address for errors)
// and clears c's deadline when it succeeds. limit, when not zero, ends the
// handshake earlier than the timeout.
func (a *PeerAuth) Client(c net.Conn, peer string, limit time.Time) error {
	if err := c.SetDeadline(a.deadline(limit)); err != nil {
		return fmt.Errorf("raft peer %s: %w", peer, err)
	}
	nc, err := nonce()
	if err != nil {
		return err
	}
	silent := func(step string, err error) error {
		if certRefused(err) {
			return fmt.Errorf("raft peer %s refused our TLS client certificate: %w", peer, err)
		}
		return fmt.Errorf("raft peer %s %s: %w (it may run a version without Raft authentication, or not be a ctxtier Raft port): %w", peer, step, ErrPeerSilent, err)
	}
	if _, err := c.Write(frame{kindHello, nc}.encode(nil)); err != nil {
		return silent("did not take our handshake", err)
	}
	hello, err := readFrame(c)
	if err == nil && hello.kind != kindHello {
		err = fmt.Errorf("%w: kind %d, want hello", errFrame, hello.kind)
	}
	if err != nil {
		return silent("did not answer the cluster-secret handshake", err)
	}
	ns := hello.payload
	if _, err := c.Write(frame{kindProof, a.mac("client", nc, ns)}.encode(nil)); err != nil {
		return silent("hung up during the handshake", err)
	}
	reply, err := readFrame(c)
	if err != nil {
		return silent("hung up during the handshake", err)
	}
	switch reply.kind {
	case kindRefuse:
		return fmt.Errorf("raft peer %s refused our cluster secret (its secret differs; every node needs the same --cluster-secret): %w", peer, ErrPeerRefused)
	case kindAccept:
		if !hmac.Equal(reply.payload, a.mac("server", nc, ns)) {
			return fmt.Errorf("raft peer %s: %w", peer, ErrPeerProof)
		}
	default:
		return silent("answered out of turn", fmt.Errorf("%w: kind %d", errFrame, reply.kind))
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		return fmt.Errorf("raft peer %s: %w", peer, err)
	}
	return nil
}

// Server runs the accepting side on c and clears c's deadline when it
// succeeds. A peer that fails is logged (rate-limited) and the error
// returned; the caller closes c.
func (a *PeerAuth) Server(c net.Conn) error {
	a.inflight.Add(1)
	defer a.inflight.Add(-1)
	err := a.serve(c)
	if err != nil {
		a.refused.Add(1)
		a.logRefusal(c.RemoteAddr(), err)
	}
	return err
}

func (a *PeerAuth) serve(c net.Conn) error {
	if err := c.SetDeadline(a.deadline(time.Time{})); err != nil {
		return err
	}
	hello, err := readFrame(c)
	if err == nil && hello.kind != kindHello {
		err = fmt.Errorf("%w: kind %d, want hello", errFrame, hello.kind)
	}
	if err != nil {
		return fmt.Errorf("sent no cluster-secret handshake (a node of a version without Raft authentication, or not a ctxtier node): %w", err)
	}
	nc := hello.payload
	ns, err := nonce()
	if err != nil {
		return err
	}
	if _, err := c.Write(frame{kindHello, ns}.encode(nil)); err != nil {
		return fmt.Errorf("hung up during the handshake: %w", err)
	}
	proof, err := readFrame(c)
	if err == nil && proof.kind != kindProof {
		err = fmt.Errorf("%w: kind %d, want proof", errFrame, proof.kind)
	}
	if err != nil {
		return fmt.Errorf("sent no proof: %w", err)
	}
	if !hmac.Equal(proof.payload, a.mac("client", nc, ns)) {
		// Best effort: tell it why, so it reports a clear error.
		_, _ = c.Write(frame{kindRefuse, []byte("cluster secret mismatch")}.encode(nil))
		return fmt.Errorf("%w: its proof does not match our cluster secret", ErrPeerRefused)
	}
	if _, err := c.Write(frame{kindAccept, a.mac("server", nc, ns)}.encode(nil)); err != nil {
		return fmt.Errorf("hung up during the handshake: %w", err)
	}
	return c.SetDeadline(time.Time{})
}

// collector exports the refusals as ctxtier_raft_auth_refused_total.
func (a *PeerAuth) collector(nodeID string) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ctxtier_raft_auth_refused_total",
		Help:        "Raft connections this node refused because the peer failed the cluster-secret handshake (or never ran it).",
		ConstLabels: prometheus.Labels{"node_id": nodeID}},
		func() float64 { return float64(a.refused.Load()) })
}

// logRefusal logs a refused peer, at most one line per logEvery (the line
// says how many were left out since the last one).
func (a *PeerAuth) logRefusal(from net.Addr, err error) {
	a.mu.Lock()
	now := time.Now()
	if now.Before(a.nextLog) {
		a.suppressed++
		a.mu.Unlock()
		return
	}
	a.nextLog = now.Add(logEvery)
	n := a.suppressed
	a.suppressed = 0
	a.mu.Unlock()
	a.log.Warn("raft connection refused: peer failed the cluster-secret handshake", "remote", from.String(), "err", err, "refusals_not_logged", n)
}

// serverConn is an accepted connection whose handshake runs on its first
// Read or Write, in the transport's per-connection goroutine (Accept must
// not block on a slow peer). After a failed handshake the connection is
// closed and reads say io.EOF, so the transport ends it quietly (the
// refusal was logged here, rate-limited).
type serverConn struct {
	net.Conn
	auth *PeerAuth
	once sync.Once
	err  error
}

func (s *serverConn) handshake() error {
	s.once.Do(func() {
		if err := s.auth.Server(s.Conn); err != nil {
			s.Conn.Close()
			s.err = io.EOF
		}
	})
	return s.err
}

func (s *serverConn) Read(p []byte) (int, error) {
	if err := s.handshake(); err != nil {
		return 0, err
	}
	return s.Conn.Read(p)
}

func (s *serverConn) Write(p []byte) (int, error) {
	if err := s.handshake(); err != nil {
		return 0, err
	}
	return s.Conn.Write(p)
}
