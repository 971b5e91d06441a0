package freeport

import (
	"net"
	"testing"
)

func TestAddrNeverRepeatsAndIsFree(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		a := Addr(t)
		if seen[a] {
			t.Fatalf("%s handed out twice", a)
		}
		seen[a] = true
	}
	a := Addr(t)
	ln, err := net.Listen("tcp", a)
	if err != nil {
		t.Fatalf("listen on %s: %v", a, err)
	}
	ln.Close()
}
