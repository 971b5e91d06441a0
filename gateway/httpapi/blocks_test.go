package httpapi

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
)

const (
	h1 = "0000000000000001"
	h2 = "0000000000000002"
	h3 = "0000000000000003"
)

func crc(b []byte) string { return httpwire.FormatSum(block.Checksum(b)) }

func TestBlockLifecycle(t *testing.T) {
	e := newEnv(t, nil)
	data := []byte("the kv cache of a prefix")
	if st, b := e.put(h1, data, map[string]string{"X-Ctxtier-Crc32c": crc(data), "X-Ctxtier-Priority": "3", "X-Ctxtier-Pin-Ttl": "60"}); st != http.StatusCreated {
		t.Fatalf("put: %d %s", st, b)
	}
	st, hdr, body := e.do("GET", "/v1/namespaces/default/blocks/"+h1, nil, nil)
	if st != 200 || !bytes.Equal(body, data) {
		t.Fatalf("get: %d %q", st, body)
	}
	for k, want := range map[string]string{"X-Ctxtier-Crc32c": crc(data), "X-Ctxtier-Tier": "dram", "Content-Length": "24", "Content-Type": "application/octet-stream"} {
		if hdr.Get(k) != want {
			t.Errorf("get header %s = %q, want %q", k, hdr.Get(k), want)
		}
	}
	st, hdr, body = e.do("HEAD", "/v1/namespaces/default/blocks/"+h1, nil, nil)
	if st != 200 || len(body) != 0 || hdr.Get("Content-Length") != "24" || hdr.Get("X-Ctxtier-Crc32c") != crc(data) || hdr.Get("X-Ctxtier-Priority") != "3" {
		t.Fatalf("head: %d %v", st, hdr)
	}
	pin1, err := time.Parse(time.RFC3339Nano, hdr.Get("X-Ctxtier-Pinned-Until"))
	if err != nil {
		t.Fatalf("pinned-until: %v", err)
	}
	// Pin longer, by query and by JSON body.
	if st, _, b := e.do("POST", "/v1/namespaces/default/blocks/"+h1+"/pin?ttl=10m", nil, nil); st != http.StatusNoContent {
		t.Fatalf("pin query: %d %s", st, b)
	}
	if st, _, b := e.do("POST", "/v1/namespaces/default/blocks/"+h1+"/pin", nil, strings.NewReader(`{"ttl_seconds":3600}`)); st != http.StatusNoContent {
		t.Fatalf("pin body: %d %s", st, b)
	}
	_, hdr, _ = e.do("HEAD", "/v1/namespaces/default/blocks/"+h1, nil, nil)
	pin2, _ := time.Parse(time.RFC3339Nano, hdr.Get("X-Ctxtier-Pinned-Until"))
	if pin2.Sub(pin1) < 50*time.Minute {
		t.Fatalf("pin not extended: %v -> %v", pin1, pin2)
	}
	// A tensor-parallel part is its own block.
	if st, b := e.put(h1+".3", []byte("rank 3"), nil); st != http.StatusCreated {
		t.Fatalf("put part: %d %s", st, b)
	}
	if _, _, body := e.do("GET", "/v1/namespaces/default/blocks/"+h1+".3", nil, nil); string(body) != "rank 3" {
		t.Fatalf("get part: %q", body)
	}
	if st, _, _ := e.do("DELETE", "/v1/namespaces/default/blocks/"+h1, nil, nil); st != http.StatusNoContent {
		t.Fatalf("delete: %d", st)
	}
	st, hdr, body = e.do("GET", "/v1/namespaces/default/blocks/"+h1, nil, nil)
	wantError(t, st, hdr, body, 404, "NotFound")
	st, hdr, body = e.do("HEAD", "/v1/namespaces/default/blocks/"+h1, nil, nil)
	wantError(t, st, hdr, body, 404, "NotFound")
	st, hdr, body = e.do("DELETE", "/v1/namespaces/default/blocks/"+h1, nil, nil)
	wantError(t, st, hdr, body, 404, "NotFound")
}

