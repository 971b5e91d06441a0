package routing

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/router"
	"github.com/ctxtier/ctxtier/gateway/kvevent"
)

func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	r, err := router.New(router.DefaultConfig(), router.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	in, err := kvevent.New(kvevent.DefaultConfig(), r, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler("/v1/route", r, in, nil))
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, srv *httptest.Server, path, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%s: %q: %v", path, b, err)
		}
	}
	return resp.StatusCode, out
}

func TestHTTPEventsQueryLoad(t *testing.T) {
	srv := newServer(t)
	code, res := post(t, srv, "/v1/route/events", `{"namespace":"m","worker":"a","seq":0,
	  "events":[{"type":"BlockStored","block_hashes":[1,2,3],"parent_block_hash":null,"token_ids":[],"block_size":16,"lora_id":null,"medium":"GPU"}]}`)
	if code != 200 || res["sequence"] != "first" {
		t.Fatalf("%d %v", code, res)
	}
	code, res = post(t, srv, "/v1/route/events", `{"namespace":"m","worker":"b","seq":0,
	  "events":[{"type":"BlockStored","block_hashes":["0000000000000001"],"medium":"CPU"}],
	  "load":{"active_prefill_blocks":0,"active_decode_blocks":4}}`)
	if code != 200 {
		t.Fatalf("%d %v", code, res)
	}
	// Gap on a: marked stale.
	code, res = post(t, srv, "/v1/route/events", `{"namespace":"m","worker":"a","seq":3,"events":[]}`)
	if code != 200 || res["stale"] != true { //nolint:revive // res is a map[string]any: true also checks the type
		t.Fatalf("gap: %d %v", code, res)
	}
	// Dump: fresh again.
	code, res = post(t, srv, "/v1/route/events", `{"namespace":"m","worker":"a","seq":4,"dump":true,
	  "events":[{"type":"BlockStored","block_hashes":[1,2,3],"medium":"GPU"}]}`)
	if code != 200 || res["sequence"] != "dump" {
		t.Fatalf("dump: %d %v", code, res)
	}
	if code, _ := post(t, srv, "/v1/route/load", `{"namespace":"m","worker":"a","active_prefill_blocks":1,"active_decode_blocks":2}`); code != 204 {
		t.Fatalf("load %d", code)
	}
	code, res = post(t, srv, "/v1/route/query", `{"namespace":"m","block_hashes":[1,2,3,4],
	  "hints":{"priority":1,"expected_output_tokens":100,"cache_control":{"type":"ephemeral","ttl":"5m"}}}`)
	if code != 200 || res["recommended"] != "a" || res["blocks"] != 4.0 {
		t.Fatalf("query: %d %v", code, res)
	}
	ws := res["workers"].([]any)
	first := ws[0].(map[string]any)
	if first["worker"] != "a" || first["device"] != 3.0 || first["load"].(map[string]any)["active_decode_blocks"] != 2.0 {
		t.Fatalf("workers %v", ws)
	}
	if res["pin_error"] == nil { // no Pinner wired in this server
		t.Fatalf("pin without a pinner not reported: %v", res)
	}

	resp, err := http.Get(srv.URL + "/v1/route/workers?namespace=m")
	if err != nil {
		t.Fatal(err)
	}
	var wl struct{ Workers []router.WorkerInfo }
	_ = json.NewDecoder(resp.Body).Decode(&wl)
	resp.Body.Close()
	if len(wl.Workers) != 2 {
		t.Fatalf("workers %+v", wl)
	}
}

func TestHTTPErrors(t *testing.T) {
	srv := newServer(t)
	for _, tc := range []struct {
		path, body, code string
		status           int
	}{
		{"/v1/route/query", `{"namespace":"Bad NS"}`, "InvalidArgument", 400},
		{"/v1/route/query", `{"block_hashes":["xyz"]}`, "InvalidArgument", 400},
		{"/v1/route/query", `{"token_ids":[1,2,3]}`, "InvalidArgument", 400},
		{"/v1/route/query", `{"hints":{"cache_control":{"type":"forever"}}}`, "InvalidArgument", 400},
		{"/v1/route/query", `{} {}`, "InvalidArgument", 400},
		{"/v1/route/events", `{"events":[]}`, "InvalidArgument", 400},
		{"/v1/route/events", `{"worker":"w","dump":true,"events":[{"type":"AllBlocksCleared"}]}`, "InvalidArgument", 400},
		{"/v1/route/load", `{"worker":"w","active_prefill_blocks":-1}`, "InvalidArgument", 400},
	} {
		code, res := post(t, srv, tc.path, tc.body)
		if code != tc.status || res["code"] != tc.code || res["message"] == "" {
			t.Errorf("%s %s: %d %v", tc.path, tc.body, code, res)
		}
	}
}

// retainTier is a router.TierIndex that holds every block and records the
// read retain window of each lookup.
type retainTier struct{ got []time.Duration }

func (f *retainTier) Lookup(_ context.Context, keys []block.Key, opts ctxstore.ReadOptions) (int, error) {
	f.got = append(f.got, opts.Retain)
	return len(keys), nil
}

// TestHTTPQueryRetain: hints.retain (a duration string or seconds) reaches
// the router's tier lookup; a bad or non-positive one is InvalidArgument
// and looks nothing up.
func TestHTTPQueryRetain(t *testing.T) {
	for _, tc := range []struct {
		retain string // the JSON value; "" leaves the field out
		status int
		want   time.Duration
	}{
		{"", 200, 0},
		{"null", 200, 0},
		{`"30s"`, 200, 30 * time.Second},
		{`"2m"`, 200, 2 * time.Minute},
		{"45", 200, 45 * time.Second},
		{`"45"`, 200, 45 * time.Second},
		{`"0"`, 400, 0},
		{"0", 400, 0},
		{`"-5s"`, 400, 0},
		{`"soon"`, 400, 0},
		{"1.5", 400, 0},
		{"true", 400, 0},
		{`"100000h"`, 400, 0},
	} {
		t.Run(tc.retain, func(t *testing.T) {
			tier := &retainTier{}
			r, err := router.New(router.DefaultConfig(), router.Deps{Tier: tier})
			if err != nil {
				t.Fatal(err)
			}
			in, err := kvevent.New(kvevent.DefaultConfig(), r, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(Handler("/v1/route", r, in, nil))
			defer srv.Close()
			hints := `{}`
			if tc.retain != "" {
				hints = `{"retain":` + tc.retain + `}`
			}
			code, res := post(t, srv, "/v1/route/query", `{"namespace":"m","block_hashes":[1,2],"hints":`+hints+`}`)
			if code != tc.status {
				t.Fatalf("%d %v, want %d", code, res, tc.status)
			}
			if tc.status != 200 {
				if res["code"] != "InvalidArgument" || len(tier.got) != 0 {
					t.Fatalf("%v, %d lookups", res, len(tier.got))
				}
				return
			}
			if len(tier.got) != 1 || tier.got[0] != tc.want || res["tier_depth"] != 2.0 {
				t.Fatalf("lookups with retain %v, tier_depth %v; want [%v] and 2", tier.got, res["tier_depth"], tc.want)
			}
		})
	}
}
