package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/gateway/native"
	"github.com/ctxtier/ctxtier/gateway/native/nativetest"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int
		ok   bool
	}{
		{"4096", 4096, true}, {"2MiB", 2 << 20, true}, {"512KiB", 512 << 10, true}, {"1GiB", 1 << 30, true},
		{"2MB", 2e6, true}, {"64k", 64 << 10, true}, {"10B", 10, true}, {" 3 MiB ", 3 << 20, true},
		{"", 0, false}, {"MiB", 0, false}, {"-1", 0, false}, {"2XiB", 0, false}, {"1.5MiB", 0, false},
	}
	for _, tc := range tests {
		got, err := parseSize(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestParseLoadFlags(t *testing.T) {
	c, err := parseLoadFlags(strings.Fields("--addr 127.0.0.1:1 --block-size 2MiB --clients 3 --get-ratio 0.5 --duration 2s --keys 9 --vs-baseline --json"), io.Discard)
	if err != nil || c.BlockSize != 2<<20 || c.Clients != 3 || c.GetRatio != 0.5 || c.Keys != 9 || !c.VsBaseline || !c.JSON || c.Namespace != "default" {
		t.Fatalf("%+v %v", c, err)
	}
	for _, bad := range []string{"--get-ratio 2", "--clients 0", "--block-size 1", "--duration 0s", "--keys 0", "extra"} {
		if _, err := parseLoadFlags(strings.Fields(bad), io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestLoadAgainstMapTier runs the load mode end to end against an
// in-process server over a map tier. CTXBENCH_LOAD_DURATION (e.g. 10s) and
// CTXBENCH_LOAD_BLOCK (e.g. 2MiB) turn it into the full measurement; the
// output is printed with -v.
func TestLoadAgainstMapTier(t *testing.T) {
	srv, err := nativetest.Start(t, native.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	d, size, ratio := 300*time.Millisecond, "256KiB", "0.8"
	if v := os.Getenv("CTXBENCH_LOAD_DURATION"); v != "" {
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatal(err)
		}
		size, ratio = "2MiB", "1"
	}
	if v := os.Getenv("CTXBENCH_LOAD_BLOCK"); v != "" {
		size = v
	}
	if v := os.Getenv("CTXBENCH_LOAD_GET_RATIO"); v != "" {
		ratio = v
	}
	args := strings.Fields("--clients 4 --vs-baseline --keys " + envOr("CTXBENCH_LOAD_KEYS", "16") + " --block-size " + size + " --get-ratio " + ratio + " --duration " + d.String() + " --addr " + srv.Addr)
	if v := os.Getenv("CTXBENCH_LOAD_DEPTH"); v != "" {
		args = append(args, "--depth", v)
	}
	cfg, _ := runLoadChecked(t, args)
	if srv.Tier.Len() != cfg.Keys {
		t.Fatalf("working set: %d blocks stored, want 16", srv.Tier.Len())
	}
}

// runLoadChecked runs the load mode with args and fails t unless the run
// ended without an error, moved some blocks with no failed operation, and
// printed a non-zero ratio_vs_raw_tcp last; it logs the output and returns
// the configuration and the output.
func runLoadChecked(t *testing.T, args []string) (loadConfig, string) {
	t.Helper()
	cfg, err := parseLoadFlags(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runLoadWith(context.Background(), cfg, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	s := out.String()
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "ratio_vs_raw_tcp=") || last == "ratio_vs_raw_tcp=0.000" {
		t.Fatalf("last line %q", last)
	}
	if !strings.Contains(s, " 0 errors") || strings.Contains(s, ": 0 ops") {
		t.Fatalf("errors, or no operations, during the run:\n%s", s)
	}
	return cfg, s
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
