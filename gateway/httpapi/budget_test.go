package httpapi

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/internal/membudget"
)

// TestPutWaitsForBudget: a stalled upload holds its Content-Length of the
// in-flight budget; a PUT that does not fit beside it waits, unread, until
// the stalled one goes away.
func TestPutWaitsForBudget(t *testing.T) {
	b, err := membudget.New(4 << 20)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *Config) { c.MaxBlockSize = 8 << 20 }, WithBudget(b))
	nc, err := net.Dial("tcp", strings.TrimPrefix(e.ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(nc, "PUT /v1/namespaces/default/blocks/%s HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\nx", h1, 3<<20)
	deadline := time.Now().Add(5 * time.Second)
	for b.InUse() != 3<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("the stalled upload holds %d bytes", b.InUse())
		}
		time.Sleep(5 * time.Millisecond)
	}
	done := make(chan int, 1)
	go func() {
		st, _ := e.put(h2, make([]byte, 2<<20), nil)
		done <- st
	}()
	select {
	case st := <-done:
		t.Fatalf("the put did not wait for the budget: %d", st)
	case <-time.After(300 * time.Millisecond):
	}
	if b.InUse() != 3<<20 || b.Waits() == 0 {
		t.Fatalf("in use %d, waits %d", b.InUse(), b.Waits())
	}
	nc.Close()
	select {
	case st := <-done:
		if st != 201 {
			t.Fatalf("put after the stall ended: %d", st)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the put never got the budget")
	}
	deadline = time.Now().Add(5 * time.Second)
	for b.InUse() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still held", b.InUse())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
