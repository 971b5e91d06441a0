package raft

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

const (
	testSecret  = "raft-test-secret-0123456789abcdef"
	otherSecret = "another-cluster-secret-9876543210"
)

func testAuth(t testing.TB, secret string, timeout time.Duration) *PeerAuth {
	t.Helper()
	a, err := NewPeerAuth(secret, timeout, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// listenStream starts a StreamLayer on 127.0.0.1 with auth.
func listenStream(t *testing.T, tlsc *TLS, auth *PeerAuth) *StreamLayer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewStreamLayer(ln, nil, tlsc, auth)
	t.Cleanup(func() { s.Close() })
	return s
}

// echoOnce accepts one connection and echoes what it reads (the server
// side's first read runs the handshake); it reports the read error.
func echoOnce(s *StreamLayer) <-chan error {
	done := make(chan error, 1)
	go func() {
		c, err := s.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		buf := make([]byte, 5)
		if _, err := io.ReadFull(c, buf); err != nil {
			done <- err
			return
		}
		_, err = c.Write(buf)
		done <- err
	}()
	return done
}

// The handshake over real TCP, with and without TLS: the same secret gets
// through both ways and the bytes after it are Raft's, untouched; a
// different secret is refused with a clear error on the dialling side and
// the accepting side ends the connection with EOF (logged there).
func TestPeerAuthHandshake(t *testing.T) {
	pool, issue := testCA(t)
	for _, withTLS := range []bool{false, true} {
		for _, tc := range []struct {
			name           string
			client, server string
			wantErr        error // on Dial; nil: works
		}{
			{"same secret", testSecret, testSecret, nil},
			{"client has another secret", otherSecret, testSecret, ErrPeerRefused},
			{"server has another secret", testSecret, otherSecret, ErrPeerRefused},
		} {
			name := tc.name
			if withTLS {
				name += " over TLS"
			}
			t.Run(name, func(t *testing.T) {
				var tlsc *TLS
				if withTLS {
					tlsc = &TLS{Certificate: issue(), RootCAs: pool, Mutual: true}
				}
				srvAuth := testAuth(t, tc.server, 0)
				srv := listenStream(t, tlsc, srvAuth)
				cli := listenStream(t, tlsc, testAuth(t, tc.client, 0))
				done := echoOnce(srv)
				c, err := cli.Dial(hraft.ServerAddress(srv.Addr().String()), 10*time.Second)
				if tc.wantErr != nil {
					if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), "raft peer "+srv.Addr().String()+" refused our cluster secret") {
						t.Fatalf("dial: %v, want %v naming the peer", err, tc.wantErr)
					}
					if serr := <-done; !errors.Is(serr, io.EOF) {
						t.Fatalf("server side read: %v, want io.EOF", serr)
					}
					if srvAuth.refused.Load() != 1 {
						t.Fatalf("server counted %d refusals, want 1", srvAuth.refused.Load())
					}
					return
				}
				if err != nil {
					t.Fatalf("dial: %v", err)
				}
				defer c.Close()
				if _, err := c.Write([]byte("hello")); err != nil {
					t.Fatal(err)
				}
				got := make([]byte, 5)
				if _, err := io.ReadFull(c, got); err != nil || string(got) != "hello" {
					t.Fatalf("echo after handshake: %q %v", got, err)
				}
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// A server that does not know the secret but answers "accept" anyway
// (with a proof it cannot compute) is caught by the dialling side.
func TestPeerAuthClientChecksServerProof(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		readFrame(c) // hello
		c.Write(frame{kindHello, bytes.Repeat([]byte{7}, nonceLen)}.encode(nil))
		readFrame(c) // proof
		c.Write(frame{kindAccept, bytes.Repeat([]byte{9}, macLen)}.encode(nil))
		io.Copy(io.Discard, c)
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := testAuth(t, testSecret, 0).Client(c, "impostor", time.Time{}); !errors.Is(err, ErrPeerProof) {
		t.Fatalf("client against an impostor: %v, want ErrPeerProof", err)
	}
}

// A dialler that speaks anything but the handshake (nothing, garbage, an
// oversized or truncated frame, a frame out of turn, a replayed exchange,
// hashicorp/raft's own RPC as a node of the previous version sends it) is
// dropped by the accepting side within the handshake deadline: the
// connection closes, no RPC reaches Raft, and no goroutine is left.
func TestPeerAuthDropsBadClients(t *testing.T) {
	const deadline = 300 * time.Millisecond
	auth := testAuth(t, testSecret, deadline)

	// A legitimate exchange, recorded from the client's side, to replay.
	recSrv := listenStream(t, nil, testAuth(t, testSecret, 0))
	recDone := echoOnce(recSrv)
	raw, err := net.Dial("tcp", recSrv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordConn{Conn: raw}
	if err := testAuth(t, testSecret, 0).Client(rec, "recorder", time.Time{}); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	<-recDone
	captured := rec.sent.Bytes()

	var rpc bytes.Buffer
	rpc.WriteByte(1) // rpcRequestVote in hashicorp/raft's wire format
	rpc.Write([]byte{0x81, 0xa4, 'T', 'e', 'r', 'm', 0x63})

	oversized := append([]byte(frameMagic), kindRefuse, 0xff)
	oversized = append(oversized, bytes.Repeat([]byte{'x'}, 300)...)

	cases := []struct {
		name  string
		send  []byte
		drip  bool // send one byte at a time, slowly
		close bool // half-close after sending
	}{
		{name: "silent"},
		{name: "garbage", send: bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 64)},
		{name: "previous version's RequestVote", send: rpc.Bytes()},
		{name: "oversized frame", send: oversized},
		{name: "hello with a short nonce", send: frame{kindHello, []byte{1, 2, 3}}.encode(nil)},
		{name: "truncated hello, then silence", send: frame{kindHello, make([]byte, nonceLen)}.encode(nil)[:20]},
		{name: "proof first", send: frame{kindProof, make([]byte, macLen)}.encode(nil)},
		{name: "hello, then silence", send: frame{kindHello, make([]byte, nonceLen)}.encode(nil)},
		{name: "hello dripped slower than the deadline", send: frame{kindHello, make([]byte, nonceLen)}.encode(nil), drip: true},
		{name: "replayed exchange", send: captured},
		{name: "half-closed after garbage", send: []byte("GET / HTTP/1.1\r\n\r\n"), close: true},
	}
	if len(captured) != 2*frameHeaderLen+nonceLen+macLen {
		t.Fatalf("recorded %d bytes, want hello and proof", len(captured))
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stream := NewStreamLayer(ln, nil, nil, auth)
	trans := hraft.NewNetworkTransportWithConfig(&hraft.NetworkTransportConfig{Stream: stream, MaxPool: 1, Timeout: 10 * time.Second, Logger: NewHCLog(quietLog(), "transport")})
	defer trans.Close()
	baseline := runtime.NumGoroutine()

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := auth.refused.Load()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if tc.drip {
				for _, b := range tc.send {
					if _, err := c.Write([]byte{b}); err != nil {
						break // dropped mid-way: what we want
					}
					time.Sleep(deadline / 4)
				}
			} else if len(tc.send) > 0 {
				c.Write(tc.send) // the server may hang up before it has read everything
			}
			if tc.close {
				c.(*net.TCPConn).CloseWrite()
			}
			// The server must hang up: reading ends with EOF or a reset,
			// never with this (generous) client-side timeout.
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			got, err := io.ReadAll(c)
			if isNetTimeout(err) {
				t.Fatalf("the server kept the connection open past its %v handshake deadline", deadline)
			}
			// Whatever it sent before hanging up is handshake frames
			// (a hello, perhaps a refusal), never a Raft response.
			for len(got) > 0 {
				f, n, derr := decodeFrame(got)
				if derr != nil || f.kind == kindAccept {
					t.Fatalf("server sent %q before hanging up (%v)", got, derr)
				}
				got = got[n:]
			}
			eventually(t, "the refusal counted", func() bool { return auth.refused.Load() == before+1 })
		})
	}
	select {
	case rpc := <-trans.Consumer():
		t.Fatalf("an RPC reached Raft: %T", rpc.Command)
	default:
	}
	eventually(t, "no handshake in progress", func() bool { return auth.inflight.Load() == 0 })
	eventually(t, "the connection goroutines ended", func() bool { return runtime.NumGoroutine() <= baseline })
}

// A node of this version dialling one of the previous version (plain
// hashicorp/raft transport, no handshake) says so instead of failing with
// an opaque EOF.
func TestPeerAuthAgainstPreviousVersion(t *testing.T) {
	old, err := hraft.NewTCPTransport("127.0.0.1:0", nil, 1, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	cli := listenStream(t, nil, testAuth(t, testSecret, 0))
	_, err = cli.Dial(old.LocalAddr(), 5*time.Second)
	if !errors.Is(err, ErrPeerSilent) || !strings.Contains(err.Error(), "version without Raft authentication") {
		t.Fatalf("dial of a previous-version node: %v, want ErrPeerSilent with a hint", err)
	}
}

// Join runs the handshake against the joiner's Raft address: a node with
// another cluster secret is refused before it can take a vote, one with
// the same secret joins.
func TestJoinChecksSecret(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n1, err := Open(ctx, tcpConfig(t, "s1", nil), quietLog(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n1.Close()
	(&cluster{t: t}).waitLeader(n1)
	for _, tc := range []struct {
		id, secret string
		want       error // nil: joins
	}{
		{"s2", otherSecret, block.ErrPermissionDenied},
		{"s3", testSecret, nil},
	} {
		t.Run(tc.id, func(t *testing.T) {
			cfg := tcpConfig(t, tc.id, nil)
			cfg.Secret, cfg.Bootstrap = tc.secret, false
			reg := prometheus.NewRegistry()
			n, err := Open(ctx, cfg, quietLog(), reg)
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			m := fsm.Member{ID: tc.id, RaftAddr: cfg.RaftAddr}
			err = n1.Join(ctx, m)
			for attempt := 1; tc.want == nil && errors.Is(err, ErrOutcomeUnknown) && attempt <= 10; attempt++ {
				leader := (&cluster{t: t}).waitLeader(n1, n)
				if hasServer(leader, tc.id) {
					err = nil
					break
				}
				err = leader.Join(ctx, m)
			}
			if tc.want == nil {
				if err != nil {
					t.Fatalf("join: %v", err)
				}
				eventually(t, "the joiner replicates", func() bool {
					_, ok := n.FSM().Member(tc.id)
					return ok
				})
				return
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), "refused our cluster secret") {
				t.Fatalf("join: %v, want %v", err, tc.want)
			}
			if hasServer(n1, tc.id) {
				t.Fatal("the refused joiner is a voter")
			}
			// The joiner refused the leader's probe and counts it.
			eventually(t, "ctxtier_raft_auth_refused_total on the joiner", func() bool { return refusedMetric(t, reg) >= 1 })
		})
	}
}

func TestConfigValidateAuth(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"default with a secret", func(c *Config) { c.Secret = testSecret }, true},
		{"no secret (OpenWith)", func(c *Config) {}, true},
		{"short secret", func(c *Config) { c.Secret = "short" }, false},
		{"secret with a space", func(c *Config) { c.Secret = "a secret with spaces in it" }, false},
		{"zero auth timeout", func(c *Config) { c.Secret, c.AuthTimeout = testSecret, 0 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := inmemConfig("v1")
			tc.mod(&c)
			if err := c.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate: %v, want ok=%v", err, tc.ok)
			}
		})
	}
	// Open runs a TCP transport, which never goes without the secret.
	cfg := tcpConfig(t, "v2", nil)
	cfg.Secret = ""
	if _, err := Open(context.Background(), cfg, quietLog(), nil); !errors.Is(err, block.ErrInvalidArgument) {
		t.Fatalf("Open without a secret: %v", err)
	}
}

// refusedMetric reads ctxtier_raft_auth_refused_total from reg.
func refusedMetric(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "ctxtier_raft_auth_refused_total" {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("ctxtier_raft_auth_refused_total is not registered")
	return 0
}

// recordConn records what is written to it.
type recordConn struct {
	net.Conn
	sent bytes.Buffer
}

func (r *recordConn) Write(p []byte) (int, error) {
	r.sent.Write(p)
	return r.Conn.Write(p)
}

func isNetTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