func TestPutRejects(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxBlockSize = 64 })
	orig := []byte("original")
	if st, b := e.put(h1, orig, nil); st != http.StatusCreated {
		t.Fatalf("seed: %d %s", st, b)
	}
	tests := []struct {
		name   string
		path   string
		hdr    map[string]string
		body   string
		status int
		code   string
	}{
		{"malformed hash", "/v1/namespaces/default/blocks/123", nil, "x", 400, "InvalidKey"},
		{"upper-case hash", "/v1/namespaces/default/blocks/000000000000000A", nil, "x", 400, "InvalidKey"},
		{"bad part", "/v1/namespaces/default/blocks/" + h2 + ".01", nil, "x", 400, "InvalidKey"},
		{"unknown namespace", "/v1/namespaces/nope/blocks/" + h2, nil, "x", 404, "UnknownNamespace"},
		{"invalid namespace name", "/v1/namespaces/Bad_Name/blocks/" + h2, nil, "x", 400, "InvalidArgument"},
		{"namespace name too long", "/v1/namespaces/" + strings.Repeat("n", 200) + "/blocks/" + h2, nil, "x", 400, "InvalidArgument"},
		{"checksum mismatch", "/v1/namespaces/default/blocks/" + h2, map[string]string{"X-Ctxtier-Crc32c": "00000000"}, "x", 400, "ChecksumMismatch"},
		{"malformed checksum", "/v1/namespaces/default/blocks/" + h2, map[string]string{"X-Ctxtier-Crc32c": "xyz"}, "x", 400, "InvalidArgument"},
		{"bad priority", "/v1/namespaces/default/blocks/" + h2, map[string]string{"X-Ctxtier-Priority": "9"}, "x", 400, "InvalidArgument"},
		{"bad pin ttl", "/v1/namespaces/default/blocks/" + h2, map[string]string{"X-Ctxtier-Pin-Ttl": "-5"}, "x", 400, "InvalidArgument"},
		{"bad reuse hint", "/v1/namespaces/default/blocks/" + h2, map[string]string{"X-Ctxtier-Reuse": "always"}, "x", 400, "InvalidArgument"},
		{"bad retain window", "/v1/namespaces/default/blocks/" + h2, map[string]string{"X-Ctxtier-Retain": "later"}, "x", 400, "InvalidArgument"},
		{"retain on reuse never", "/v1/namespaces/default/blocks/" + h2, map[string]string{"X-Ctxtier-Reuse": "never", "X-Ctxtier-Retain": "30"}, "x", 400, "InvalidArgument"},
		{"empty body", "/v1/namespaces/default/blocks/" + h2, nil, "", 400, "InvalidArgument"},
		{"oversized", "/v1/namespaces/default/blocks/" + h2, nil, strings.Repeat("x", 65), 413, "TooLarge"},
		{"conflicting re-put", "/v1/namespaces/default/blocks/" + h1, nil, "different", 409, "Conflict"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, hdr, body := e.do("PUT", tc.path, tc.hdr, strings.NewReader(tc.body))
			wantError(t, st, hdr, body, tc.status, tc.code)
			if e.tier.Len() != 1 || !bytes.Equal(e.tier.Data(block.NewKey("default", 1)), orig) {
				t.Fatalf("store changed: %d blocks", e.tier.Len())
			}
		})
	}
	// The identical re-put is idempotent.
	if st, b := e.put(h1, orig, map[string]string{"X-Ctxtier-Crc32c": crc(orig)}); st != http.StatusCreated {
		t.Fatalf("idempotent re-put: %d %s", st, b)
	}
}

// countReader counts the bytes read from it.
type countReader struct {
	r io.Reader
	n int
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestPutOversizedNotRead(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxBlockSize = 1 << 10 })
	// Declared too large: refused before reading a byte.
	cr := &countReader{r: bytes.NewReader(make([]byte, 1<<20))}
	req := httptest.NewRequest("PUT", "/v1/namespaces/default/blocks/"+h1, cr)
	req.ContentLength = 1 << 20
	rec := httptest.NewRecorder()
	e.srv.Handler().ServeHTTP(rec, req)
	if rec.Code != 413 || cr.n != 0 {
		t.Fatalf("declared oversize: status %d, read %d bytes", rec.Code, cr.n)
	}
	// Chunked (no length): cut off just past the limit.
	cr = &countReader{r: bytes.NewReader(make([]byte, 1<<20))}
	req = httptest.NewRequest("PUT", "/v1/namespaces/default/blocks/"+h1, cr)
	req.ContentLength = -1
	rec = httptest.NewRecorder()
	e.srv.Handler().ServeHTTP(rec, req)
	if rec.Code != 413 || cr.n > 64<<10 {
		t.Fatalf("chunked oversize: status %d, read %d bytes", rec.Code, cr.n)
	}
	// Namespace limit smaller than the server's applies too.
	if st, _, b := e.do("POST", "/v1/namespaces", nil, strings.NewReader(`{"name":"small","max_block_size":4}`)); st != http.StatusCreated {
		t.Fatalf("create: %d %s", st, b)
	}
	st, hdr, body := e.do("PUT", "/v1/namespaces/small/blocks/"+h1, nil, strings.NewReader("12345"))
	wantError(t, st, hdr, body, 413, "TooLarge")
	if e.tier.Len() != 0 {
		t.Fatal("oversized block stored")
	}
	// Over the real network, chunked.
	req, _ = http.NewRequest("PUT", e.ts.URL+"/v1/namespaces/default/blocks/"+h1, io.MultiReader(strings.NewReader(strings.Repeat("y", 2000))))
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Fatalf("chunked over network: %d", resp.StatusCode)
	}
}

