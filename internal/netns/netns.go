// Package netns builds throwaway networks of Linux network namespaces for
// tests that partition real processes. It needs root (CAP_NET_ADMIN) and
// `ip` from iproute2; without them New calls testdep.Missing (a skip, or a
// failure under CI=true or CTXTIER_STRICT=1).
//
// A Net is one hub namespace holding a bridge, and one namespace per Node,
// joined to the hub by a veth pair. Every node has one address,
// Config.Subnet.N (10.77.0.N by default, N from 1), that exists only inside
// the namespaces of this Net: nothing is routed to or from the machine's
// own namespace, so two Nets (two tests, two packages) may use the same
// subnet side by side.
//
//	n := netns.New(t, netns.DefaultConfig())
//	a, b := n.Add("a"), n.Add("b")
//	cmd := a.Command("ctxd", "--http-listen", a.IP+":7401", ...) // runs inside a's namespace
//	hc := &http.Client{Transport: &http.Transport{DialContext: a.DialContext}} // dials from inside a
//	n.Cut(a)  // a's link to the hub goes down: a is alone
//	n.Heal(a) // and comes back
//
// Cut sets the hub's end of the node's veth down, so the node's own
// interface keeps its address and a test can still reach the node's
// listeners from inside its namespace (Node.DialContext to Node.IP): only
// traffic between nodes is cut, as with `docker network disconnect`
// followed by nsenter. Isolate(a, b) cuts one pair's traffic only
// (blackhole routes inside the two namespaces).
//
// Node.Listen opens a listener inside a node's namespace (a test server a
// node must reach). A process in a node's namespace reaches nothing outside
// the Net: run any server it needs (an S3 server, another ctxd) in a node
// of the same Net too. To restart a process, run Node.Command again; the
// namespace and its address stay. Require checks for root and `ip` without
// building anything. Names: a namespace is ctn<pid>-<net>-<node index>.
//
// Everything is torn down by t.Cleanup, also when the test fails: the
// namespaces are deleted (which deletes their veths and bridge). Register
// the cleanup of processes started in a namespace after New, so they are
// stopped first. New also deletes namespaces left behind by a process of
// this package that died without cleaning up.
package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ctxtier/ctxtier/internal/testdep"
)

// prefix starts every namespace name this package makes: ctn<pid>-<net>-<node>.
const prefix = "ctn"

// Config says how a Net is addressed.
type Config struct {
	// Subnet is the first three octets of the nodes' /24, e.g. "10.77.0".
	Subnet string
	// MTU of the veths (0: the kernel's default).
	MTU int
}

// DefaultConfig returns the 10.77.0.0/24 subnet.
func DefaultConfig() Config { return Config{Subnet: "10.77.0"} }

// Validate checks that Subnet is three octets of an IPv4 address.
func (c Config) Validate() error {
	ip := net.ParseIP(c.Subnet + ".1").To4()
	if ip == nil || strings.Count(c.Subnet, ".") != 2 {
		return fmt.Errorf("netns: subnet %q: want three octets such as 10.77.0", c.Subnet)
	}
	if c.MTU < 0 {
		return fmt.Errorf("netns: mtu %d < 0", c.MTU)
	}
	return nil
}

// Net is a hub namespace with a bridge and the nodes attached to it.
type Net struct {
	t     testing.TB
	cfg   Config
	id    string
	hub   string
	mu    sync.Mutex
	nodes []*Node
}

// Node is one namespace attached to the hub.
type Node struct {
	// Name is the caller's name for the node.
	Name string
	// NS is the namespace's name (as `ip netns list` shows it).
	NS string
	// IP is the node's address, reachable from every node of the Net.
	IP string
	// hubLink is the name of the node's veth end in the hub namespace.
	hubLink string
	net     *Net
}

var nets atomic.Int64

// New makes a Net, or ends the test through testdep.Missing when `ip` or
// root is unavailable.
func New(t testing.TB, cfg Config) *Net {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	Require(t)
	removeStale(t)
	n := &Net{t: t, cfg: cfg, id: fmt.Sprintf("%s%d-%d", prefix, os.Getpid(), nets.Add(1))}
	n.hub = n.id + "-hub"
	t.Cleanup(n.close)
	n.ip("netns", "add", n.hub)
	n.ipIn(n.hub, "link", "set", "lo", "up")
	n.ipIn(n.hub, "link", "add", "br0", "type", "bridge")
	n.ipIn(n.hub, "link", "set", "br0", "up")
	return n
}

// Require ends the test through testdep.Missing unless `ip` and root are
// available (New calls it).
func Require(t testing.TB) {
	t.Helper()
	testdep.Command(t, "ip", "apt-get install iproute2 (make test-deps does)")
	if os.Geteuid() != 0 {
		testdep.Missing(t, "root", "network namespaces need CAP_NET_ADMIN", "run the tests as root")
	}
}

