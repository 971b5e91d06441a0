package resp

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/internal/membudget"
)

func newBudget(t *testing.T, size int64) *membudget.Budget {
	t.Helper()
	b, err := membudget.New(size)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// waitUntil polls cond (no timing assertion: it fails only if cond never
// holds within a generous bound).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// stalledSet sends a SET of a value of n bytes but its last byte and CRLF,
// and returns what finishes it.
func stalledSet(c *client, key string, n int) (finish string) {
	c.send(fmt.Sprintf("*3\r\n$3\r\nSET\r\n%s$%d\r\n%s", bulk(key), n, strings.Repeat("v", n-1)))
	return "v\r\n"
}

// TestBudgetBacksPressure: a SET's value is read only once its bytes are in
// the shared budget. A stalled sender holds its share; a second large SET
// waits unread until the first finishes, then completes; small requests
// never touch the budget.
func TestBudgetBacksPressure(t *testing.T) {
	const size = 900_000
	b := newBudget(t, 1<<20)
	addr, _ := testServer(t, nil, WithBudget(b))
	a, other, small := dial(t, addr), dial(t, addr), dial(t, addr)
	finish := stalledSet(a, "a", size)
	waitUntil(t, "the stalled SET's bytes in the budget", func() bool { return b.InUse() >= size-smallArena })
	held := b.InUse()
	if held > b.Size() {
		t.Fatalf("%d bytes in a budget of %d", held, b.Size())
	}
	other.send(encode("SET", "b", strings.Repeat("w", size)))
	waitUntil(t, "the second SET waiting for budget", func() bool { return b.Waits() == 1 })
	if b.InUse() != held {
		t.Fatalf("the waiting SET took budget: %d in use, %d before", b.InUse(), held)
	}
	// Requests under 16 KiB of arguments go on while the budget is full.
	if got := small.do("SET", "s", strings.Repeat("x", 10_000)); got != "+OK\r\n" {
		t.Fatalf("small SET with the budget full: %q", got)
	}
	if got := small.do("GET", "s"); got != bulk(strings.Repeat("x", 10_000)) {
		t.Fatalf("small GET: %d bytes", len(got))
	}
	if b.Waits() != 1 {
		t.Fatalf("small requests waited for budget (%d waits)", b.Waits())
	}
	a.send(finish)
	if got := a.reply(); got != "+OK\r\n" {
		t.Fatalf("first SET: %q", got)
	}
	if got := other.reply(); got != "+OK\r\n" {
		t.Fatalf("second SET: %q", got)
	}
	waitUntil(t, "the budget empty", func() bool { return b.InUse() == 0 })
	if got := small.do("STRLEN", "b"); got != fmt.Sprintf(":%d\r\n", size) {
		t.Fatalf("STRLEN b = %q", got)
	}
	if acq := b.Acquired(); acq < 2*(size-smallArena) || acq > 2*(size+reserveStep) {
		t.Fatalf("%d bytes acquired for two %d-byte values", acq, size)
	}
}

// TestBudgetHoldAndWait: a request that holds part of the budget and needs
// more (an MSET of two large values) waits at most BudgetWait, then is
// dropped with an error: nothing is stored, its bytes go back, and the
// connection goes on.
func TestBudgetHoldAndWait(t *testing.T) {
	b := newBudget(t, 1<<20)
	addr, _ := testServer(t, func(c *Config) { c.BudgetWait = 200 * time.Millisecond }, WithBudget(b))
	a, m := dial(t, addr), dial(t, addr)
	finish := stalledSet(a, "a", 600_000)
	waitUntil(t, "the stalled SET's bytes in the budget", func() bool { return b.InUse() >= 600_000-smallArena })
	held := b.InUse()
	v := strings.Repeat("m", 400_000)
	got := m.do("MSET", "k1", v, "k2", v)
	if !strings.HasPrefix(got, "-ERR ") || !strings.Contains(got, "in-flight budget") || !strings.Contains(got, "nothing was stored") {
		t.Fatalf("MSET over the budget: %q", got)
	}
	if b.InUse() != held {
		t.Fatalf("after the dropped MSET %d bytes are in the budget, want the stalled SET's %d", b.InUse(), held)
	}
	if got := m.do("EXISTS", "k1", "k2"); got != ":0\r\n" {
		t.Fatalf("EXISTS after the dropped MSET: %q", got)
	}
	a.send(finish)
	if got := a.reply(); got != "+OK\r\n" {
		t.Fatalf("stalled SET: %q", got)
	}
	// With the budget free the same MSET goes through.
	if got := m.do("MSET", "k1", v, "k2", v); got != "+OK\r\n" {
		t.Fatalf("MSET with the budget free: %q", got)
	}
	waitUntil(t, "the budget empty", func() bool { return b.InUse() == 0 })
}

// TestBudgetShutdownWakesWaiter: Shutdown wakes a connection waiting for
// budget and closes it, lets a connection in the middle of its request
// finish it and get its reply, and then returns.
func TestBudgetShutdownWakesWaiter(t *testing.T) {
	b := newBudget(t, 1<<20)
	addr, srv := testServer(t, nil, WithBudget(b))
	a, w := dial(t, addr), dial(t, addr)
	finish := stalledSet(a, "a", 900_000)
	waitUntil(t, "the stalled SET's bytes in the budget", func() bool { return b.InUse() >= 900_000-smallArena })
	w.send(encode("SET", "w", strings.Repeat("w", 900_000)))
	waitUntil(t, "the second SET waiting", func() bool { return b.Waits() == 1 })
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(context.Background()) }()
	if !w.closed() {
		t.Fatal("Shutdown left the connection waiting for budget open")
	}
	a.send(finish)
	if got := a.reply(); got != "+OK\r\n" {
		t.Fatalf("the SET being read during Shutdown: %q", got)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if b.InUse() != 0 {
		t.Fatalf("%d bytes left in the budget after Shutdown", b.InUse())
	}
}
