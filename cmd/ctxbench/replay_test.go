package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/internal/freeport"
	"github.com/ctxtier/ctxtier/internal/testdep"
	"github.com/ctxtier/ctxtier/sim/replay"
)

func TestParseReplayArgs(t *testing.T) {
	for _, args := range [][]string{
		{},                                    // no trace
		{"--trace", "x", "--policies", "lru"}, // unknown policy
		{"--trace", "x", "--bytes-scale", "0"},
		{"--trace", "x", "--key-salt", "pepper"},
		{"--trace", "x", "--max-requests", "-1"},
		{"--trace", "x", "extra"},
		{"--trace", "x", "--concurrency", "0"},
		{"--trace", "x", "--concurrency", "4", "--ordering", "none"},
	} {
		if _, err := parseReplayArgs(args, io.Discard); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	a, err := parseReplayArgs([]string{"--trace", "x", "--key-salt", "0x10", "--policies", "no-cache,shared-tier", "--put-overlap"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if a.cfg.KeySalt != 16 || len(a.cfg.Policies) != 2 || !a.cfg.PutOverlap || !a.cfg.Prefill.Attention {
		t.Fatalf("parsed %+v", a.cfg)
	}
	a, err = parseReplayArgs([]string{"--trace", "x", "--attention=false", "--model-layers", "0"}, io.Discard)
	if err != nil || a.cfg.Prefill.Attention {
		t.Fatalf("--attention=false: attention %v, err %v (model shape is unused without the term)", a.cfg.Prefill.Attention, err)
	}
	if _, err := parseReplayArgs([]string{"--trace", "x", "--model-layers", "0"}, io.Discard); err == nil {
		t.Fatal("zero model layers accepted with the attention term on")
	}
}

// ctxdBinary builds cmd/ctxd into a temporary directory, or names the binary
// in CTXD_BIN; a build failure fails the test.
func ctxdBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CTXD_BIN"); p != "" {
		return p
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "ctxd")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/ctxd")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cannot build ctxd: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(t *testing.T) string { return freeport.Addr(t) }

// startCtxdWith runs a ctxd process with extra flags and returns its
// native address and HTTP base URL.
func startCtxdWith(t *testing.T, bin string, extra ...string) (native, base string) {
	t.Helper()
	httpAddr, native := freeAddr(t), freeAddr(t)
	// Every listener on a free port: the defaults (7402-7404) may be taken
	// by another ctxd on the machine.
	args := append([]string{"--listen", native, "--http-listen", httpAddr,
		"--raft-listen", freeAddr(t), "--peer-listen", freeAddr(t), "--s3-admin-listen", "", "--resp-listen", "",
		"--data-dir", t.TempDir(), "--log-level", "warn"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start ctxd: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	base = "http://" + httpAddr
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return native, base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("ctxd at %s not ready after 15 s: %v", base, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestReplayAgainstCtxd(t *testing.T) {
	tracePath := filepath.Join("..", "..", "..", "shared", "traces", "conversation_trace.jsonl")
	testdep.Path(t, tracePath, "shared trace conversation_trace.jsonl", "the shared traces live in ../shared/traces beside the repository")
	native, base := startCtxdWith(t, ctxdBinary(t), "--dram-capacity", "256MiB")
	dir := t.TempDir()
	args := []string{"--trace", tracePath, "--tier-url", base, "--max-requests", "300",
		// Puts overlap with compute, as engines' KV connectors store
		// asynchronously: with every put also committed through Raft, a
		// put on the TTFT path costs about what a 300-request slice saves
		// (docs/replay.md has both figures).
		"--bytes-scale", "16384", "--progress=false", "--put-overlap",
		"--out-json", filepath.Join(dir, "r.json"), "--out-html", filepath.Join(dir, "r.html")}
	run := func(extra ...string) *replay.Report {
		t.Helper()
		a, err := parseReplayArgs(append(slices.Clone(args), extra...), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		// A generous bound: a 300-request slice takes about 25 s on a
		// quiet 2-core machine, and more than a minute beside other load.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out, err := doReplay(ctx, a, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		printReplayTable(&sb, out)
		t.Log("\n" + sb.String())
		return out.Report
	}
	// In-process routing with the replay's own cost model: the shared tier
	// must reach the bound. Its TTFT against no cache is logged, not
	// asserted: the replay times the real calls to ctxd, which a loaded
	// machine slows (it is a benchmark figure, docs/replay.md, reproduced by
	// scripts/replay.sh).
	rep := run()
	tier, nc := rep.Policy(replay.SharedTier), rep.Policy(replay.NoCache)
	if tier.BlockHitRatio < 0.95*rep.InfiniteBlockHitRatio {
		t.Errorf("shared tier hit ratio %.4f below 95%% of the bound %.4f", tier.BlockHitRatio, rep.InfiniteBlockHitRatio)
	}
	if tier.TierHitBlocks == 0 || tier.FetchWireBytes == 0 || tier.PutWireBytes == 0 {
		t.Errorf("no real traffic: %+v", tier)
	}
	t.Logf("mean TTFT: shared tier %.3f s, no cache %.3f s (ratio %.3f)", tier.TTFT.Mean, nc.TTFT.Mean, tier.TTFT.Mean/nc.TTFT.Mean)
	// Through ctxd's own router (its cost settings, not the replay's): the
	// tier still serves the whole reusable prefix. A fresh key salt keeps the
	// first run's blocks out of the way.
	rrep := run("--router-url", base+"/v1/route", "--key-salt", "7")
	if rt := rrep.Policy(replay.SharedTier); rt.BlockHitRatio < 0.95*rrep.InfiniteBlockHitRatio || rt.TierHitBlocks == 0 {
		t.Errorf("through ctxd's router: shared tier hit ratio %.4f (bound %.4f), %d tier hits", rt.BlockHitRatio, rrep.InfiniteBlockHitRatio, rt.TierHitBlocks)
	}
	b, err := os.ReadFile(filepath.Join(dir, "r.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back replayOutput
	if err := json.Unmarshal(b, &back); err != nil || len(back.Report.Policies) != 4 || len(back.Report.Policies[3].Records) != 300 {
		t.Fatalf("JSON result unreadable or incomplete: %v", err)
	}
	h, err := os.ReadFile(filepath.Join(dir, "r.html"))
	if err != nil || strings.Count(string(h), "<svg") != 2 || !strings.Contains(string(h), "polyline") {
		t.Fatalf("HTML report lacks its plots: %v", err)
	}
	// Concurrent calls: each worker over its own client, puts in flight
	// together. ctxd does not evict here, so the ordering rule makes the
	// run deterministic under either ordering: two runs under fresh salts
	// (far from the others: XOR with small trace ids must not give one run
	// another's keys), one over HTTP waiting for every put in flight, one
	// over the native protocol waiting only for its blocks' puts, route,
	// hit and schedule every request alike; only the measured calls differ.
	c1 := run("--concurrency", "4", "--key-salt", "0x1100000000", "--policies", "shared-tier")
	c2 := run("--concurrency", "4", "--key-salt", "0x1200000000", "--policies", "shared-tier",
		"--tier-native", native, "--ordering", "blocks")
	t1, t2 := c1.Policy(replay.SharedTier), c2.Policy(replay.SharedTier)
	if t1.BlockHitRatio < 0.95*c1.InfiniteBlockHitRatio || t1.PutLatency.P50 <= 0 || t1.LookupLatency.P50 <= 0 {
		t.Errorf("concurrent: hit ratio %.4f (bound %.4f), put latency %+v, lookup latency %+v",
			t1.BlockHitRatio, c1.InfiniteBlockHitRatio, t1.PutLatency, t1.LookupLatency)
	}
	if len(t1.Records) != 300 || len(t2.Records) != 300 {
		t.Fatalf("concurrent runs kept %d and %d records", len(t1.Records), len(t2.Records))
	}
	for i := range t1.Records {
		if a, b := unmeasured(t1.Records[i]), unmeasured(t2.Records[i]); a != b {
			t.Fatalf("concurrent runs differ at request %d:\n%+v\n%+v", i, a, b)
		}
	}
	t.Logf("sequential %.4f, concurrent %.4f and %.4f; put p50/p99 sequential %.2f/%.2f ms, concurrent %.2f/%.2f ms",
		tier.BlockHitRatio, t1.BlockHitRatio, t2.BlockHitRatio, 1e3*tier.PutLatency.P50, 1e3*tier.PutLatency.P99,
		1e3*t1.PutLatency.P50, 1e3*t1.PutLatency.P99)
}

// unmeasured is r without its measured times and what includes them.
func unmeasured(r replay.Record) replay.Record {
	r.Route, r.Lookup, r.Fetch, r.Put, r.TTFT, r.E2E = 0, 0, 0, 0, 0, 0
	return r
}
