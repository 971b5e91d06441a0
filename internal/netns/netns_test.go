package netns

import (
	"bufio"
	"context"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// echo serves one line back per connection on ln until it is closed.
func echo(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			line, err := bufio.NewReader(c).ReadString('\n')
			if err == nil {
				io.WriteString(c, line)
			}
		}()
	}
}

// roundTrip dials addr from nd and sends one line; the error says why it
// could not.
func roundTrip(nd *Node, addr string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := nd.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		return err
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if got != "ping\n" {
		return io.ErrUnexpectedEOF
	}
	return nil
}

// eventually retries a round trip until it succeeds or d passes.
func eventually(t *testing.T, nd *Node, addr string, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var err error
	for time.Since(start) < d {
		if err = roundTrip(nd, addr, time.Second); err == nil {
			return time.Since(start)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s cannot reach %s after %v: %v", nd.Name, addr, d, err)
	return 0
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg Config
		ok  bool
	}{
		{DefaultConfig(), true},
		{Config{Subnet: "10.1.2"}, true},
		{Config{Subnet: "10.1"}, false},
		{Config{Subnet: "10.1.2.3"}, false},
		{Config{Subnet: "x.y.z"}, false},
		{Config{Subnet: "10.1.2", MTU: -1}, false},
	} {
		if err := tc.cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: Validate() = %v, want ok=%v", tc.cfg, err, tc.ok)
		}
	}
}

func TestCutHealIsolate(t *testing.T) {
	n := New(t, DefaultConfig())
	a, b, c := n.Add("a"), n.Add("b"), n.Add("c")
	ln, err := a.Listen("tcp", a.IP+":9000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go echo(ln)
	addr := a.IP + ":9000"

	eventually(t, b, addr, 10*time.Second)
	eventually(t, c, addr, 10*time.Second)
	// The address exists only inside the Net: not in the test's namespace.
	// (Checked on the interfaces, not by dialing: the test's namespace
	// routes 10/8 to the machine's gateway, and nothing is sent there.)
	own, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, ad := range own {
		if strings.HasPrefix(ad.String(), a.IP+"/") {
			t.Fatalf("the test's own namespace has %s", ad)
		}
	}

	n.Cut(a)
	if err := roundTrip(b, addr, time.Second); err == nil {
		t.Fatal("b reached a after a was cut off")
	}
	// The node still reaches its own listener: tests watch a cut-off node
	// from inside its namespace.
	if err := roundTrip(a, addr, time.Second); err != nil {
		t.Fatalf("a cannot reach itself while cut off: %v", err)
	}
	n.Heal(a)
	t.Logf("b reaches a %v after the heal", eventually(t, b, addr, 10*time.Second))

	n.Isolate(a, b)
	if err := roundTrip(b, addr, time.Second); err == nil {
		t.Fatal("b reached a while isolated from it")
	}
	eventually(t, c, addr, 5*time.Second)
	n.Rejoin(a, b)
	eventually(t, b, addr, 10*time.Second)

	out, err := a.Command("ip", "-4", "-o", "addr", "show", "dev", "eth0").CombinedOutput()
	if err != nil || !strings.Contains(string(out), a.IP+"/24") {
		t.Fatalf("a's eth0: %v: %s", err, out)
	}
}

// TestCleanup checks that a Net's namespaces are gone once its test ends.
func TestCleanup(t *testing.T) {
	Require(t)
	var names []string
	t.Run("net", func(t *testing.T) {
		n := New(t, DefaultConfig())
		nd := n.Add("x")
		names = append(names, nd.NS, n.hub)
	})
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 {
		t.Fatalf("subtest made %d namespaces, want 2", len(names))
	}
	for _, name := range names {
		if strings.Contains(string(out), name) {
			t.Errorf("namespace %s left after its test ended:\n%s", name, out)
		}
	}
}
