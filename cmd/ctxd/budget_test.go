package main

import (
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/gateway/native/wire"
)

// TestStalledUploadsBounded (issue 18 item 9): 64 senders of 60 MiB blocks
// (32 native, 32 HTTP) each send all but the last byte and stall. With a
// 512 MiB in-flight budget, ctxd reads only what fits (the rest wait in
// their sockets) and its RSS stays under the budget + 200 MiB. When the
// senders go, the budget is free again, the memory goes back to the OS
// (RSS within 100 MiB of where it started) and a normal put succeeds.
func TestStalledUploadsBounded(t *testing.T) {
	const budget, size, senders = 512 << 20, 60 << 20, 64
	p := startCtxd(t, "--dram-capacity", "64MiB", "--inflight-budget", "512MiB", "--nvme-dir", "off")
	before, err := p.RSS()
	if err != nil {
		t.Fatal(err)
	}
	stallUploads(t, p, before, "uploads", senders, size, budget, func(i int) (net.Conn, error) {
		nc, err := net.Dial("tcp", map[bool]string{true: p.Native, false: p.HTTP}[i%2 == 0])
		if err != nil {
			return nil, err
		}
		if i%2 == 0 {
			nc.Write(wire.AppendHello(nil, 1, 0))
			if _, err := io.ReadFull(nc, make([]byte, wire.HelloReplySize)); err != nil {
				return nc, err
			}
			nc.Write(wire.AppendHeader(nil, wire.Header{Length: size, Op: wire.OpPut, ID: 1, Count: 1}))
		} else {
			fmt.Fprintf(nc, "PUT /v1/namespaces/default/blocks/%016x HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", 9000+i, size)
		}
		return nc, nil
	})
	// The request buffers go back to the OS within seconds, not minutes.
	var after int64
	took := waitFor(t, 20*time.Second, "RSS back near where it started", func() bool {
		after, err = p.RSS()
		return err == nil && after < before+100<<20
	})
	t.Logf("RSS %d MiB %v after the uploads ended", after>>20, took.Round(100*time.Millisecond))
	if st, body := curl(t, []byte("after"), "-X", "PUT", "-H", "Content-Type: application/octet-stream", "--data-binary", "@-",
		"http://"+p.HTTP+"/v1/namespaces/default/blocks/0000000000000001"); st != "201" {
		t.Fatalf("put after the stall: %s %s", st, body)
	}
}

// TestRESPStalledSetsBounded: the RESP port reads large values under the
// same in-flight budget. 32 redis clients each send a SET of a 60 MiB value
// but its last byte and stall. With a 512 MiB budget ctxd reads only what
// fits (the rest wait in their sockets), RSS stays under the budget +
// 200 MiB, and once the senders go the budget is free again and SET works.
func TestRESPStalledSetsBounded(t *testing.T) {
	const budget, size, senders = 512 << 20, 60 << 20, 32
	p := startCtxd(t, "--dram-capacity", "64MiB", "--inflight-budget", "512MiB", "--nvme-dir", "off")
	before, err := p.RSS()
	if err != nil {
		t.Fatal(err)
	}
	stallUploads(t, p, before, "RESP SETs", senders, size, budget, func(i int) (net.Conn, error) {
		nc, err := net.Dial("tcp", p.RESP)
		if err != nil {
			return nil, err
		}
		key := fmt.Sprintf("stalled-%d", i)
		fmt.Fprintf(nc, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n", len(key), key, size)
		return nc, nil
	})
	nc, err := net.Dial("tcp", p.RESP)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(nc, "*3\r\n$3\r\nSET\r\n$5\r\nafter\r\n$%d\r\n%s\r\n", 1<<20, make([]byte, 1<<20))
	reply := make([]byte, 5)
	if _, err := io.ReadFull(nc, reply); err != nil || string(reply) != "+OK\r\n" {
		t.Fatalf("SET after the stall: %q %v", reply, err)
	}
}

// stallUploads runs senders uploads of size bytes at once: open dials one
// and sends its request's header, then all but the last byte of the body
// are written (the writes block once ctxd stops reading). With them stalled
// it checks the bounds (checkStalledBounded), then closes them and waits
// until the budget is free again.
func stallUploads(t *testing.T, p *proc, before int64, what string, senders, size, budget int, open func(i int) (net.Conn, error)) {
	t.Helper()
	chunk := make([]byte, 1<<20)
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	for i := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := open(i)
			if nc != nil {
				mu.Lock()
				conns = append(conns, nc)
				mu.Unlock()
			}
			if err != nil {
				t.Error(err)
				return
			}
			for sent := 0; sent < size-1; {
				n := min(len(chunk), size-1-sent)
				if _, err := nc.Write(chunk[:n]); err != nil {
					return // closed by the test
				}
				sent += n
			}
		}()
	}
	checkStalledBounded(t, p, before, what, senders, size, budget)
	mu.Lock()
	for _, c := range conns {
		c.Close()
	}
	mu.Unlock()
	wg.Wait()
	waitFor(t, 10*time.Second, "the budget freed", func() bool { return metricValue(t, p.HTTP, "ctxtier_inflight_bytes") == 0 })
}

// checkStalledBounded lets ctxd take in all it will from senders stalled
// uploads of size bytes each (10 s, RSS sampled every 250 ms), then checks
// that RSS peaked under the budget + 200 MiB, that the budget is nearly all
// in use, and that the uploads it could not hold waited.
func checkStalledBounded(t *testing.T, p *proc, before int64, what string, senders, size, budget int) {
	t.Helper()
	peak := before
	inUse := 0.0
	for range 40 {
		time.Sleep(250 * time.Millisecond)
		if r, err := p.RSS(); err == nil {
			peak = max(peak, r)
		}
		inUse = metricValue(t, p.HTTP, "ctxtier_inflight_bytes")
	}
	waits := metricValue(t, p.HTTP, "ctxtier_inflight_waits_total")
	t.Logf("RSS %d MiB before, peak %d MiB with %d stalled %d MiB %s; %.0f MiB in the budget, %.0f waits",
		before>>20, peak>>20, senders, size>>20, what, inUse/(1<<20), waits)
	if peak > int64(budget)+200<<20 {
		t.Errorf("RSS peaked at %d MiB, over the budget (%d MiB) + 200 MiB", peak>>20, budget>>20)
	}
	if inUse > float64(budget) || inUse < float64(budget-size) {
		t.Errorf("%.0f bytes in the budget, want close to all of %d", inUse, budget)
	}
	if waits < float64(senders-budget/size) {
		t.Errorf("%.0f %s waited, want at least %d", waits, what, senders-budget/size)
	}
}
