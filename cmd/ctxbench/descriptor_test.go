package main

import (
	"io"
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
