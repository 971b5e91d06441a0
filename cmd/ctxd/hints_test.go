package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/client"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
)

// TestCtxdAgentHints starts real ctxd processes with a 16 MiB DRAM tier and
// no NVMe tier (an eviction drops the block) and puts 1 MiB blocks, none
// read before the end, in this order: 4 blocks hinted reuse=session with a
// 10-minute retain window (2 over the native protocol, 2 over HTTP with
// X-Ctxtier-Reuse/X-Ctxtier-Retain) interleaved with 4 comparable unhinted
// peers of the same age; 8 unhinted blocks (the DRAM tier is then full); 4
// blocks hinted reuse=never (reasoning tokens); a tail of 6 unhinted
// blocks. That is 10 MiB or so more than fits. Under the default policy
// (window, which honours hints) the session blocks must all survive while
// their peers are all gone, and the reuse=never blocks must all be gone
// although they are newer than the 8 unhinted blocks before them: they go
// first. Under window-nohints (the control) the same puts evict the oldest
// blocks: session blocks and peers alike, while the reuse=never blocks
// stay. Every block read back must have the bytes put.
func TestCtxdAgentHints(t *testing.T) {
	const bs = 1 << 20
	const pairs, fill, never, tail = 4, 8, 4, 6
	payload := func(i int) []byte {
		b := make([]byte, bs)
		for j := range b {
			b[j] = byte(i*151 + j*11 + j>>13)
		}
		return b
	}
	key := func(i int) block.Key { return block.NewKey("default", uint64(5000+i)) }
	// Indexes: session blocks 0..3, their unhinted peers 4..7, fill 8..15,
	// never 16..19, tail 20..25.
	session := func(i int) int { return i }
	peer := func(i int) int { return pairs + i }
	fillIdx := func(i int) int { return 2*pairs + i }
	neverIdx := func(i int) int { return 2*pairs + fill + i }
	tailIdx := func(i int) int { return 2*pairs + fill + never + i }
	total := tailIdx(tail)
	for _, tc := range []struct {
		policy string
		args   []string
		hinted bool // the hints order evictions
	}{
		{"window", nil, true},
		{"window-nohints", []string{"--dram-policy", "window-nohints"}, false},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			p := startCtxd(t, append([]string{"--dram-capacity", "16MiB", "--nvme-dir", "off"}, tc.args...)...)
			if got := readyRecord(t, p)["dram_policy"]; got != tc.policy {
				t.Fatalf("ready log dram_policy = %v, want %s", got, tc.policy)
			}
			ctx := withTimeout(t, 3*time.Minute)
			c, err := client.Dial(ctx, p.Native, client.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if !c.HintsAccepted() {
				t.Fatal("ctxd did not accept put hints")
			}
			put := func(i int, opts block.PutOptions) {
				t.Helper()
				if err := c.PutWithOptions(ctx, key(i), payload(i), opts); err != nil {
					t.Fatalf("put %d: %v", i, err)
				}
			}
			retain := block.PutOptions{Reuse: block.ReuseSession, Retain: 10 * time.Minute}
			for i := range pairs {
				if i%2 == 0 {
					put(session(i), retain)
				} else {
					httpPutHinted(ctx, t, p.HTTP, key(session(i)), payload(session(i)), "session", "600")
				}
				put(peer(i), block.PutOptions{})
			}
			for i := range fill {
				put(fillIdx(i), block.PutOptions{})
			}
			for i := range never {
				put(neverIdx(i), block.PutOptions{Reuse: block.ReuseNever})
			}
			for i := range tail {
				put(tailIdx(i), block.PutOptions{})
			}
			if ev := metricValue(t, p.HTTP, `ctxtier_tier_evictions_total{tier="dram"}`); ev < float64(total-16) {
				t.Fatalf("%v dram evictions after %d MiB of puts into 16 MiB", ev, total)
			}
			resident := make([]bool, total)
			n := 0
			for i := range resident {
				got, err := c.Get(ctx, key(i))
				switch {
				case err == nil:
					if !bytes.Equal(got, payload(i)) {
						t.Fatalf("block %d: wrong bytes", i)
					}
					resident[i] = true
					n++
				case !errors.Is(err, block.ErrNotFound):
					t.Fatalf("get %d: %v", i, err)
				}
			}
			t.Logf("%s: %d of %d blocks resident: %v", tc.policy, n, total, resident)
			for i := range pairs {
				if resident[session(i)] != tc.hinted {
					t.Errorf("session block %d resident %v, want %v", i, resident[session(i)], tc.hinted)
				}
				if resident[peer(i)] {
					t.Errorf("unhinted peer %d of a session block is resident", i)
				}
			}
			for i := range never {
				if resident[neverIdx(i)] == tc.hinted {
					t.Errorf("reuse=never block %d resident %v, want %v", i, resident[neverIdx(i)], !tc.hinted)
				}
			}
			if !resident[tailIdx(tail-1)] {
				t.Error("the newest block is gone")
			}
		})
	}
}

// TestCtxdAgentHintsRejected: invalid hints are InvalidArgument over both
// protocols, and store nothing.
func TestCtxdAgentHintsRejected(t *testing.T) {
	p := startCtxd(t, "--dram-capacity", "16MiB", "--nvme-dir", "off")
	ctx := withTimeout(t, time.Minute)
	k := block.NewKey("default", 77)
	for _, hdr := range []map[string]string{
		{httpwire.HeaderReuse: "always"},
		{httpwire.HeaderRetain: "soon"},
		{httpwire.HeaderReuse: "never", httpwire.HeaderRetain: "30"},
	} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, "http://"+p.HTTP+"/v1/namespaces/default/blocks/"+block.FormatHash(k.Hash), bytes.NewReader([]byte("x")))
		for h, v := range hdr {
			req.Header.Set(h, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get(httpwire.HeaderErrorCode) != "InvalidArgument" {
			t.Fatalf("%v: %d %s", hdr, resp.StatusCode, resp.Header.Get(httpwire.HeaderErrorCode))
		}
	}
	hcfg := client.HTTPDefaultConfig()
	hcfg.BaseURL = "http://" + p.HTTP
	hc, err := client.NewHTTP(hcfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := hc.Put(ctx, k, []byte("x"), block.PutOptions{Reuse: block.ReuseNever, Retain: time.Second}); !errors.Is(err, block.ErrInvalidArgument) {
		t.Fatalf("HTTP client put with contradictory hints: %v", err)
	}
	c, err := client.Dial(ctx, p.Native, client.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.PutWithOptions(ctx, k, []byte("x"), block.PutOptions{Reuse: 9}); !errors.Is(err, block.ErrInvalidArgument) {
		t.Fatalf("native put with an undefined reuse: %v", err)
	}
	if ok, err := c.Exists(ctx, k); err != nil || ok {
		t.Fatalf("a rejected put stored the block: %v %v", ok, err)
	}
}

// httpPutHinted puts a block over ctxd's HTTP API with the hint headers.
func httpPutHinted(ctx context.Context, t *testing.T, addr string, k block.Key, data []byte, reuse, retain string) {
	t.Helper()
	url := fmt.Sprintf("http://%s/v1/namespaces/%s/blocks/%s", addr, k.Namespace, block.FormatHash(k.Hash))
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(httpwire.HeaderReuse, reuse)
	req.Header.Set(httpwire.HeaderRetain, retain)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("HTTP put %s: %d", k, resp.StatusCode)
	}
}
