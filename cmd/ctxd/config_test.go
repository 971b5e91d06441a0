package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestLoadConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "ctxd.yaml")
	if err := os.WriteFile(file, []byte("dram_capacity: 2GiB\nlisten: 127.0.0.1:9000\nlog_level: debug\npin_max_ttl: 1h\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		args  []string
		env   map[string]string
		check func(Config) bool
	}{
		{"defaults", nil, nil, func(c Config) bool {
			return c.DataDir == "./ctxd-data" && c.Listen == "127.0.0.1:7400" && c.HTTPListen == "127.0.0.1:7401" && c.DRAMCapacity == 1<<30
		}},
		{"file", []string{"--config", file}, nil, func(c Config) bool {
			return c.DRAMCapacity == 2<<30 && c.Listen == "127.0.0.1:9000" && c.LogLevel == "debug" && c.PinMaxTTL == time.Hour
		}},
		{"env over file", []string{"--config", file}, map[string]string{"CTXD_DRAM_CAPACITY": "3GiB"}, func(c Config) bool {
			return c.DRAMCapacity == 3<<30 && c.Listen == "127.0.0.1:9000"
		}},
		{"flag over env", []string{"--config", file, "--dram-capacity", "8GiB"}, map[string]string{"CTXD_DRAM_CAPACITY": "3GiB"}, func(c Config) bool {
			return c.DRAMCapacity == 8<<30
		}},
		{"config from env", nil, map[string]string{"CTXD_CONFIG": file}, func(c Config) bool {
			return c.DRAMCapacity == 2<<30
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := LoadConfig(tc.args, envOf(tc.env), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(c) {
				t.Fatalf("unexpected config %+v", c)
			}
		})
	}
}

func TestLoadConfigErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("dram_capacitty: 1GiB\n"), 0o644)
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"bad size flag", []string{"--dram-capacity", "lots"}, nil, "size"},
		{"unknown flag", []string{"--nope"}, nil, "not defined"},
		{"bad env", nil, map[string]string{"CTXD_DRAM_CAPACITY": "x"}, "CTXD_DRAM_CAPACITY"},
		{"unknown file key", []string{"--config", bad}, nil, "unknown key"},
		{"missing file", []string{"--config", filepath.Join(dir, "none.yaml")}, nil, "no such file"},
		{"bad log level", []string{"--log-level", "loud"}, nil, "log-level"},
		{"stray argument", []string{"extra"}, nil, "unexpected"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfig(tc.args, envOf(tc.env), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want error containing %q", err, tc.want)
			}
		})
	}
}