func TestGetRange(t *testing.T) {
	e := newEnv(t, nil)
	data := []byte("0123456789")
	e.put(h1, data, nil)
	tests := []struct {
		rng    string
		status int
		body   string
	}{
		{"bytes=2-4", 206, "234"},
		{"bytes=7-", 206, "789"},
		{"bytes=-2", 206, "89"},
		{"bytes=20-30", 416, ""},
		{"bytes=10-", 416, ""},
	}
	for _, tc := range tests {
		st, hdr, body := e.do("GET", "/v1/namespaces/default/blocks/"+h1, map[string]string{"Range": tc.rng}, nil)
		if st != tc.status || (tc.status == 206 && string(body) != tc.body) {
			t.Errorf("Range %s: %d %q", tc.rng, st, body)
		}
		if tc.status == 416 {
			// The API's JSON error, with the RFC 9110 Content-Range.
			wantError(t, st, hdr, body, 416, "InvalidArgument")
			if !strings.Contains(string(body), "not satisfiable") || hdr.Get("Content-Type") != jsonType {
				t.Errorf("Range %s: %s body %q", tc.rng, hdr.Get("Content-Type"), body)
			}
			if hdr.Get("Content-Range") != "bytes */10" {
				t.Errorf("Range %s: Content-Range %q", tc.rng, hdr.Get("Content-Range"))
			}
		}
		if tc.status == 206 && hdr.Get("X-Ctxtier-Crc32c") != crc(data) {
			t.Errorf("Range %s: checksum header %q is not the whole block's", tc.rng, hdr.Get("X-Ctxtier-Crc32c"))
		}
	}
	st, _, _ := e.do("GET", "/v1/namespaces/default/blocks/"+h1, map[string]string{"If-None-Match": `"` + crc(data) + `"`}, nil)
	if st != http.StatusNotModified {
		t.Errorf("If-None-Match: %d", st)
	}
}

func TestPinRejects(t *testing.T) {
	e := newEnv(t, nil)
	e.put(h1, []byte("x"), nil)
	tests := []struct {
		name   string
		query  string
		body   string
		status int
		code   string
	}{
		{"no ttl", "", "", 400, "InvalidArgument"},
		{"zero ttl", "?ttl=0", "", 400, "InvalidArgument"},
		{"negative body ttl", "", `{"ttl_seconds":-1}`, 400, "InvalidArgument"},
		{"bad json", "", `{"ttl":1}`, 400, "InvalidArgument"},
		{"garbage ttl", "?ttl=soon", "", 400, "InvalidArgument"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, hdr, body := e.do("POST", "/v1/namespaces/default/blocks/"+h1+"/pin"+tc.query, nil, strings.NewReader(tc.body))
			wantError(t, st, hdr, body, tc.status, tc.code)
		})
	}
	st, hdr, body := e.do("POST", "/v1/namespaces/default/blocks/"+h2+"/pin?ttl=5", nil, nil)
	wantError(t, st, hdr, body, 404, "NotFound")
	_, hdr, _ = e.do("HEAD", "/v1/namespaces/default/blocks/"+h1, nil, nil)
	if hdr.Get("X-Ctxtier-Pinned-Until") != "" {
		t.Fatal("a rejected pin pinned the block")
	}
}

// TestPutHintHeaders: X-Ctxtier-Reuse and X-Ctxtier-Retain reach the tier.
func TestPutHintHeaders(t *testing.T) {
	e := newEnv(t, nil)
	for i, tc := range []struct {
		hdr    map[string]string
		reuse  block.Reuse
		retain time.Duration
	}{
		{map[string]string{"X-Ctxtier-Reuse": "shared", "X-Ctxtier-Retain": "600"}, block.ReuseShared, 10 * time.Minute},
		{map[string]string{"X-Ctxtier-Reuse": "session", "X-Ctxtier-Retain": "1500ms"}, block.ReuseSession, 1500 * time.Millisecond},
		{map[string]string{"X-Ctxtier-Reuse": "never"}, block.ReuseNever, 0},
		{nil, block.ReuseUnknown, 0},
	} {
		hash := block.FormatHash(uint64(100 + i))
		data := []byte(fmt.Sprintf("block %d", i))
		if st, b := e.put(hash, data, tc.hdr); st != http.StatusCreated {
			t.Fatalf("put %d: %d %s", i, st, b)
		}
		o, _ := e.tier.PutOptions(block.NewKey("default", uint64(100+i)))
		if o.Reuse != tc.reuse || o.Retain != tc.retain {
			t.Fatalf("put %d: the tier got reuse %v retain %v, want %v %v", i, o.Reuse, o.Retain, tc.reuse, tc.retain)
		}
	}
}