// Add creates a node's namespace, links it to the hub and gives it the
// next address.
func (n *Net) Add(name string) *Node {
	n.t.Helper()
	n.mu.Lock()
	idx := len(n.nodes) + 1
	nd := &Node{Name: name, NS: fmt.Sprintf("%s-%d", n.id, idx), IP: fmt.Sprintf("%s.%d", n.cfg.Subnet, idx),
		hubLink: fmt.Sprintf("v%d", idx), net: n}
	n.nodes = append(n.nodes, nd)
	n.mu.Unlock()
	n.ip("netns", "add", nd.NS)
	n.ipIn(nd.NS, "link", "set", "lo", "up")
	// Both ends are created directly in their namespaces: nothing appears
	// in the caller's namespace, even for a moment.
	args := []string{"link", "add", "eth0", "netns", nd.NS}
	if n.cfg.MTU > 0 {
		args = append(args, "mtu", strconv.Itoa(n.cfg.MTU))
	}
	args = append(args, "type", "veth", "peer", "name", nd.hubLink, "netns", n.hub)
	n.ipIn(nd.NS, args...)
	n.ipIn(n.hub, "link", "set", nd.hubLink, "master", "br0")
	n.ipIn(n.hub, "link", "set", nd.hubLink, "up")
	n.ipIn(nd.NS, "addr", "add", nd.IP+"/24", "dev", "eth0")
	n.ipIn(nd.NS, "link", "set", "eth0", "up")
	return nd
}

// Cut takes the node off the hub: no traffic between it and any other node.
func (n *Net) Cut(nd *Node) { n.t.Helper(); n.ipIn(n.hub, "link", "set", nd.hubLink, "down") }

// Heal puts a cut node back on the hub.
func (n *Net) Heal(nd *Node) { n.t.Helper(); n.ipIn(n.hub, "link", "set", nd.hubLink, "up") }

// Isolate drops every packet between a and b, leaving their other links
// alone: a blackhole route to the other's address in each namespace (no
// netfilter or qdisc modules needed). Rejoin removes the routes.
func (n *Net) Isolate(a, b *Node) {
	n.t.Helper()
	n.ipIn(a.NS, "route", "add", "blackhole", b.IP+"/32")
	n.ipIn(b.NS, "route", "add", "blackhole", a.IP+"/32")
}

// Rejoin undoes Isolate(a, b).
func (n *Net) Rejoin(a, b *Node) {
	n.t.Helper()
	n.ipIn(a.NS, "route", "del", "blackhole", b.IP+"/32")
	n.ipIn(b.NS, "route", "del", "blackhole", a.IP+"/32")
}

// Command returns a command that runs name inside the node's namespace
// (through `ip netns exec`, which execs it: the command's process is the
// program itself, so signals reach it).
func (nd *Node) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", nd.NS, name}, args...)...)
}

// DialContext dials addr from inside the node's namespace; it fits
// http.Transport.DialContext. The socket belongs to the namespace for its
// whole life, whatever thread later uses it.
func (nd *Node) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var conn net.Conn
	err := nd.inNS(func() error {
		var err error
		conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return conn, err
}

// Listen opens a listener inside the node's namespace (addr is usually
// nd.IP:port).
func (nd *Node) Listen(network, addr string) (net.Listener, error) {
	var ln net.Listener
	err := nd.inNS(func() error {
		var err error
		ln, err = net.Listen(network, addr)
		return err
	})
	return ln, err
}

// inNS runs fn on an OS thread switched into the node's namespace.
func (nd *Node) inNS(fn func() error) error {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	target, err := os.Open("/run/netns/" + nd.NS)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netns %s: %w", nd.NS, err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns %s: %w", nd.NS, err)
	}
	fnErr := fn()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread stays locked and in the wrong namespace: the runtime
		// ends it with this goroutine rather than reuse it.
		return errors.Join(fnErr, fmt.Errorf("setns back: %w", err))
	}
	runtime.UnlockOSThread()
	return fnErr
}

// Nodes returns the nodes in the order they were added.
func (n *Net) Nodes() []*Node {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*Node(nil), n.nodes...)
}

func (n *Net) close() {
	n.mu.Lock()
	nodes := n.nodes
	n.mu.Unlock()
	for _, nd := range nodes {
		if out, err := exec.Command("ip", "netns", "del", nd.NS).CombinedOutput(); err != nil {
			n.t.Errorf("netns: deleting %s: %v: %s", nd.NS, err, out)
		}
	}
	if out, err := exec.Command("ip", "netns", "del", n.hub).CombinedOutput(); err != nil {
		n.t.Errorf("netns: deleting %s: %v: %s", n.hub, err, out)
	}
}

func (n *Net) ip(args ...string) {
	n.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		n.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
}

func (n *Net) ipIn(ns string, args ...string) {
	n.t.Helper()
	n.ip(append([]string{"-n", ns}, args...)...)
}

// removeStale deletes namespaces named by this package whose creating
// process no longer runs.
func removeStale(t testing.TB) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], prefix) {
			continue
		}
		pidStr, _, ok := strings.Cut(strings.TrimPrefix(f[0], prefix), "-")
		pid, err := strconv.Atoi(pidStr)
		if !ok || err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == nil {
			continue // still running: another test binary's
		}
		if err := exec.Command("ip", "netns", "del", f[0]).Run(); err == nil {
			t.Logf("netns: removed %s, left by exited process %d", f[0], pid)
		}
	}
}
