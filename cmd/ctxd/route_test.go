package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/router"
	"github.com/ctxtier/ctxtier/gateway/client"
	"github.com/ctxtier/ctxtier/internal/clustersecret"
)

// TestCtxdRouteNative: ctxd answers routing queries on its native listener
// (ROUTE) exactly as on HTTP, and not on its peer listener.
func TestCtxdRouteNative(t *testing.T) {
	peerAddr := freeAddr(t)
	p := startCtxd(t, "--dram-capacity", "64MiB", "--peer-listen", peerAddr)
	ctx := withTimeout(t, 30*time.Second)
	c, err := client.Dial(ctx, p.Native, client.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Put(ctx, block.NewKey("default", 11), []byte("kv block 11")); err != nil {
		t.Fatal(err)
	}
	post := func(path, body string) []byte {
		t.Helper()
		resp, err := http.Post("http://"+p.HTTP+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
		return b
	}
	post("/v1/route/events", `{"namespace":"default","worker":"vllm-0","events":[
		{"type":"BlockStored","block_hashes":[11,12,13],"parent_block_hash":null,"medium":"GPU"}]}`)
	post("/v1/route/events", `{"namespace":"default","worker":"vllm-1","events":[
		{"type":"BlockStored","block_hashes":[11],"parent_block_hash":null,"medium":"CPU"}]}`)

	got, err := c.Route(ctx, router.Query{BlockHashes: []uint64{11, 12, 13, 14}})
	if err != nil {
		t.Fatal(err)
	}
	var viaHTTP router.Result
	if err := json.Unmarshal(post("/v1/route/query", `{"namespace":"default","block_hashes":[11,12,13,14]}`), &viaHTTP); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, viaHTTP) {
		t.Fatalf("native %+v\nhttp   %+v", got, viaHTTP)
	}
	if got.Recommended != "vllm-0" || got.TierDepth != 1 || len(got.Workers) != 2 || got.Workers[0].Device != 3 || got.Workers[1].Host != 1 {
		t.Fatalf("result %+v", got)
	}

	// The peer listener takes only the node identity (the cluster secret
	// this single node created in its data directory).
	secret, err := clustersecret.Load(filepath.Join(p.DataDir, clustersecret.FileName))
	if err != nil {
		t.Fatal(err)
	}
	popts := client.DefaultOptions()
	popts.AccessKeyID, popts.Secret = clustersecret.NodeAccessKeyID, secret
	peer, err := client.Dial(ctx, peerAddr, popts)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	if _, err := peer.Route(ctx, router.Query{BlockHashes: []uint64{11}}); !errors.Is(err, block.ErrInvalidArgument) {
		t.Fatalf("peer listener answered ROUTE: %v", err)
	}
}
