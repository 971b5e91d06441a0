// Package freeport hands tests 127.0.0.1 addresses that were free a moment
// ago, for listeners whose address must be known before they listen (Raft
// advertises its address; a child process is told its ports on the command
// line). Port 0 cannot serve there.
//
// Between the probe and the child's listen, someone else may take the
// port. The usual takers are the kernel's ephemeral ports: every outgoing
// connection's local port, and every listener on port 0 (the test's other
// ctxd processes bind their client ports that way). A port the kernel
// offered for ":0" is, by definition, one it may offer again to the next
// taker; CI saw `bind: address already in use` that way. So Addr picks
// ports below the ephemeral range (ip_local_port_range), at random, where
// the kernel never hands out ports by itself. Another test process
// picking the same random port could still collide (go test runs packages
// in parallel, and CI saw that too), so a port is also reserved across
// processes: a write lock on its byte of one shared file (a POSIX record
// lock, held until the process exits, released by the kernel even when it
// dies). Where the range cannot be read, or leaves too little room below
// it, Addr falls back to probing ":0". It never returns an address it has
// returned before in this process.
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// lowest is the lowest port Addr picks below the ephemeral range; ports
// under it are left to well-known services.
const lowest = 20000

var (
	mu        sync.Mutex
	handedOut = map[string]bool{}
)

// Addr returns an unused 127.0.0.1 host:port, distinct from every address
// it returned before in this process. It fails tb when no port can be had.
func Addr(tb testing.TB) string {
	tb.Helper()
	addr, err := pick(ephemeralLow())
	if err != nil {
		tb.Fatal(err)
	}
	return addr
}

// Pick is Addr for programs that are not tests (ctxbench starting a local
// cluster): the same choice, with an error instead of a failed test.
func Pick() (string, error) { return pick(ephemeralLow()) }

// pick chooses an address for an ephemeral range starting at ephLow (0:
// unknown).
func pick(ephLow int) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if hi := ephLow - 1; hi-lowest >= 1000 {
		for range 200 {
			addr := "127.0.0.1:" + strconv.Itoa(lowest+rand.IntN(hi-lowest+1))
			if !handedOut[addr] && reserve(addr) && free(addr) {
				handedOut[addr] = true
				return addr, nil
			}
		}
	}
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", fmt.Errorf("freeport: %w", err)
		}
		addr := ln.Addr().String()
		ln.Close()
		if !handedOut[addr] {
			handedOut[addr] = true
			return addr, nil
		}
	}
	return "", errors.New("freeport: no port that was not handed out before in 100 tries")
}

// free reports whether addr can be listened on now.
func free(addr string) bool {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// ephemeralLow is the first port of the kernel's ephemeral range, 0 when
// it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	lo, _, err := parseRange(string(b))
	if err != nil {
		return 0
	}
	return lo
}

// parseRange parses ip_local_port_range's "LOW HIGH".
func parseRange(s string) (lo, hi int, err error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("freeport: port range %q: want two numbers", s)
	}
	if lo, err = strconv.Atoi(f[0]); err == nil {
		hi, err = strconv.Atoi(f[1])
	}
	if err != nil || lo < 1 || hi < lo || hi > 65535 {
		return 0, 0, fmt.Errorf("freeport: port range %q: bad numbers", s)
	}
	return lo, hi, nil
}
