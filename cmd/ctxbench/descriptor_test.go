package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/ctxtier/ctxtier/gateway/client"
)

func TestParseDescFlags(t *testing.T) {
	tests := []struct {
		args []string
		ok   bool
	}{
		{[]string{"--block-size", "2MiB", "--clients", "4", "--duration", "10s"}, true},
		{[]string{"--batch", "8", "--keys", "8"}, true},
		{[]string{"--batch", "9", "--keys", "8"}, false},
		{[]string{"--clients", "0"}, false},
		{[]string{"--block-size", "2XB"}, false},
		{[]string{"--duration", "0s"}, false},
		{[]string{"extra"}, false},
		{[]string{"--verify", "version"}, true},
		{[]string{"--verify", "checksum"}, true},
		{[]string{"--verify", "xxh3"}, false},
		{[]string{"--batch", "8", "--run", "32", "--rounds", "20"}, true},
		{[]string{"--batch", "8", "--run", "4"}, false},
		{[]string{"--rounds", "-1"}, false},
	}
	for _, tc := range tests {
		c, err := parseDescFlags(tc.args, io.Discard)
		if (err == nil) != tc.ok {
			t.Fatalf("%v: err %v, want ok=%v", tc.args, err, tc.ok)
		}
		if tc.ok && (c.BlockSize < 8 || c.Batch < 1) {
			t.Fatalf("%v: parsed %+v", tc.args, c)
		}
	}
	for args, want := range map[string]client.VerifyMode{"": client.VerifyChecksum, "version": client.VerifyVersion} {
		a := []string{}
		if args != "" {
			a = []string{"--verify", args}
		}
		if c, err := parseDescFlags(a, io.Discard); err != nil || c.Verify != want {
			t.Fatalf("--verify %q: %v %v, want %v", args, c.Verify, err, want)
		}
	}
}

// TestDescriptorRunAgainstCtxd runs the descriptor mode with --run against a
// real ctxd in both verify modes: every block of every path must be read
// directly (a fallback to GET fails the run) and the pipelined path must be
// reported.
func TestDescriptorRunAgainstCtxd(t *testing.T) {
	native, _ := startCtxdWith(t, ctxdBinary(t), "--dram-capacity", "256MiB")
	for _, mode := range []string{"checksum", "version"} {
		t.Run(mode, func(t *testing.T) {
			cfg, err := parseDescFlags(strings.Fields("--clients 2 --keys 8 --batch 2 --run 6 --block-size 256KiB --duration 600ms --verify "+mode+" --addr "+native), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := runDescriptorWith(context.Background(), cfg, &out); err != nil {
				t.Fatal(err)
			}
			t.Log("\n" + out.String())
			for _, want := range []string{"descriptor run (ReadDirectRun, runs of 6 in batches of 2, pipelined)", "ratio_vs_memcpy_run=", "ratio_run_vs_batches=", "cpu_ratio_vs_memcpy_run=", "cpu s/GB (ctxbench): memcpy "} {
				if !strings.Contains(out.String(), want) {
					t.Fatalf("no %q in\n%s", want, out.String())
				}
			}
			if strings.Contains(out.String(), "(0 blocks") {
				t.Fatalf("a path read nothing:\n%s", out.String())
			}
		})
	}
}
