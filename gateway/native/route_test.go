package native_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/ctxstore/router"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/native"
	"github.com/ctxtier/ctxtier/gateway/native/nativetest"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
)

// tokenNS has 4-token blocks, so token-id queries stay short.
var tokenNS = block.Namespace{Name: "t", BlockTokens: 4}

func stored(m router.Medium, hashes ...uint64) []router.Event {
	return []router.Event{{Kind: router.Stored, Hashes: hashes, Medium: m}}
}

// startRouter serves a store holding blocks 1 and 2 of "default" and a
// router that knows three workers of "default": hot holds 1..4 on its
// device, warm 1..2 in host memory (and is loaded), cold only 9.
func startRouter(t *testing.T, rcfg router.Config, opts ...native.Option) (*nativetest.Server, *router.Router) {
	t.Helper()
	srv, rt, err := nativetest.StartRouter(t, smallConfig(), rcfg, opts, tokenNS, block.Namespace{Name: "a"}, block.Namespace{Name: "b"})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []uint64{1, 2} {
		if err := srv.Store.Put(t.Context(), block.NewKey("default", h), []byte("block"), block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for w, evs := range map[string][]router.Event{
		"hot": stored(router.Device, 1, 2, 3, 4), "warm": stored(router.Host, 1, 2), "cold": stored(router.Device, 9),
	} {
		if _, err := rt.Apply("default", w, evs); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.ReportLoad("default", "warm", router.Load{PrefillBlocks: 1, DecodeBlocks: 30}); err != nil {
		t.Fatal(err)
	}
	return srv, rt
}

func routeFrame(id uint64, q router.Query) []byte {
	return frame(wire.OpRoute, id, 0, wire.AppendRouteQuery(nil, q))
}

// TestRouteNativeMatchesRouter: the native answer is router.Route's answer,
// field for field, for hash and token-id queries with every option.
func TestRouteNativeMatchesRouter(t *testing.T) {
	srv, rt := startRouter(t, router.DefaultConfig())
	ns, err := srv.Store.Namespace("t")
	if err != nil {
		t.Fatal(err)
	}
	toks := []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9}
	th, err := ns.ChainHashes(toks)
	if err != nil || len(th) != 2 {
		t.Fatalf("chain hashes %v %v", th, err)
	}
	if _, err := rt.Apply("t", "tok", stored(router.Disk, th...)); err != nil {
		t.Fatal(err)
	}
	hashes := []uint64{1, 2, 3, 4, 5}
	zero, warm := 0.0, 0.5
	tests := []struct {
		name string
		q    router.Query
	}{
		{"hashes", router.Query{Namespace: "default", BlockHashes: hashes}},
		{"one worker", router.Query{Namespace: "default", BlockHashes: hashes, MaxWorkers: 1, Temperature: &zero}},
		{"priority and temperature", router.Query{Namespace: "default", BlockHashes: hashes, Temperature: &warm,
			Hints: router.Hints{Priority: block.MaxPriority, ExpectedOutputTokens: 64}}},
		{"pin", router.Query{Namespace: "default", BlockHashes: hashes, Hints: router.Hints{PinTTL: time.Minute}}},
		{"tokens", router.Query{Namespace: "t", TokenIDs: toks}},
		{"no blocks", router.Query{Namespace: "default"}},
		{"unknown namespace", router.Query{Namespace: "nowhere", BlockHashes: hashes}},
	}
	r, _ := dialRaw(t, srv.Addr, wire.Version)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r.send(routeFrame(uint64(100+i), tc.q))
			resp := r.recv()
			if resp.Code != errcode.OK || resp.ID != uint64(100+i) || resp.Route == nil {
				t.Fatalf("response %+v", resp)
			}
			want, err := rt.Route(t.Context(), tc.q)
			if err != nil {
				t.Fatal(err)
			}
			want.Namespace, want.Hashes = "", nil // not on the wire
			if !reflect.DeepEqual(*resp.Route, want) {
				t.Fatalf("native %+v\nrouter %+v", *resp.Route, want)
			}
		})
	}
	// A spot check of what the comparisons above saw.
	r.send(routeFrame(1, tests[0].q))
	got := r.recv().Route
	// warm's queue makes it dearer than cold, which fetches the tier's 2 blocks.
	if got.Recommended != "hot" || got.TierDepth != 2 || got.Blocks != 5 || len(got.Workers) != 3 ||
		got.Workers[0].Device != 4 || got.Workers[1].Worker != "cold" || got.Workers[1].Cost.FetchBlocks != 2 ||
		got.Workers[2].Worker != "warm" || got.Workers[2].Host != 2 || got.Workers[2].Load.DecodeBlocks != 30 {
		t.Fatalf("result %+v", got)
	}
	if p := srv.Tier.PinnedUntil(block.NewKey("default", 2)); p.IsZero() {
		t.Fatal("the pin hint pinned nothing")
	}

	// Commit adds the predicted load to the recommended worker.
	r.send(routeFrame(2, router.Query{Namespace: "default", BlockHashes: hashes, Commit: true}))
	if resp := r.recv(); resp.Code != errcode.OK || resp.Route.Recommended != "hot" {
		t.Fatalf("commit %+v", resp)
	}
	for _, w := range rt.Workers("default") {
		if w.Worker == "hot" && w.Load.DecodeBlocks == 0 {
			t.Fatalf("commit added no load to hot: %+v", w)
		}
	}
}

