package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/client"
	"github.com/ctxtier/ctxtier/sim/replay"
	"github.com/ctxtier/ctxtier/sim/trace"
)

func init() {
	register("replay", "replay a trace through simulated prefill/decode workers against ctxd, comparing cache policies", runReplay)
}

type replayArgs struct {
	cfg         replay.Config
	trace       string
	tierURL     string
	tierNative  string
	routerURL   string
	salt        string
	policies    string
	maxRequests int
	duration    time.Duration
	outJSON     string
	outHTML     string
	progress    bool
}

func parseReplayArgs(args []string, stderr io.Writer) (replayArgs, error) {
	a := replayArgs{cfg: replay.DefaultConfig()}
	c := &a.cfg
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&a.trace, "trace", "", "Mooncake-format trace (JSON lines); required")
	fs.StringVar(&a.tierURL, "tier-url", "http://127.0.0.1:7401", "ctxd's HTTP API, for the shared-tier policy")
	fs.StringVar(&a.tierNative, "tier-native", "", "ctxd's native protocol address (e.g. 127.0.0.1:7400): lookups, gets and puts go over it instead of the HTTP API (--tier-url still checks readiness and the namespace)")
	fs.StringVar(&a.routerURL, "router-url", "", "ctxd's routing API (e.g. http://127.0.0.1:7401/v1/route) for the shared-tier policy; empty: an in-process router")
	fs.StringVar(&c.Namespace, "namespace", c.Namespace, "namespace of the blocks (its block size must be --block-tokens)")
	fs.StringVar(&a.salt, "key-salt", "random", "separates this run's block hashes from other runs' (spread by SplitMix64, XORed into trace hash ids; 0 keeps the ids): a number, or random (fresh keys per run)")
	fs.StringVar(&a.policies, "policies", "all", "comma-separated policies: "+policyNames()+", or all")
	fs.IntVar(&c.BlockTokens, "block-tokens", c.BlockTokens, "tokens per block (the trace's)")
	fs.Int64Var(&c.KVBytesPerToken, "kv-bytes-per-token", c.KVBytesPerToken, "model KV bytes per token, all layers (Llama-3-8B bf16: 131072)")
	fs.Int64Var(&c.BytesScale, "bytes-scale", c.BytesScale, "send each block at 1/N of its size; the cost model accounts the rest at --tier-bandwidth")
	fs.IntVar(&c.PrefillWorkers, "prefill-workers", c.PrefillWorkers, "simulated prefill workers")
	fs.IntVar(&c.DecodeWorkers, "decode-workers", c.DecodeWorkers, "simulated decode workers")
	fs.Float64Var(&c.Prefill.TokensPerSec, "prefill-tokens-per-sec", c.Prefill.TokensPerSec, "prefill throughput of one worker (with --attention: on an --attention-ref-tokens prompt)")
	fs.BoolVar(&c.Prefill.Attention, "attention", c.Prefill.Attention, "add the attention term to the prefill cost (false: linear in computed tokens, for comparison)")
	fs.IntVar(&c.Prefill.Layers, "model-layers", c.Prefill.Layers, "model layers, for the attention term")
	fs.IntVar(&c.Prefill.Dim, "model-dim", c.Prefill.Dim, "model attention width (query heads x head dim), for the attention term")
	fs.Float64Var(&c.Prefill.Params, "model-params", c.Prefill.Params, "model non-embedding parameters, for the linear part of the attention model")
	fs.IntVar(&c.Prefill.RefTokens, "attention-ref-tokens", c.Prefill.RefTokens, "prompt length at which the attention model runs at --prefill-tokens-per-sec")
	fs.Float64Var(&c.Prefill.PassSeconds, "prefill-pass-seconds", c.Prefill.PassSeconds, "fixed cost of one prefill forward pass")
	fs.IntVar(&c.HBMBlocks, "hbm-blocks", c.HBMBlocks, "HBM prefix-cache capacity of one prefill worker, in blocks")
	fs.Float64Var(&c.TierBytesPerSec, "tier-bandwidth", c.TierBytesPerSec, "worker-to-ctxtier bytes/s for the bytes a scaled run does not send")
	fs.BoolVar(&c.PutOverlap, "put-overlap", c.PutOverlap, "overlap the modelled put transfer with the prefill compute (layer-wise offload)")
	fs.Float64Var(&c.HandoffBytesPerSec, "handoff-bandwidth", c.HandoffBytesPerSec, "prefill-to-decode KV transfer bytes/s")
	fs.Float64Var(&c.DecodeSecondsPerToken, "decode-seconds-per-token", c.DecodeSecondsPerToken, "decode time per output token")
	fs.IntVar(&c.DecodeKVTokens, "decode-kv-tokens", c.DecodeKVTokens, "KV tokens one decode worker holds")
	fs.Float64Var(&c.Speed, "speed", c.Speed, "pace: 1 real time, N times faster, 0 as fast as possible")
	fs.Float64Var(&c.Temperature, "temperature", c.Temperature, "router sampling temperature (0: cheapest worker)")
	fs.IntVar(&c.MaxBatch, "max-batch", c.MaxBatch, "keys per batch get/put")
	fs.StringVar((*string)(&c.Ordering), "ordering", string(c.Ordering), "with --concurrency above 1, what a lookup or fetch waits for: all (every put in flight, so puts' evictions come first) or blocks (only puts of its own blocks)")
	fs.IntVar(&c.Concurrency, "concurrency", c.Concurrency, "1: real calls one at a time, their measured time in the schedule; N > 1: each prefill worker calls ctxd over its own client (N of them), puts concurrently (docs/replay.md)")
	fs.BoolVar(&c.KeepRecords, "records", c.KeepRecords, "write every request's record into the JSON result")
	fs.IntVar(&a.maxRequests, "max-requests", 0, "replay at most N requests (0: all)")
	fs.DurationVar(&a.duration, "duration", 0, "replay only the first D of the trace's time (0: all)")
	fs.StringVar(&a.outJSON, "out-json", "replay.json", "JSON result file")
	fs.StringVar(&a.outHTML, "out-html", "replay.html", "HTML report with plots (empty: none)")
	fs.BoolVar(&a.progress, "progress", true, "show a progress bar on stderr")
	if err := fs.Parse(args); err != nil {
		return a, err
	}
	if fs.NArg() > 0 {
		return a, fmt.Errorf("%w: unexpected arguments %v", block.ErrInvalidArgument, fs.Args())
	}
	if a.trace == "" {
		return a, fmt.Errorf("%w: --trace is required", block.ErrInvalidArgument)
	}
	if a.maxRequests < 0 || a.duration < 0 {
		return a, fmt.Errorf("%w: --max-requests and --duration must not be negative", block.ErrInvalidArgument)
	}
	ps, err := replay.ParsePolicies(a.policies)
	if err != nil {
		return a, err
	}
	c.Policies = ps
	if a.salt == "random" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		c.KeySalt = binary.LittleEndian.Uint64(b[:])
	} else if c.KeySalt, err = strconv.ParseUint(a.salt, 0, 64); err != nil {
		return a, fmt.Errorf("%w: --key-salt %q: want a number or random", block.ErrInvalidArgument, a.salt)
	}
	return a, c.Validate()
}

