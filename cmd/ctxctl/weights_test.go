package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/internal/weights"
)

func TestWeightsFlags(t *testing.T) {
	cfg, name, prog, rest, err := weightsFlags("push", strings.Fields("ckpt/ --name llama/7b --s3 10.0.0.1:7403,10.0.0.2:7403 --chunk-mib 32 --parallel 8 --progress=false"), io.Discard)
	if err != nil || name != "llama/7b" || prog || len(rest) != 1 || rest[0] != "ckpt/" || len(cfg.Endpoints) != 2 || cfg.Endpoints[1] != "10.0.0.2:7403" || cfg.ChunkSize != 32<<20 || cfg.Parallel != 8 || cfg.Namespace != "weights" {
		t.Fatalf("push flags: %+v %q %v %v %v", cfg, name, prog, rest, err)
	}
	cfg, _, prog, rest, err = weightsFlags("pull", strings.Fields("llama/7b /models/llama --namespace ckpts"), io.Discard)
	if err != nil || !prog || len(rest) != 2 || rest[1] != "/models/llama" || cfg.Namespace != "ckpts" || !cfg.Route {
		t.Fatalf("pull flags: %+v %v %v", cfg, rest, err)
	}
	if cfg, _, _, _, err = weightsFlags("pull", strings.Fields("llama/7b /models/llama --route=false"), io.Discard); err != nil || cfg.Route {
		t.Fatalf("pull --route=false: %+v %v", cfg, err)
	}
	if cfg, _, _, _, err = weightsFlags("pull", strings.Fields("m d --s3 a:1,b:1,c:1 --direct 127.0.0.1:7401,,"), io.Discard); err != nil || fmt.Sprintf("%q", cfg.Direct) != `["127.0.0.1:7401" "" ""]` {
		t.Fatalf("pull --direct: %q %v", cfg.Direct, err)
	}
	for args, want := range map[string]string{"m d": weights.VerifyXXH3, "m d --verify sha256": weights.VerifySHA256, "m d --verify xxh3": weights.VerifyXXH3} {
		if cfg, _, _, _, err = weightsFlags("pull", strings.Fields(args), io.Discard); err != nil || cfg.Verify != want {
			t.Errorf("pull %q: verify %q %v, want %q", args, cfg.Verify, err, want)
		}
	}
	bad := []struct{ action, args string }{
		{"push", "dir"},                       // no --name
		{"push", "--name m"},                  // no DIR
		{"pull", "model"},                     // no DIR
		{"pull", "a b c"},                     // extra
		{"pull", "m d --chunk-mib 1"},         // chunk below 5 MiB
		{"pull", "m d --parallel 0"},          // no workers
		{"pull", "m d --namespace="},          // empty namespace
		{"pull", "m d --s3 ,"},                // no endpoint
		{"pull", "m d --verify md5"},          // unknown digest
		{"pull", "m d --direct a:1,b:1"},      // two direct addresses, one endpoint
		{"push", "d --name m --frobnicate 1"}, // unknown flag
	}
	for _, b := range bad {
		if _, _, _, _, err := weightsFlags(b.action, strings.Fields(b.args), io.Discard); err == nil {
			t.Errorf("%s %q accepted", b.action, b.args)
		}
	}
	if err := runWeights(context.Background(), []string{"fetch"}, io.Discard, io.Discard); err == nil {
		t.Error("unknown action accepted")
	}
}

func TestProgressLine(t *testing.T) {
	tests := []struct {
		done, total int64
		elapsed     time.Duration
		want        []string
	}{
		{512 << 20, 1 << 30, 2 * time.Second, []string{"pull", "512.0/1024.0 MiB", "50.0%", "256.0 MiB/s"}},
		{0, 0, 0, []string{"100.0%", "0.0 MiB/s"}},
		{3 << 20, 2 << 20, time.Second, []string{"100.0%"}}, // retried bytes never show over 100%
	}
	for _, tc := range tests {
		got := progressLine("pull", tc.done, tc.total, tc.elapsed)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("progressLine(%d, %d, %v) = %q, lacks %q", tc.done, tc.total, tc.elapsed, got, w)
			}
		}
	}
}
