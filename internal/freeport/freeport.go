// Package freeport hands tests 127.0.0.1 addresses that were free a moment
// ago, for listeners whose address must be known before they listen (Raft
// advertises its address; a child process is told its ports on the command
// line). Port 0 cannot serve there.
//
// The kernel may offer a port again as soon as the probe listener that found
// it is closed, so two calls could return the same port, and two listeners
// of one test would then collide. Addr never returns an address it has
// returned before in this process.
package freeport

import (
	"net"
	"sync"
	"testing"
)

var (
	mu        sync.Mutex
	handedOut = map[string]bool{}
)

// Addr returns an unused 127.0.0.1 host:port, distinct from every address
// it returned before in this process. It fails tb when no port can be had.
func Addr(tb testing.TB) string {
	tb.Helper()
	mu.Lock()
	defer mu.Unlock()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("freeport: %v", err)
		}
		addr := ln.Addr().String()
		ln.Close()
		if !handedOut[addr] {
			handedOut[addr] = true
			return addr
		}
	}
	tb.Fatal("freeport: no port that was not handed out before in 100 tries")
	return ""
}