func TestRouteNativeErrors(t *testing.T) {
	rcfg := router.DefaultConfig()
	rcfg.MaxQueryBlocks = 4
	srv, _ := startRouter(t, rcfg)
	r, _ := dialRaw(t, srv.Addr, wire.Version)
	badCount := wire.AppendRouteQuery(nil, router.Query{Namespace: "default", BlockHashes: []uint64{1}})
	tests := []struct {
		name  string
		frame []byte
		want  errcode.Code
	}{
		{"header count", frame(wire.OpRoute, 1, 1, badCount), errcode.MalformedFrame},
		{"truncated body", frame(wire.OpRoute, 2, 0, badCount[:len(badCount)-1]), errcode.MalformedFrame},
		{"priority", routeFrame(3, router.Query{Namespace: "default", Hints: router.Hints{Priority: 9}}), errcode.InvalidArgument},
		{"bad namespace name", routeFrame(4, router.Query{Namespace: "Bad!"}), errcode.InvalidArgument},
		{"too many blocks", routeFrame(5, router.Query{Namespace: "default", BlockHashes: []uint64{1, 2, 3, 4, 5}}), errcode.TooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r.send(tc.frame)
			if resp := r.recv(); resp.Code != tc.want || resp.Route != nil || resp.Message == "" {
				t.Fatalf("response %+v, want code %v", resp, tc.want)
			}
			// The connection stays usable.
			r.send(frame(wire.OpPing, 9, 0, nil))
			if resp := r.recv(); resp.Code != errcode.OK || resp.ID != 9 {
				t.Fatalf("ping after: %+v", resp)
			}
		})
	}

	// A server without a router refuses ROUTE and keeps the connection.
	plain := startServer(t, smallConfig())
	p, _ := dialRaw(t, plain.Addr, wire.Version)
	p.send(routeFrame(7, router.Query{Namespace: "default", BlockHashes: []uint64{1}}))
	if resp := p.recv(); resp.Code != errcode.InvalidArgument || !strings.Contains(resp.Message, "no router") {
		t.Fatalf("no router: %+v", resp)
	}
	p.send(frame(wire.OpPing, 8, 0, nil))
	if resp := p.recv(); resp.Code != errcode.OK {
		t.Fatalf("ping after: %+v", resp)
	}
}

// TestRouteNativeAuthScope: ROUTE is scoped like every namespaced opcode:
// a namespace outside the key's scope answers PermissionDenied, the same
// whether or not it exists (and whether or not the router knows it).
func TestRouteNativeAuthScope(t *testing.T) {
	ring := &keyring{keys: credential.Static{keyA.AccessKeyID: keyA, keyAll.AccessKeyID: keyAll}}
	srv, rt := startRouter(t, router.DefaultConfig(), native.WithAuth(ring))
	for _, ns := range []string{"a", "b"} {
		if _, err := rt.Apply(ns, "w-"+ns, stored(router.Device, 1)); err != nil {
			t.Fatal(err)
		}
	}
	q := func(ns string) []byte {
		return routeFrame(20, router.Query{Namespace: ns, BlockHashes: []uint64{1}})
	}
	r := dialKey(t, srv.Addr, keyA)
	r.send(q("a"))
	if resp := r.recv(); resp.Code != errcode.OK || resp.Route.Recommended != "w-a" {
		t.Fatalf("own namespace: %+v", resp)
	}
	r.send(q("b"))
	inB := r.recv()
	r.send(q("z"))
	inZ := r.recv()
	if inB.Code != errcode.PermissionDenied || inB.Route != nil {
		t.Fatalf("other namespace: %+v", inB)
	}
	if inB.Code != inZ.Code || inB.ID != inZ.ID || strings.ReplaceAll(inZ.Message, `"z"`, `"b"`) != inB.Message {
		t.Fatalf("existing and missing namespaces answer differently:\n%+v\n%+v", inB, inZ)
	}
	all := dialKey(t, srv.Addr, keyAll)
	all.send(q("b"))
	if resp := all.recv(); resp.Code != errcode.OK || resp.Route.Recommended != "w-b" {
		t.Fatalf("* key in b: %+v", resp)
	}
}
