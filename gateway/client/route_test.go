package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/router"
	"github.com/ctxtier/ctxtier/gateway/kvevent"
	"github.com/ctxtier/ctxtier/gateway/native"
	"github.com/ctxtier/ctxtier/gateway/native/nativetest"
	"github.com/ctxtier/ctxtier/gateway/routing"
)

// routeEnv serves a router over the native protocol and HTTP/JSON. Block
// i of "default" has hash i+1; blocks 1..tier are in the store; worker w
// holds the first (w*7)%(blocks+1) blocks, on its device for even w, in host
// memory for odd w.
type routeEnv struct {
	rt     *router.Router
	c      *Client
	http   *httptest.Server
	hashes []uint64
}

func startRouteEnv(tb testing.TB, cfg native.Config, workers, blocks, tier int) *routeEnv {
	tb.Helper()
	srv, rt, err := nativetest.StartRouter(tb, cfg, router.DefaultConfig(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	e := &routeEnv{rt: rt}
	for i := range blocks {
		e.hashes = append(e.hashes, uint64(i+1))
	}
	for _, h := range e.hashes[:tier] {
		if err := srv.Store.Put(ctx, block.NewKey("default", h), []byte("kv"), block.PutOptions{}); err != nil {
			tb.Fatal(err)
		}
	}
	for w := range workers {
		m := router.Device
		if w%2 == 1 {
			m = router.Host
		}
		name := fmt.Sprintf("vllm-%d", w)
		if d := (w * 7) % (blocks + 1); d > 0 {
			if _, err := rt.Apply("default", name, []router.Event{{Kind: router.Stored, Hashes: e.hashes[:d], Medium: m}}); err != nil {
				tb.Fatal(err)
			}
		}
		if err := rt.ReportLoad("default", name, router.Load{PrefillBlocks: int64(w % 3), DecodeBlocks: int64(w % 50)}); err != nil {
			tb.Fatal(err)
		}
	}
	if e.c, err = Dial(ctx, srv.Addr, Options{Conns: 1}); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.c.Close() })
	in, err := kvevent.New(kvevent.DefaultConfig(), rt, nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	e.http = httptest.NewServer(routing.Handler("/v1/route", rt, in, nil))
	tb.Cleanup(e.http.Close)
	return e
}

// routeHTTP asks the HTTP/JSON query API what Client.Route asks natively.
func (e *routeEnv) routeHTTP(hc *http.Client, q router.Query) (router.Result, error) {
	var body routing.QueryRequest
	body.Namespace, body.TokenIDs, body.Temperature, body.MaxWorkers, body.Commit = q.Namespace, q.TokenIDs, q.Temperature, q.MaxWorkers, q.Commit
	body.BlockHashes = make([]kvevent.Hash, len(q.BlockHashes))
	for i, h := range q.BlockHashes {
		body.BlockHashes[i] = kvevent.Hash(h)
	}
	body.Hints.Priority, body.Hints.ExpectedOutputTokens = q.Hints.Priority, q.Hints.ExpectedOutputTokens
	b, err := json.Marshal(body)
	if err != nil {
		return router.Result{}, err
	}
	resp, err := hc.Post(e.http.URL+"/v1/route/query", "application/json", bytes.NewReader(b))
	if err != nil {
		return router.Result{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return router.Result{}, fmt.Errorf("route query: HTTP %d", resp.StatusCode)
	}
	var res router.Result
	err = json.NewDecoder(resp.Body).Decode(&res)
	return res, err
}

func TestRouteClient(t *testing.T) {
	e := startRouteEnv(t, native.DefaultConfig(), 20, 32, 8)
	ctx := context.Background()
	temp := 0.0
	for _, q := range []router.Query{
		{BlockHashes: e.hashes},
		{Namespace: "default", BlockHashes: e.hashes[:5], MaxWorkers: 3, Temperature: &temp, Hints: router.Hints{Priority: 2, ExpectedOutputTokens: 10}},
		{Namespace: "nowhere", BlockHashes: e.hashes},
	} {
		got, err := e.c.Route(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if q.Namespace == "" {
			q.Namespace = block.DefaultNamespace
		}
		want, err := e.rt.Route(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		want.Hashes = nil
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("native %+v\nrouter %+v", got, want)
		}
		// The HTTP/JSON API answers the same.
		viaHTTP, err := e.routeHTTP(http.DefaultClient, q)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, viaHTTP) {
			t.Fatalf("native %+v\nhttp   %+v", got, viaHTTP)
		}
	}
	got, _ := e.c.Route(ctx, router.Query{BlockHashes: e.hashes})
	if got.Blocks != 32 || got.TierDepth != 8 || got.Recommended == "" || len(got.Workers) != 16 || got.Namespace != "default" {
		t.Fatalf("result %+v", got)
	}

	// A query larger than the gather buffer goes out as its own write.
	long := make([]uint64, 20000)
	for i := range long {
		long[i] = uint64(i + 1)
	}
	if got, err := e.c.Route(ctx, router.Query{BlockHashes: long}); err != nil || got.Blocks != len(long) || got.Recommended != "vllm-14" {
		t.Fatalf("long query: %d blocks, recommended %q, %v", got.Blocks, got.Recommended, err)
	}
	tests := []struct {
		name string
		q    router.Query
		want error
	}{
		{"negative hint", router.Query{BlockHashes: e.hashes, Hints: router.Hints{PinTTL: -time.Second}}, block.ErrInvalidArgument},
		{"negative max_workers", router.Query{MaxWorkers: -1}, block.ErrInvalidArgument},
		{"server refuses priority", router.Query{Hints: router.Hints{Priority: 8}}, block.ErrInvalidArgument},
		{"above max_query_blocks", router.Query{BlockHashes: make([]uint64, 1<<17)}, block.ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := e.c.Route(ctx, tc.q); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	// A query over the server's frame limit fails before it is sent.
	small := startRouteEnv(t, func() native.Config { c := native.DefaultConfig(); c.MaxBlockSize = 1 << 20; return c }(), 1, 2, 0)
	if _, err := small.c.Route(ctx, router.Query{BlockHashes: make([]uint64, 1<<17+1)}); !errors.Is(err, block.ErrTooLarge) {
		t.Fatalf("over the frame limit: %v", err)
	}
	if err := small.c.Ping(ctx); err != nil {
		t.Fatalf("ping after a refused query: %v", err)
	}

	// A server without a router answers InvalidArgument.
	_, plain := start(t, native.DefaultConfig())
	if _, err := plain.Route(ctx, router.Query{BlockHashes: e.hashes}); !errors.Is(err, block.ErrInvalidArgument) {
		t.Fatalf("no router: %v", err)
	}
}

// The route benchmarks: 100 workers, a 32-block query (8 blocks in the
// tier), the default 16 workers listed, one connection each way.
const benchWorkers, benchBlocks, benchTier = 100, 32, 8

func BenchmarkRouteNative(b *testing.B) {
	e := startRouteEnv(b, native.DefaultConfig(), benchWorkers, benchBlocks, benchTier)
	ctx := context.Background()
	q := router.Query{Namespace: "default", BlockHashes: e.hashes}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.c.Route(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRouteHTTP(b *testing.B) {
	e := startRouteEnv(b, native.DefaultConfig(), benchWorkers, benchBlocks, benchTier)
	hc := &http.Client{}
	q := router.Query{Namespace: "default", BlockHashes: e.hashes}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.routeHTTP(hc, q); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRouteNativeVsHTTP alternates the same query in-process
// (router.Route), over the native protocol and over HTTP/JSON, so the three
// see the same machine load, and reports each one's time per query and
// the ratio http/native. ns/op is the sum of the three.
func BenchmarkRouteNativeVsHTTP(b *testing.B) {
	e := startRouteEnv(b, native.DefaultConfig(), benchWorkers, benchBlocks, benchTier)
	ctx := context.Background()
	hc := &http.Client{}
	q := router.Query{Namespace: "default", BlockHashes: e.hashes}
	var direct, nat, web time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := e.rt.Route(ctx, q); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := e.c.Route(ctx, q); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if _, err := e.routeHTTP(hc, q); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		direct += t1.Sub(t0)
		nat += t2.Sub(t1)
		web += t3.Sub(t2)
	}
	n := float64(b.N)
	b.ReportMetric(float64(direct.Nanoseconds())/n, "direct-ns/op")
	b.ReportMetric(float64(nat.Nanoseconds())/n, "native-ns/op")
	b.ReportMetric(float64(web.Nanoseconds())/n, "http-ns/op")
	b.ReportMetric(float64(web)/float64(nat), "http/native")
}
