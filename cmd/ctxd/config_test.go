package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/cmd/internal/subcmd"
	"github.com/ctxtier/ctxtier/raft/tlstest"
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
			return c.DataDir == "./ctxd-data" && c.Listen == "127.0.0.1:7400" && c.HTTPListen == "127.0.0.1:7401" && c.DRAMCapacity == 1<<30 &&
				c.RESPListen == "127.0.0.1:7405" && c.RESPDatabases == "default" && !c.DRAMHuge
		}},
		{"resp off and databases", []string{"--resp-listen", "", "--resp-databases", "default, kv"}, nil, func(c Config) bool {
			dbs, err := parseDatabases(c.RESPDatabases)
			return c.RESPListen == "" && err == nil && len(dbs) == 2 && dbs[0] == "default" && dbs[1] == "kv"
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
		{"huge pages off by default, on by flag", []string{"--dram-hugepages"}, nil, func(c Config) bool { return c.DRAMHuge }},
		{"huge pages by env", nil, map[string]string{"CTXD_DRAM_HUGEPAGES": "true"}, func(c Config) bool { return c.DRAMHuge }},
		{"config from env", nil, map[string]string{"CTXD_CONFIG": file}, func(c Config) bool {
			return c.DRAMCapacity == 2<<30
		}},
		{"dram prefault from env", nil, map[string]string{"CTXD_DRAM_PREFAULT": "true"}, func(c Config) bool {
			return c.DRAMPrefault
		}},
		{"dram prefault off by default", nil, nil, func(c Config) bool {
			return !c.DRAMPrefault
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
		{"s3 domain with a port", []string{"--s3-domain", "s3.example.com:9000"}, nil, "s3-domain"},
		{"bad s3 domain in env", nil, map[string]string{"CTXD_S3_DOMAIN": "ok.example,Bad_Domain"}, "s3-domain"},
		{"bad resp database", []string{"--resp-databases", "default,Bad_Name"}, nil, "resp-databases"},
		{"empty resp database", []string{"--resp-databases", "default,,kv"}, nil, "database 1"},
		{"unknown route model key", []string{"--route-model", "heads=8"}, nil, "route-model"},
		{"bad route model in env", nil, map[string]string{"CTXD_ROUTE_MODEL": "layers=0"}, "route-model"},
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

func TestLoadConfigS3Domain(t *testing.T) {
	c, err := LoadConfig([]string{"--s3-domain", "s3.example.com, localhost"}, envOf(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := subcmd.SplitList(c.S3Domain); len(got) != 2 || got[0] != "s3.example.com" || got[1] != "localhost" {
		t.Fatalf("domains %q", got)
	}
}

// The --tls-* settings come as a set, through flags, environment or file.
func TestLoadConfigTLS(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "ctxd.yaml")
	if err := os.WriteFile(file, []byte("tls_cert: /c.pem\ntls_key: /k.pem\ntls_ca: /ca.pem\ntls_mutual: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	all := []string{"--tls-cert", "/c.pem", "--tls-key", "/k.pem", "--tls-ca", "/ca.pem"}
	cases := []struct {
		name       string
		args       []string
		env        map[string]string
		wantErr    string // "" means valid
		wantMutual bool
	}{
		{"off by default", nil, nil, "", false},
		{"flags", append(all, "--tls-mutual"), nil, "", true},
		{"server name", append(all, "--tls-server-name", "ctxd.internal"), nil, "", false},
		{"environment", nil, map[string]string{"CTXD_TLS_CERT": "/c.pem", "CTXD_TLS_KEY": "/k.pem", "CTXD_TLS_CA": "/ca.pem", "CTXD_TLS_MUTUAL": "true"}, "", true},
		{"file", []string{"--config", file}, nil, "", true},
		{"flag over file", []string{"--config", file, "--tls-mutual=false"}, nil, "", false},
		{"cert alone", []string{"--tls-cert", "/c.pem"}, nil, "tls-key, tls-ca not set", false},
		{"no ca", []string{"--tls-cert", "/c.pem", "--tls-key", "/k.pem"}, nil, "tls-ca not set", false},
		{"key and ca, no cert", []string{"--tls-key", "/k.pem", "--tls-ca", "/ca.pem"}, nil, "tls-cert not set", false},
		{"mutual alone", []string{"--tls-mutual"}, nil, "tls-mutual needs", false},
		{"server name alone", []string{"--tls-server-name", "x"}, nil, "tls-server-name needs", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := LoadConfig(tc.args, envOf(tc.env), io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.TLSMutual != tc.wantMutual {
				t.Fatalf("TLSMutual %v, want %v", c.TLSMutual, tc.wantMutual)
			}
		})
	}
}

// loadTLS turns files that are missing or not PEM into a startup error
// naming the settings; with no --tls-cert it returns nil (plain TCP).
func TestLoadTLSFiles(t *testing.T) {
	if got, err := DefaultConfig().loadTLS(); got != nil || err != nil {
		t.Fatalf("TLS off: %v %v", got, err)
	}
	dir := t.TempDir()
	ca := tlstest.NewCA(t)
	certs := ca.WriteFiles(t, dir, "n1")
	junk := filepath.Join(dir, "junk.pem")
	os.WriteFile(junk, []byte("not pem"), 0o600)
	cases := []struct {
		name          string
		cert, key, ca string
		wantErr       string
	}{
		{"valid", certs.Cert, certs.Key, certs.CA, ""},
		{"missing cert", filepath.Join(dir, "none.pem"), certs.Key, certs.CA, "no such file"},
		{"key of another cert", certs.Cert, ca.WriteFiles(t, dir, "n2").Key, certs.CA, "private key does not match"},
		{"ca not pem", certs.Cert, certs.Key, junk, "no certificates"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.TLSCert, c.TLSKey, c.TLSCA, c.TLSMutual = tc.cert, tc.key, tc.ca, true
			got, err := c.loadTLS()
			if tc.wantErr == "" {
				if err != nil || got == nil || !got.Mutual {
					t.Fatalf("got %+v %v", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "tls-cert/tls-key/tls-ca") {
				t.Fatalf("got %v, want error containing %q", err, tc.wantErr)
			}
		})
	}
}
