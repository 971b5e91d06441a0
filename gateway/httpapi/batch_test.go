package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
)

func (e *env) postJSON(path, body string) (int, http.Header, []byte) {
	e.t.Helper()
	return e.do("POST", path, map[string]string{"Content-Type": "application/json"}, strings.NewReader(body))
}

func TestLookup(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxLookupBlocks = 4 })
	e.put(h1, []byte("a"), nil)
	e.put(h2, []byte("b"), nil)
	tests := []struct {
		name   string
		ns     string
		body   string
		status int
		code   string
		prefix int
	}{
		{"full prefix", "default", `{"hashes":["` + h1 + `","` + h2 + `"]}`, 200, "", 2},
		{"stops at first miss", "default", `{"hashes":["` + h1 + `","` + h3 + `","` + h2 + `"]}`, 200, "", 1},
		{"first missing", "default", `{"hashes":["` + h3 + `","` + h1 + `"]}`, 200, "", 0},
		{"empty", "default", `{"hashes":[]}`, 200, "", 0},
		{"malformed hash", "default", `{"hashes":["` + h1 + `","xyz"]}`, 400, "InvalidKey", 0},
		{"both inputs", "default", `{"hashes":["` + h1 + `"],"tokens":[1]}`, 400, "InvalidArgument", 0},
		{"unknown field", "default", `{"hash":["` + h1 + `"]}`, 400, "InvalidArgument", 0},
		{"not json", "default", `hashes`, 400, "InvalidArgument", 0},
		{"too many", "default", `{"hashes":["` + strings.Repeat(h1+`","`, 4) + h1 + `"]}`, 413, "TooLarge", 0},
		{"unknown namespace", "nope", `{"hashes":["` + h1 + `"]}`, 404, "UnknownNamespace", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, hdr, body := e.postJSON("/v1/namespaces/"+tc.ns+"/lookup", tc.body)
			if tc.code != "" {
				wantError(t, st, hdr, body, tc.status, tc.code)
				return
			}
			var resp httpwire.LookupResponse
			if st != 200 || json.Unmarshal(body, &resp) != nil || resp.Prefix != tc.prefix {
				t.Fatalf("%d %s, want prefix %d", st, body, tc.prefix)
			}
		})
	}
}

func TestLookupTokens(t *testing.T) {
	e := newEnv(t, nil)
	// The server chains tokens with the namespace's scheme (Dynamo for
	// default): the keys it reports are exactly block.ChainHashes'.
	toks := strings.TrimSuffix(strings.Repeat("7,", 3*512), ",")
	ids := make([]uint32, 3*512)
	for i := range ids {
		ids[i] = 7
	}
	hashes, err := block.ChainHashes(block.SchemeDynamo, 512, "", ids)
	if err != nil {
		t.Fatal(err)
	}
	h1 := block.FormatHash(hashes[0])
	e.put(h1, []byte("a"), nil)
	st, _, body := e.postJSON("/v1/namespaces/default/lookup", `{"tokens":[`+toks+`]}`)
	var resp httpwire.LookupResponse
	if st != 200 || json.Unmarshal(body, &resp) != nil {
		t.Fatalf("token lookup: %d %s", st, body)
	}
	if resp.Prefix != 1 || resp.Blocks != 3 || resp.PrefixTokens != 512 || len(resp.Hashes) != 3 || resp.Hashes[0] != h1 {
		t.Fatalf("token lookup: %+v", resp)
	}
	st, hdr, body := e.postJSON("/v1/namespaces/default/lookup", `{"tokens":[-1]}`)
	wantError(t, st, hdr, body, 400, "InvalidArgument")
}

