package listener

import (
	"bufio"
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// echoConn echoes lines until StopReading (then it answers "bye" and
// returns) or until its socket fails.
type echoConn struct {
	nc      net.Conn
	stopped atomic.Bool
}

func (c *echoConn) Serve() {
	defer c.nc.Close()
	br := bufio.NewReader(c.nc)
	for {
		c.nc.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		line, err := br.ReadString('\n')
		if c.stopped.Load() {
			c.nc.Write([]byte("bye\n"))
			return
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			continue
		}
		if err != nil {
			return
		}
		c.nc.Write([]byte(line))
	}
}

func (c *echoConn) StopReading() { c.stopped.Store(true) }

func serve(t *testing.T, cfg Config) (*Set, string, context.CancelFunc, chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln, func(nc net.Conn) Conn { return &echoConn{nc: nc} }) }()
	t.Cleanup(func() { cancel(); s.Close() })
	return s, ln.Addr().String(), cancel, done
}

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	return nc, bufio.NewReader(nc)
}

func roundTrip(t *testing.T, nc net.Conn, br *bufio.Reader, msg string) string {
	t.Helper()
	if _, err := nc.Write([]byte(msg + "\n")); err != nil {
		return ""
	}
	line, _ := br.ReadString('\n')
	return line
}

func waitLen(t *testing.T, s *Set, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.Len() != n {
		if time.Now().After(deadline) {
			t.Fatalf("Len = %d, want %d", s.Len(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestMaxConnsRejects(t *testing.T) {
	var rejected atomic.Int64
	s, addr, _, _ := serve(t, Config{MaxConns: 2, Reject: func(nc net.Conn) {
		rejected.Add(1)
		nc.Write([]byte("full\n"))
	}})
	a, ar := dial(t, addr)
	b, bbr := dial(t, addr)
	if got := roundTrip(t, a, ar, "a"); got != "a\n" {
		t.Fatalf("first connection: %q", got)
	}
	if got := roundTrip(t, b, bbr, "b"); got != "b\n" {
		t.Fatalf("second connection: %q", got)
	}
	c, cr := dial(t, addr)
	if got, _ := cr.ReadString('\n'); got != "full\n" {
		t.Fatalf("third connection got %q, want the rejection", got)
	}
	if _, err := cr.ReadString('\n'); err == nil {
		t.Fatal("the rejected connection stayed open")
	}
	c.Close()
	if rejected.Load() != 1 || s.Len() != 2 {
		t.Fatalf("rejected %d, open %d; want 1 and 2", rejected.Load(), s.Len())
	}
	// A slot frees when a connection ends.
	a.Close()
	waitLen(t, s, 1)
	d, dr := dial(t, addr)
	if got := roundTrip(t, d, dr, "d"); got != "d\n" {
		t.Fatalf("connection after a slot freed: %q", got)
	}
}

func TestShutdownAndClose(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(s *Set, cancel context.CancelFunc) error
		// bye: the connection was asked to stop reading (graceful).
		bye     bool
		serveOK bool // Serve returns nil (not ctx.Err())
	}{
		{name: "shutdown", stop: func(s *Set, _ context.CancelFunc) error { return s.Shutdown(context.Background()) }, bye: true, serveOK: true},
		{name: "close", stop: func(s *Set, _ context.CancelFunc) error { s.Close(); return nil }, serveOK: true},
		{name: "context", stop: func(_ *Set, cancel context.CancelFunc) error { cancel(); return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var closed atomic.Int64
			s, addr, cancel, done := serve(t, Config{OnClose: func() { closed.Add(1) }})
			nc, br := dial(t, addr)
			if got := roundTrip(t, nc, br, "x"); got != "x\n" {
				t.Fatalf("echo: %q", got)
			}
			if err := tc.stop(s, cancel); err != nil {
				t.Fatal(err)
			}
			line, _ := br.ReadString('\n')
			if (line == "bye\n") != tc.bye {
				t.Fatalf("after %s the connection read %q", tc.name, line)
			}
			if _, err := br.ReadString('\n'); err == nil {
				t.Fatal("the connection stayed open")
			}
			err := <-done
			if tc.serveOK && err != nil {
				t.Fatalf("Serve returned %v, want nil", err)
			}
			if !tc.serveOK && !errors.Is(err, context.Canceled) {
				t.Fatalf("Serve returned %v, want context.Canceled", err)
			}
			waitLen(t, s, 0)
			if tc.bye && closed.Load() != 0 {
				t.Fatal("a graceful Shutdown ran OnClose")
			}
			if !tc.bye && closed.Load() == 0 {
				t.Fatal("Close did not run OnClose")
			}
			// A stopped set accepts nothing more.
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				c.SetReadDeadline(time.Now().Add(2 * time.Second))
				if n, _ := c.Read(make([]byte, 1)); n != 0 {
					t.Fatal("a stopped set served a new connection")
				}
				c.Close()
			}
		})
	}
}

// TestShutdownDeadline: connections that do not stop in time are closed
// hard and Shutdown returns the context's error.
func TestShutdownDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var closed atomic.Int64
	s := New(Config{OnClose: func() { closed.Add(1) }})
	go s.Serve(context.Background(), ln, func(nc net.Conn) Conn { return &stubborn{nc: nc} })
	nc, _ := dial(t, ln.Addr().String())
	waitLen(t, s, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want DeadlineExceeded", err)
	}
	if s.Len() != 0 || closed.Load() != 1 {
		t.Fatalf("after a forced shutdown: %d open, OnClose ran %d times", s.Len(), closed.Load())
	}
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Read(make([]byte, 1)); err == nil {
		t.Fatal("the stubborn connection is still open")
	}
}

// stubborn ignores StopReading and reads until its socket is closed.
type stubborn struct{ nc net.Conn }

func (c *stubborn) Serve()       { c.nc.Read(make([]byte, 1)) }
func (c *stubborn) StopReading() {}
