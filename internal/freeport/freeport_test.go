package freeport

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
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

// TestPickBelowEphemeralRange: where the kernel's ephemeral range leaves
// room below it, every address is below it (outgoing connections and ":0"
// listeners never take such a port by themselves); where it does not, the
// addresses still come, free and distinct, from probing ":0".
func TestPickBelowEphemeralRange(t *testing.T) {
	tests := []struct {
		name   string
		ephLow int
		below  bool
	}{
		{"the usual range", 32768, true},
		{"room of exactly 1000", lowest + 1001, true},
		{"too little room", lowest + 500, false},
		{"unknown range", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for range 50 {
				a, err := pick(tc.ephLow)
				if err != nil {
					t.Fatal(err)
				}
				_, p, err := net.SplitHostPort(a)
				if err != nil {
					t.Fatal(err)
				}
				n, _ := strconv.Atoi(p)
				if tc.below && (n < lowest || n >= tc.ephLow) {
					t.Fatalf("port %d outside [%d, %d)", n, lowest, tc.ephLow)
				}
				ln, err := net.Listen("tcp", a)
				if err != nil {
					t.Fatalf("listen on %s: %v", a, err)
				}
				ln.Close()
			}
		})
	}
}

func TestParseRange(t *testing.T) {
	tests := []struct {
		in      string
		lo, hi  int
		wantErr bool
	}{
		{"32768\t60999\n", 32768, 60999, false},
		{"1024 65535", 1024, 65535, false},
		{"", 0, 0, true},
		{"32768", 0, 0, true},
		{"a b", 0, 0, true},
		{"600 500", 0, 0, true},
		{"0 10", 0, 0, true},
		{"1 70000", 0, 0, true},
	}
	for _, tc := range tests {
		lo, hi, err := parseRange(tc.in)
		if (err != nil) != tc.wantErr || lo != tc.lo || hi != tc.hi {
			t.Errorf("parseRange(%q) = %d, %d, %v; want %d, %d, error %v", tc.in, lo, hi, err, tc.lo, tc.hi, tc.wantErr)
		}
	}
}

// holdEnv names the port a child process of this test binary reserves
// (see TestMain); it then says so on stdout and waits for stdin to close.
const holdEnv = "CTXTIER_FREEPORT_HOLD"

func TestMain(m *testing.M) {
	if a := os.Getenv(holdEnv); a != "" {
		if !reserve(a) {
			fmt.Println("refused")
			os.Exit(1)
		}
		fmt.Println("held")
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestReserveAcrossProcesses: a port another live process reserved is
// refused here, and can be had once that process is gone (the kernel drops
// a dead process's record locks).
func TestReserveAcrossProcesses(t *testing.T) {
	// A port this process holds no lock on, that the child can take: other
	// test binaries running at once (go test ./... runs packages in
	// parallel) may hold the lowest ones, and then the child answers
	// "refused" and the next port is tried.
	var addr string
	var cmd *exec.Cmd
	var stdin io.WriteCloser
	next := lowest
	for tries := 0; addr == ""; tries++ {
		if tries == 100 {
			t.Fatal("100 ports in a row held by other processes")
		}
		mu.Lock()
		cand := ""
		for ; cand == ""; next++ {
			if a := "127.0.0.1:" + strconv.Itoa(next); !handedOut[a] {
				cand = a
			}
		}
		mu.Unlock()
		c := exec.Command(os.Args[0])
		c.Env = append(os.Environ(), holdEnv+"="+cand)
		in, err := c.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		switch {
		case err == nil && line == "held\n":
			addr, cmd, stdin = cand, c, in
		case err == nil && line == "refused\n":
			_ = c.Wait() // another process holds cand
		default:
			t.Fatalf("child: %q %v", line, err)
		}
	}
	if reserve(addr) {
		t.Errorf("%s reserved here while the child holds it", addr)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !reserve(addr) {
		t.Errorf("%s still refused after the child exited", addr)
	}
	handedOut[addr] = true // this process holds it now
}