func TestBatchExistsDelete(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxBatchItems = 3; c.MaxJSONBytes = 1024 })
	e.put(h1, []byte("a"), nil)
	e.put(h2, []byte("b"), nil)
	st, _, body := e.postJSON("/v1/namespaces/default/batch/exists", `{"hashes":["`+h1+`","`+h3+`","`+h2+`"]}`)
	var ex httpwire.ExistsResponse
	if st != 200 || json.Unmarshal(body, &ex) != nil || len(ex.Exists) != 3 || !ex.Exists[0] || ex.Exists[1] || !ex.Exists[2] {
		t.Fatalf("exists: %d %s", st, body)
	}
	bad := []struct {
		name   string
		op     string
		ns     string
		body   string
		status int
		code   string
	}{
		{"exists too many", "exists", "default", `{"hashes":["` + h1 + `","` + h1 + `","` + h1 + `","` + h1 + `"]}`, 413, "TooLarge"},
		{"delete too many", "delete", "default", `{"hashes":["` + h1 + `","` + h1 + `","` + h1 + `","` + h1 + `"]}`, 413, "TooLarge"},
		{"delete malformed", "delete", "default", `{"hashes":["` + h1 + `","nothex"]}`, 400, "InvalidKey"},
		{"delete unknown ns", "delete", "nope", `{"hashes":["` + h1 + `"]}`, 404, "UnknownNamespace"},
		{"delete truncated json", "delete", "default", `{"hashes":["` + h1, 400, "InvalidArgument"},
		{"exists trailing", "exists", "default", `{"hashes":[]}{}`, 400, "InvalidArgument"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			st, hdr, body := e.postJSON("/v1/namespaces/"+tc.ns+"/batch/"+tc.op, tc.body)
			wantError(t, st, hdr, body, tc.status, tc.code)
			if e.tier.Len() != 2 {
				t.Fatal("bad batch changed the store")
			}
		})
	}
	// JSON bodies over MaxJSONBytes: 413 by Content-Length and, chunked, by the reader limit.
	big := `{"hashes":["` + strings.Repeat("0", 2000) + `"]}`
	st, hdr, body := e.postJSON("/v1/namespaces/default/batch/delete", big)
	wantError(t, st, hdr, body, 413, "TooLarge")
	st, hdr, body = e.do("POST", "/v1/namespaces/default/batch/delete", nil, io.MultiReader(strings.NewReader(big)))
	wantError(t, st, hdr, body, 413, "TooLarge")
	st, _, body = e.postJSON("/v1/namespaces/default/batch/delete", `{"hashes":["`+h1+`","`+h3+`"]}`)
	var br httpwire.BatchResponse
	if st != 200 || json.Unmarshal(body, &br) != nil || br.Failed != 1 || br.Results[0].Code != "OK" || br.Results[1].Code != "NotFound" || br.Results[1].Hash != h3 {
		t.Fatalf("delete: %d %s", st, body)
	}
	if e.tier.Len() != 1 {
		t.Fatalf("delete left %d blocks", e.tier.Len())
	}
}

// readMixed splits a batch-get response into parts.
func readMixed(t *testing.T, hdr http.Header, body []byte) []httpwire.GetPart {
	t.Helper()
	mt, params, err := mime.ParseMediaType(hdr.Get("Content-Type"))
	if err != nil || mt != "multipart/mixed" {
		t.Fatalf("content type %q: %v", hdr.Get("Content-Type"), err)
	}
	parts, err := httpwire.ReadBatchGet(bytes.NewReader(body), params["boundary"], "default", httpwire.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return parts
}

func TestBatchGet(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxBatchBytes = 10 })
	e.put(h1, []byte("hello"), nil)
	e.put(h2, []byte("world!"), nil)
	e.put(h3, []byte("x"), nil)
	st, hdr, body := e.postJSON("/v1/namespaces/default/batch/get", `{"hashes":["`+h1+`","0000000000000009","`+h2+`","`+h3+`"]}`)
	if st != 200 {
		t.Fatalf("batch get: %d %s", st, body)
	}
	parts := readMixed(t, hdr, body)
	if len(parts) != 4 {
		t.Fatalf("%d parts", len(parts))
	}
	if string(parts[0].Data) != "hello" || parts[0].Err != nil || parts[0].Tier != block.TierDRAM {
		t.Fatalf("part 0: %+v", parts[0])
	}
	if parts[1].Key.Hash != 9 || parts[1].Err == nil || !strings.Contains(parts[1].Err.Error(), "not found") {
		t.Fatalf("part 1: %+v", parts[1])
	}
	// "world!" would take the response past MaxBatchBytes (10): TooLarge part.
	if parts[2].Err == nil || !strings.Contains(parts[2].Err.Error(), "exceed") {
		t.Fatalf("part 2: %+v", parts[2])
	}
	if string(parts[3].Data) != "x" {
		t.Fatalf("part 3: %+v", parts[3])
	}
	st, hdr, body = e.postJSON("/v1/namespaces/nope/batch/get", `{"hashes":["`+h1+`"]}`)
	wantError(t, st, hdr, body, 404, "UnknownNamespace")
}

func encodeParts(parts []httpwire.Part) (string, []byte) {
	b := httpwire.NewBoundary()
	r, _ := httpwire.EncodeBatchPut(b, parts)
	raw, _ := io.ReadAll(r)
	return httpwire.MixedContentType(b), raw
}