func policyNames() string {
	var s []string
	for _, p := range replay.AllPolicies {
		s = append(s, string(p))
	}
	return strings.Join(s, ", ")
}

// replayOutput is the JSON result file.
type replayOutput struct {
	Trace      string         `json:"trace"`
	Command    string         `json:"command"`
	Started    time.Time      `json:"started"`
	WallSec    float64        `json:"wall_seconds"`
	TierURL    string         `json:"tier_url,omitempty"`
	TierNative string         `json:"tier_native,omitempty"`
	RouterURL  string         `json:"router_url,omitempty"`
	Report     *replay.Report `json:"report"`
}

func runReplay(ctx context.Context, args []string) error {
	a, err := parseReplayArgs(args, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	out, err := doReplay(ctx, a, os.Stderr)
	if err != nil {
		return err
	}
	printReplayTable(os.Stdout, out)
	return nil
}

// doReplay runs the replay and writes the result files.
func doReplay(ctx context.Context, a replayArgs, stderr io.Writer) (*replayOutput, error) {
	reqs, err := trace.ReadFile(a.trace)
	if err != nil {
		return nil, err
	}
	reqs = replay.Slice(reqs, a.maxRequests, a.duration)
	if len(reqs) == 0 {
		return nil, fmt.Errorf("%w: no request to replay in %s", block.ErrInvalidArgument, a.trace)
	}
	var deps replay.Deps
	usesTier := false
	for _, p := range a.cfg.Policies {
		usesTier = usesTier || p == replay.SharedTier
	}
	if usesTier {
		hc := client.HTTPDefaultConfig()
		hc.BaseURL = a.tierURL
		hcl, err := client.NewHTTP(hc)
		if err != nil {
			return nil, err
		}
		defer hcl.Close()
		if err := checkTier(ctx, hcl, a.cfg); err != nil {
			return nil, err
		}
		lanes := 0
		if a.cfg.Concurrency > 1 {
			lanes = min(a.cfg.Concurrency, a.cfg.PrefillWorkers)
		}
		front, own, closeAll, err := tierClients(ctx, hc, a.tierNative, lanes)
		if err != nil {
			return nil, err
		}
		defer closeAll()
		deps.Tier, deps.WorkerTiers = front, own
		if a.routerURL != "" {
			deps.TierRouter = newHTTPRouter(a.routerURL, a.cfg.Namespace)
		}
	}
	bar := newProgressBar(stderr, a.progress)
	deps.Progress = bar.update
	started := time.Now()
	rep, err := replay.Run(ctx, a.cfg, deps, reqs)
	bar.finish()
	if err != nil {
		return nil, err
	}
	out := &replayOutput{Trace: a.trace, Command: "ctxbench replay " + strings.Join(os.Args[min(2, len(os.Args)):], " "),
		Started: started.UTC(), WallSec: time.Since(started).Seconds(), Report: rep}
	if usesTier {
		out.TierURL, out.TierNative, out.RouterURL = a.tierURL, a.tierNative, a.routerURL
	}
	if a.outJSON != "" {
		b, err := json.MarshalIndent(out, "", " ")
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(a.outJSON, b, 0o644); err != nil {
			return nil, err
		}
	}
	if a.outHTML != "" {
		if err := os.WriteFile(a.outHTML, []byte(replayHTML(out)), 0o644); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// checkTier verifies that ctxd answers and that the namespace fits the run.
func checkTier(ctx context.Context, c *client.HTTPClient, cfg replay.Config) error {
	if err := c.Ready(ctx); err != nil {
		return fmt.Errorf("ctxd not ready: %w", err)
	}
	ns, err := c.Namespace(ctx, cfg.Namespace)
	if err != nil {
		return fmt.Errorf("namespace %q: %w", cfg.Namespace, err)
	}
	if ns.BlockTokens != cfg.BlockTokens {
		return fmt.Errorf("%w: namespace %q has %d-token blocks, the replay %d", block.ErrInvalidArgument, ns.Name, ns.BlockTokens, cfg.BlockTokens)
	}
	if wire := (int64(cfg.BlockTokens)*cfg.KVBytesPerToken + cfg.BytesScale - 1) / cfg.BytesScale; ns.MaxBlockSize > 0 && wire > ns.MaxBlockSize {
		return fmt.Errorf("%w: blocks of %d bytes on the wire exceed namespace %q's max of %d: raise --bytes-scale", block.ErrInvalidArgument, wire, ns.Name, ns.MaxBlockSize)
	}
	return nil
}

// progressBar draws done/total on a terminal line, or a line per 10% elsewhere.
type progressBar struct {
	w        io.Writer
	on, tty  bool
	start    time.Time
	last     time.Time
	lastTen  int
	done, of int
}

func newProgressBar(w io.Writer, on bool) *progressBar {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil {
			tty = st.Mode()&os.ModeCharDevice != 0
		}
	}
	return &progressBar{w: w, on: on, tty: tty, start: time.Now()}
}

func (p *progressBar) update(done, total int) {
	p.done, p.of = done, total
	if !p.on || total == 0 {
		return
	}
	if p.tty {
		if now := time.Now(); now.Sub(p.last) >= 100*time.Millisecond || done == total {
			p.last = now
			p.draw()
		}
		return
	}
	if ten := done * 10 / total; ten > p.lastTen {
		p.lastTen = ten
		p.draw()
		fmt.Fprintln(p.w)
	}
}

func (p *progressBar) draw() {
	const width = 40
	frac := float64(p.done) / float64(p.of)
	n := int(frac * width)
	el := time.Since(p.start)
	eta := "?"
	if p.done > 0 {
		eta = (time.Duration(float64(el)/frac) - el).Round(time.Second).String()
	}
	fmt.Fprintf(p.w, "\r[%s%s] %5.1f%% %d/%d request-policies, %s elapsed, eta %s ",
		strings.Repeat("#", n), strings.Repeat(".", width-n), 100*frac, p.done, p.of, el.Round(time.Second), eta)
}

func (p *progressBar) finish() {
	if p.on && p.tty && p.of > 0 {
		fmt.Fprintln(p.w)
	}
}

// printReplayTable prints the comparison table.
func printReplayTable(w io.Writer, out *replayOutput) {
	rep := out.Report
	c := rep.Config
	fmt.Fprintf(w, "trace %s: %d requests over %.0f s; %d prefill + %d decode workers, %.0f prefill tok/s (%s), HBM %d blocks/worker, %d B/token KV, wire 1/%d\n",
		out.Trace, rep.Requests, rep.TraceSeconds, c.PrefillWorkers, c.DecodeWorkers, c.Prefill.TokensPerSec, prefillModel(c), c.HBMBlocks, c.KVBytesPerToken, c.BytesScale)
	fmt.Fprintf(w, "%-16s %8s %8s %8s %8s %9s %9s %9s %9s %9s %9s %10s %10s\n",
		"policy", "hit blk", "hit tok", "hbm blk", "tier blk", "TTFT mean", "p50", "p90", "p99", "vs none", "E2E p50", "fetched", "put")
	for _, p := range rep.Policies {
		red := "-"
		if p.TTFTReduction != nil {
			red = fmt.Sprintf("%+.1f%%", -100*p.TTFTReduction.Mean)
		}
		fmt.Fprintf(w, "%-16s %7.2f%% %7.2f%% %8d %8d %8.3fs %8.3fs %8.3fs %8.3fs %9s %8.3fs %10s %10s\n",
			p.Policy, 100*p.BlockHitRatio, 100*p.TokenHitRatio, p.HBMHitBlocks, p.TierHitBlocks,
			p.TTFT.Mean, p.TTFT.P50, p.TTFT.P90, p.TTFT.P99, red, p.E2E.P50,
			block.FormatSize(p.FetchBytes), block.FormatSize(p.PutBytes))
	}
	fmt.Fprintf(w, "%-16s %7.2f%% %7.2f%%   (infinite cache: every block kept, visible at arrival)\n",
		"bound", 100*rep.InfiniteBlockHitRatio, 100*rep.InfiniteTokenHitRatio)
	if t := rep.Policy(replay.SharedTier); t != nil {
		fmt.Fprintf(w, "shared tier: %.1f%% of the bound; measured calls: lookup %.2f s, fetch %.2f s (%s on the wire), put %.2f s (%s on the wire), route %.2f s; fetch misses %d\n",
			100*t.BlockHitRatio/max(rep.InfiniteBlockHitRatio, 1e-12), t.LookupSeconds, t.FetchSeconds, block.FormatSize(t.FetchWireBytes),
			t.PutSeconds, block.FormatSize(t.PutWireBytes), t.RouteSeconds, t.FetchMisses)
		ms := func(s replay.Summary) string { return fmt.Sprintf("%.2f / %.2f ms", 1e3*s.P50, 1e3*s.P99) }
		mode := "sequential"
		if c.Concurrency > 1 {
			mode = fmt.Sprintf("concurrency %d, ordering %s", c.Concurrency, c.Ordering)
		}
		fmt.Fprintf(w, "shared tier calls (%s), per request p50 / p99: lookup %s, fetch %s, put %s\n",
			mode, ms(t.LookupLatency), ms(t.FetchLatency), ms(t.PutLatency))
	}
	fmt.Fprintf(w, "wall %.1f s\n", out.WallSec)
}

// prefillModel names the prefill cost model of c for the report.
func prefillModel(c replay.Config) string {
	if !c.Prefill.Attention {
		return "linear, no attention term"
	}
	return fmt.Sprintf("at %d tokens; attention term on, %d layers x %d wide", c.Prefill.RefTokens, c.Prefill.Layers, c.Prefill.Dim)
}
