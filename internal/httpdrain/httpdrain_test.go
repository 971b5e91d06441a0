package httpdrain

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// slowServer serves one endpoint that writes size bytes in 64 KiB pieces
// and reports, on returned, when its handler has returned.
func slowServer(t *testing.T, tr *Tracker, size int) (addr string, srv *http.Server, started, returned chan struct{}) {
	t.Helper()
	started, returned = make(chan struct{}), make(chan struct{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(returned)
		close(started)
		buf := make([]byte, 64<<10)
		for sent := 0; sent < size; sent += len(buf) {
			if _, err := w.Write(buf); err != nil {
				return
			}
		}
	})
	srv = &http.Server{Handler: tr.Wrap(h)}
	go srv.Serve(ln)
	return ln.Addr().String(), srv, started, returned
}

// TestShutdownWaitsForAStuckHandler: a client that stops reading keeps a
// handler writing; the graceful stop times out, and Shutdown returns only
// after the handler has returned (its writes failed once the connection
// was closed), where http.Server.Shutdown alone returns with it running.
func TestShutdownWaitsForAStuckHandler(t *testing.T) {
	tr := &Tracker{}
	addr, srv, started, returned := slowServer(t, tr, 1<<30)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	<-started // the client never reads: the handler blocks in Write
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err = tr.Shutdown(ctx, srv, 30*time.Second)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrHandlersRunning) {
		t.Fatalf("Shutdown = %v, want the graceful stop's deadline and no handler left", err)
	}
	select {
	case <-returned:
	default:
		t.Fatal("Shutdown returned while the handler still ran")
	}
	if n := tr.Running(); n != 0 {
		t.Fatalf("%d handlers running after Shutdown", n)
	}
}

// TestShutdownGraceful: with no request in flight the stop is graceful
// and returns nil.
func TestShutdownGraceful(t *testing.T) {
	tr := &Tracker{}
	addr, srv, _, returned := slowServer(t, tr, 1<<20)
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := io.Copy(io.Discard, resp.Body); err != nil || n != 1<<20 {
		t.Fatalf("read %d bytes: %v", n, err)
	}
	resp.Body.Close()
	<-returned
	if err := tr.Shutdown(context.Background(), srv, time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestShutdownGivesUpAfterGrace: a handler that does not return even with
// its connection closed is waited for only grace, and named in the error.
func TestShutdownGivesUpAfterGrace(t *testing.T) {
	tr := &Tracker{}
	release := make(chan struct{})
	entered := make(chan struct{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: tr.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		close(entered)
		<-release // ignores its connection
	}))}
	go srv.Serve(ln)
	go http.Get("http://" + ln.Addr().String() + "/")
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = tr.Shutdown(ctx, srv, 100*time.Millisecond)
	if !errors.Is(err, ErrHandlersRunning) || tr.Running() != 1 {
		t.Fatalf("Shutdown = %v with %d running, want ErrHandlersRunning and 1", err, tr.Running())
	}
	close(release)
}