func TestBatchPut(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxBatchItems = 3; c.MaxBatchBytes = 100 })
	e.put(h3, []byte("existing"), nil)
	ct, raw := encodeParts([]httpwire.Part{
		{Key: block.NewKey("default", 1), Data: []byte("one"), Opts: block.PutOptions{Sum: block.Checksum([]byte("one")), HasSum: true}},
		{Key: block.NewKey("default", 2), Data: []byte("two"), Opts: block.PutOptions{Sum: 1, HasSum: true}},
		{Key: block.NewKey("default", 3), Data: []byte("other")},
	})
	st, _, body := e.do("POST", "/v1/namespaces/default/batch/put", map[string]string{"Content-Type": ct}, bytes.NewReader(raw))
	var br httpwire.BatchResponse
	if st != 200 || json.Unmarshal(body, &br) != nil {
		t.Fatalf("batch put: %d %s", st, body)
	}
	want := []string{"OK", "ChecksumMismatch", "Conflict"}
	for i, w := range want {
		if br.Results[i].Code != w {
			t.Fatalf("item %d: %+v, want %s", i, br.Results[i], w)
		}
	}
	if br.Failed != 2 || e.tier.Len() != 2 || string(e.tier.Data(block.NewKey("default", 3))) != "existing" {
		t.Fatalf("after batch: failed %d, %d blocks", br.Failed, e.tier.Len())
	}
}

func TestBatchPutRejects(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxBatchItems = 2; c.MaxBatchBytes = 100 })
	part := func(h uint64, n int) httpwire.Part {
		return httpwire.Part{Key: block.NewKey("default", h), Data: bytes.Repeat([]byte{'z'}, n)}
	}
	okCT, okRaw := encodeParts([]httpwire.Part{part(1, 10), part(2, 10)})
	_, tooMany := encodeParts([]httpwire.Part{part(1, 1), part(2, 1), part(3, 1)})
	_, tooBig := encodeParts([]httpwire.Part{part(1, 60), part(2, 60)})
	tests := []struct {
		name   string
		ns     string
		ct     string
		body   []byte
		status int
		code   string
	}{
		{"truncated multipart", "default", okCT, okRaw[:len(okRaw)-30], 400, "InvalidArgument"},
		{"truncated in header", "default", okCT, okRaw[:20], 400, "InvalidArgument"},
		{"no parts no closing", "default", okCT, []byte("junk"), 400, "InvalidArgument"},
		{"too many items", "default", okCT, tooMany, 413, "TooLarge"},
		{"too many bytes", "default", okCT, tooBig, 413, "TooLarge"},
		{"wrong boundary", "default", "multipart/mixed; boundary=other", okRaw, 400, "InvalidArgument"},
		{"not multipart", "default", "application/json", okRaw, 400, "InvalidArgument"},
		{"no boundary", "default", "multipart/mixed", okRaw, 400, "InvalidArgument"},
		{"unknown namespace", "nope", okCT, okRaw, 404, "UnknownNamespace"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body
			if tc.name == "too many items" || tc.name == "too many bytes" {
				// Re-frame with the boundary the content type names.
				body = bytes.ReplaceAll(body, []byte(boundaryOf(t, tc.body)), []byte(boundaryOf(t, okRaw)))
			}
			st, hdr, resp := e.do("POST", "/v1/namespaces/"+tc.ns+"/batch/put", map[string]string{"Content-Type": tc.ct}, bytes.NewReader(body))
			wantError(t, st, hdr, resp, tc.status, tc.code)
			if e.tier.Len() != 0 {
				t.Fatalf("rejected batch stored %d blocks", e.tier.Len())
			}
		})
	}
	st, _, body := e.do("POST", "/v1/namespaces/default/batch/put", map[string]string{"Content-Type": okCT}, bytes.NewReader(okRaw))
	if st != 200 || e.tier.Len() != 2 {
		t.Fatalf("good batch: %d %s", st, body)
	}
}

// boundaryOf extracts the boundary from the first line of a framed body.
func boundaryOf(t *testing.T, raw []byte) string {
	t.Helper()
	line, _, ok := bytes.Cut(raw, []byte("\r\n"))
	if !ok || !bytes.HasPrefix(line, []byte("--")) {
		t.Fatalf("no boundary line in %q", raw[:min(len(raw), 40)])
	}
	return string(line[2:])
}
