package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestWarnOpenListeners: the startup warning names every listener on a
// non-loopback address that takes unauthenticated requests, and only those.
func TestWarnOpenListeners(t *testing.T) {
	base := DefaultConfig()
	for _, tc := range []struct {
		name   string
		mod    func(*Config)
		want   []string // listener names in the warning; nil: no warning
		absent []string
	}{
		{name: "all loopback", mod: func(*Config) {}},
		{name: "public block APIs, auth off", mod: func(c *Config) { c.Listen, c.HTTPListen = "0.0.0.0:7400", "10.0.0.5:7401" },
			want: []string{"native=0.0.0.0:7400", "http=10.0.0.5:7401"}, absent: []string{"raft="}},
		{name: "public block APIs, auth required", mod: func(c *Config) { c.Listen, c.HTTPListen, c.Auth = "0.0.0.0:7400", "0.0.0.0:7401", "required" }},
		// Raft always requires the cluster secret, with or without TLS.
		{name: "public raft", mod: func(c *Config) { c.RaftListen = "0.0.0.0:7402" }},
		{name: "public RESP, auth off", mod: func(c *Config) { c.RESPListen = "0.0.0.0:7405" }, want: []string{"resp=0.0.0.0:7405"}, absent: []string{"native=", "http="}},
		{name: "public RESP, auth required", mod: func(c *Config) { c.RESPListen, c.Auth = "0.0.0.0:7405", "required" }},
		{name: "RESP off", mod: func(c *Config) { c.RESPListen = "" }},
		{name: "public pprof", mod: func(c *Config) { c.PprofListen = ":6060" }, want: []string{"pprof=:6060"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.mod(&cfg)
			var buf bytes.Buffer
			warnOpenListeners(cfg, slog.New(slog.NewTextHandler(&buf, nil)))
			out := buf.String()
			if tc.want == nil {
				if out != "" {
					t.Fatalf("unexpected warning: %s", out)
				}
				return
			}
			if !strings.Contains(out, "level=WARN") {
				t.Fatalf("no warning: %q", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("warning lacks %q: %s", w, out)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(out, a) {
					t.Errorf("warning names %q: %s", a, out)
				}
			}
		})
	}
}
