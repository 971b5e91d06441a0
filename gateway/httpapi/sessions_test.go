package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TestAgentSessionHeaders: X-Ctxtier-Session on a put reaches the tier;
// X-Ctxtier-Retain on GET, batch get and lookup re-arms the blocks they
// touch; POST .../sessions/{id}/end releases a session; bad values are 400
// InvalidArgument and change nothing.
func TestAgentSessionHeaders(t *testing.T) {
	e := newEnv(t, nil)
	k1, k2 := block.NewKey("default", 201), block.NewKey("default", 202)
	h1, h2 := block.FormatHash(k1.Hash), block.FormatHash(k2.Hash)
	if st, b := e.put(h1, []byte("one"), map[string]string{"X-Ctxtier-Reuse": "session", "X-Ctxtier-Retain": "30", "X-Ctxtier-Session": "42"}); st != http.StatusCreated {
		t.Fatalf("put: %d %s", st, b)
	}
	if st, b := e.put(h2, []byte("two"), map[string]string{"X-Ctxtier-Session": "43"}); st != http.StatusCreated {
		t.Fatalf("put: %d %s", st, b)
	}
	if o, _ := e.tier.PutOptions(k1); o.Session != 42 || o.Retain != 30*time.Second {
		t.Fatalf("the tier got %+v", o)
	}
	for _, tc := range []struct {
		name   string
		method string
		path   string
		hdr    map[string]string
		body   string
		status int
		want   map[block.Key]time.Duration
	}{
		{"get", "GET", "/v1/namespaces/default/blocks/" + h1, map[string]string{"X-Ctxtier-Retain": "20"}, "", 200, map[block.Key]time.Duration{k1: 20 * time.Second}},
		{"get without the header", "GET", "/v1/namespaces/default/blocks/" + h1, nil, "", 200, nil},
		{"batch get", "POST", "/v1/namespaces/default/batch/get", map[string]string{"X-Ctxtier-Retain": "1500ms"}, `{"hashes":["` + h1 + `","` + h2 + `"]}`, 200,
			map[block.Key]time.Duration{k1: 1500 * time.Millisecond, k2: 1500 * time.Millisecond}},
		{"lookup: the present prefix", "POST", "/v1/namespaces/default/lookup", map[string]string{"X-Ctxtier-Retain": "5m"}, `{"hashes":["` + h2 + `","00000000000000ff","` + h1 + `"]}`, 200,
			map[block.Key]time.Duration{k2: 5 * time.Minute}},
		{"get, window 0", "GET", "/v1/namespaces/default/blocks/" + h1, map[string]string{"X-Ctxtier-Retain": "0"}, "", 400, nil},
		{"get, not a window", "GET", "/v1/namespaces/default/blocks/" + h1, map[string]string{"X-Ctxtier-Retain": "soon"}, "", 400, nil},
		{"lookup, empty window", "POST", "/v1/namespaces/default/lookup", map[string]string{"X-Ctxtier-Retain": ""}, `{"hashes":["` + h1 + `"]}`, 400, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, hdr, b := e.do(tc.method, tc.path, tc.hdr, bytes.NewReader([]byte(tc.body)))
			if tc.status != 200 {
				wantError(t, st, hdr, b, tc.status, "InvalidArgument")
			} else if st != 200 {
				t.Fatalf("%d %s", st, b)
			}
			got := e.tier.Retains()
			if len(got) != len(tc.want) {
				t.Fatalf("the tier saw retain windows %v, want %v", got, tc.want)
			}
			for k, d := range tc.want {
				if got[k] != d {
					t.Fatalf("the tier saw retain windows %v, want %v", got, tc.want)
				}
			}
		})
	}
	for _, tc := range []struct {
		path     string
		status   int
		released int
	}{
		{"/v1/namespaces/default/sessions/42/end", 200, 1},
		{"/v1/namespaces/default/sessions/42/end", 200, 0},
		{"/v1/namespaces/default/sessions/0/end", 400, 0},
		{"/v1/namespaces/default/sessions/x/end", 400, 0},
		{"/v1/namespaces/default/sessions/18446744073709551616/end", 400, 0},
	} {
		st, hdr, b := e.do("POST", tc.path, nil, nil)
		if tc.status != 200 {
			wantError(t, st, hdr, b, tc.status, "InvalidArgument")
			continue
		}
		var resp struct{ Released int }
		if st != 200 || json.Unmarshal(b, &resp) != nil || resp.Released != tc.released {
			t.Fatalf("%s: %d %s, want %d released", tc.path, st, b, tc.released)
		}
	}
	if o, _ := e.tier.PutOptions(k2); o.Session != 43 {
		t.Fatalf("session 43's block lost its session: %+v", o)
	}
	st, hdr, b := e.do("POST", "/v1/namespaces/nosuch/sessions/43/end", nil, nil)
	wantError(t, st, hdr, b, http.StatusNotFound, "UnknownNamespace")
	if st, b := e.put(block.FormatHash(203), []byte("x"), map[string]string{"X-Ctxtier-Session": "0"}); st != 400 {
		t.Fatalf("put with session 0: %d %s", st, b)
	}
}
