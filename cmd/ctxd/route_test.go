package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/prefill"
	"github.com/ctxtier/ctxtier/ctxstore/router"
	"github.com/ctxtier/ctxtier/gateway/client"
	"github.com/ctxtier/ctxtier/internal/clustersecret"
)

// postOK posts a JSON body to ctxd's HTTP API at addr and returns the
// response body, failing the test unless the status is 200.
func postOK(t *testing.T, addr, path, body string) []byte {
	t.Helper()
	resp, err := http.Post("http://"+addr+path, "application/json", strings.NewReader(body))
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
	post := func(path, body string) []byte { t.Helper(); return postOK(t, p.HTTP, path, body) }
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

// TestCtxdRouteRetain: a ROUTE query's read hint re-arms the prefix the
// tier holds. ctxd runs with a 16 MiB DRAM tier and no NVMe tier; 4
// unhinted 1 MiB "prefix" blocks are put interleaved with 4 unhinted peers
// of the same age, then two route queries carry a 10-minute retain window
// over the prefix (one over the native protocol, one over HTTP's
// hints.retain) and must report it held; then 20 MiB of unhinted blocks
// follow. Under the default policy (window, which honours hints) the
// prefix must survive and the peers be gone; under window-nohints (the
// control) the prefix is gone like its peers.
func TestCtxdRouteRetain(t *testing.T) {
	const bs = 1 << 20
	const prefix, fill = 4, 20
	payload := func(i int) []byte { return bytes.Repeat([]byte{byte(i*37 + 1)}, bs) }
	hash := func(i int) uint64 { return uint64(7000 + i) }
	for _, tc := range hintPolicies {
		t.Run(tc.policy, func(t *testing.T) {
			p := startCtxd(t, append([]string{"--dram-capacity", "16MiB", "--nvme-dir", "off"}, tc.args...)...)
			ctx := withTimeout(t, 3*time.Minute)
			c := dialSessions(ctx, t, p.Native)
			put := func(i int) {
				t.Helper()
				if err := c.Put(ctx, block.NewKey("default", hash(i)), payload(i)); err != nil {
					t.Fatalf("put %d: %v", i, err)
				}
			}
			for i := range prefix {
				put(i)          // prefix block
				put(prefix + i) // its peer
			}
			res, err := c.Route(ctx, router.Query{BlockHashes: []uint64{hash(0), hash(1)}, Hints: router.Hints{Retain: 10 * time.Minute}})
			if err != nil || res.TierDepth != 2 {
				t.Fatalf("native route with a read hint: %+v, %v", res, err)
			}
			body := fmt.Sprintf(`{"namespace":"default","block_hashes":[%d,%d],"hints":{"retain":"10m"}}`, hash(2), hash(3))
			resp, err := http.Post("http://"+p.HTTP+"/v1/route/query", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			var viaHTTP router.Result
			err = json.NewDecoder(resp.Body).Decode(&viaHTTP)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || viaHTTP.TierDepth != 2 {
				t.Fatalf("HTTP route with hints.retain: %d %+v %v", resp.StatusCode, viaHTTP, err)
			}
			for i := range fill {
				put(2*prefix + i)
			}
			resident := make([]bool, 2*prefix+fill)
			for i := range resident {
				got, err := c.Get(ctx, block.NewKey("default", hash(i)))
				switch {
				case err == nil:
					if !bytes.Equal(got, payload(i)) {
						t.Fatalf("block %d: wrong bytes", i)
					}
					resident[i] = true
				case !errors.Is(err, block.ErrNotFound):
					t.Fatalf("get %d: %v", i, err)
				}
			}
			t.Logf("%s: resident %v", tc.policy, resident)
			for i := range prefix {
				if resident[i] != tc.hinted {
					t.Errorf("prefix block %d resident %v, want %v", i, resident[i], tc.hinted)
				}
				if resident[prefix+i] {
					t.Errorf("peer %d of a prefix block is resident", i)
				}
			}
			if !resident[len(resident)-1] {
				t.Error("the newest block is gone")
			}
		})
	}
}

// TestCtxdRouteModel: --route-model sets the prefill model the router
// prices recompute with. A worker holds the first of four blocks on its
// device; the other three are recomputed after it, which costs, by hand:
// linear at 1000 tokens/s, 3 x BT / 1000 s; with the default model
// (Llama-3.1-8B, attention on) prefill.DefaultConfig's ComputeSeconds(BT,
// 3 BT), where BT is the namespace's block size.
func TestCtxdRouteModel(t *testing.T) {
	for _, tc := range []struct {
		name  string
		model string
		want  func(bt int) float64
	}{
		{"default attention model", "", func(bt int) float64 { return prefill.DefaultConfig().ComputeSeconds(bt, 3*bt) }},
		{"linear", "attention=false,tokens_per_sec=1000", func(bt int) float64 { return 3 * float64(bt) / 1000 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startCtxd(t, "--dram-capacity", "64MiB", "--route-model", tc.model)
			post := func(path, body string) []byte { t.Helper(); return postOK(t, p.HTTP, path, body) }
			post("/v1/route/events", `{"namespace":"default","worker":"vllm-0","events":[
				{"type":"BlockStored","block_hashes":[11],"parent_block_hash":null,"medium":"GPU"}]}`)
			var res router.Result
			if err := json.Unmarshal(post("/v1/route/query", `{"namespace":"default","block_hashes":[11,12,13,14]}`), &res); err != nil {
				t.Fatal(err)
			}
			if len(res.Workers) != 1 || res.Workers[0].Device != 1 || res.BlockTokens < 1 {
				t.Fatalf("result %+v", res)
			}
			c := res.Workers[0].Cost
			want := tc.want(res.BlockTokens)
			if c.RecomputeBlocks != 3 || math.Abs(c.RecomputeSec-want) > 1e-9*want {
				t.Fatalf("cost %+v, want 3 blocks recomputed in %.12g s (%d-token blocks)", c, want, res.BlockTokens)
			}
		})
	}
}
