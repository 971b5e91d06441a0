package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
)

// TestLoadProtocolsAgainstCtxd runs the load through each protocol against a
// real ctxd with its S3 endpoint on, with the raw baseline: every GET must
// succeed with its end-to-end check, and the result must name the check.
func TestLoadProtocolsAgainstCtxd(t *testing.T) {
	dir := t.TempDir()
	fs, err := credential.OpenFile(credential.DefaultConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	key, err := fs.Create(context.Background(), []string{"*"}, "ctxbench load test")
	if err != nil {
		t.Fatal(err)
	}
	s3Addr := freeAddr(t)
	native, base := startCtxdWith(t, ctxdBinary(t), "--data-dir", dir, "--s3-admin-listen", s3Addr, "--dram-capacity", "256MiB")
	common := "--clients 2 --keys 6 --block-size 256KiB --get-ratio 1 --duration 600ms --vs-baseline --addr " + native +
		" --http-url " + base + " --s3-url http://" + s3Addr + " --s3-access-key " + key.AccessKeyID + " --s3-secret-key " + key.Secret
	for _, proto := range []string{protoNative, protoHTTP, protoS3} {
		t.Run(proto, func(t *testing.T) {
			// --server-pid names this process: the figure is then
			// this test's own CPU, which must be positive.
			_, s := runLoadChecked(t, strings.Fields(common+" --proto "+proto+" --server-pid "+strconv.Itoa(os.Getpid())))
			if strings.Contains(s, " (0 gets") {
				t.Fatalf("no gets during the run:\n%s", s)
			}
			if !strings.Contains(s, "proto="+proto+" (GETs checked by "+loadProtos[proto]) {
				t.Fatalf("the result does not name the protocol and its check:\n%s", s)
			}
			if !strings.Contains(s, "server (pid") || strings.Contains(s, "server (pid "+strconv.Itoa(os.Getpid())+") 0.000 s/GB") {
				t.Fatalf("no server CPU figure:\n%s", s)
			}
		})
	}
	t.Run("s3 with a wrong secret", func(t *testing.T) {
		cfg, err := parseLoadFlags(strings.Fields(common+" --proto s3 --s3-secret-key not-the-secret"), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if err := runLoadWith(context.Background(), cfg, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "403") {
			t.Fatalf("got %v, want a refused put (403)", err)
		}
	})
}

func TestParseLoadProto(t *testing.T) {
	t.Setenv("CTXBENCH_S3_ACCESS_KEY", "")
	t.Setenv("CTXBENCH_S3_SECRET_KEY", "")
	tests := []struct {
		args string
		ok   bool
	}{
		{"", true},
		{"--proto http --http-url http://127.0.0.1:1", true},
		{"--proto s3 --s3-access-key A --s3-secret-key S", true},
		{"--proto s3", false},
		{"--proto s3 --s3-access-key A", false},
		{"--proto resp", false},
		{"--server-pid -1", false},
	}
	for _, tc := range tests {
		c, err := parseLoadFlags(strings.Fields(tc.args), io.Discard)
		if (err == nil) != tc.ok {
			t.Errorf("%q: %v, want ok=%v", tc.args, err, tc.ok)
		}
		if tc.args == "" && c.Proto != protoNative {
			t.Errorf("default proto %q", c.Proto)
		}
	}
}

// TestS3LoadGetChecks: the S3 client accepts a body whose CRC-32C matches
// X-Amz-Checksum-Crc32c and refuses one that does not, or a response
// without the header.
func TestS3LoadGetChecks(t *testing.T) {
	body := []byte("the bytes of a block")
	crc := func(b []byte) string {
		return base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, block.Checksum(b)))
	}
	tests := []struct {
		name   string
		header string
		ok     bool
	}{
		{"matching", crc(body), true},
		{"other bytes", crc([]byte("other bytes")), false},
		{"no header", "", false},
		{"not base64", "!!", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("X-Amz-Checksum-Mode") != "ENABLED" || !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
					http.Error(w, "unsigned, or no checksum mode", http.StatusForbidden)
					return
				}
				if tc.header != "" {
					w.Header().Set("X-Amz-Checksum-Crc32c", tc.header)
				}
				w.Write(body)
			}))
			defer srv.Close()
			c, err := newS3LoadConn(loadConfig{S3URL: srv.URL, S3AccessKey: "AKID", S3SecretKey: "secret"}, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer c.close()
			buf := make([]byte, 64)
			n, err := c.getInto(context.Background(), block.NewKey("default", 7), buf)
			switch {
			case tc.ok && (err != nil || !bytes.Equal(buf[:n], body)):
				t.Fatalf("n %d err %v", n, err)
			case !tc.ok && !errors.Is(err, block.ErrChecksum):
				t.Fatalf("got %v, want ErrChecksum", err)
			}
		})
	}
}
