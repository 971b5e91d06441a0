package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ctxtier/ctxtier/sim/policysim"
	"github.com/ctxtier/ctxtier/sim/replay"
	"github.com/ctxtier/ctxtier/sim/trace"
	"github.com/ctxtier/ctxtier/tiers/policy"
)

func init() {
	register("sim", "replay a trace offline through a tier policy (hit ratio vs LRU, Belady, bound)", runSim)
}

var errSimUsage = errors.New("ctxbench: bad sim arguments")

type simArgs struct {
	tracePath      string
	capacityTokens int64
	blockTokens    int
	policyName     string
	sweep          bool
	sweepTokens    []int64
	plotPath       string
	opt            policysim.Options // --protect-request, --touch-after-miss
	keySalt        uint64            // --key-salt: trace ids XOR replay.SaltMask(keySalt)
	oracles        bool
	compare        []string
	ctxd           ctxdArgs
}

// simPolicies are the simulator-only policies: the hint-aware wrapper
// (sim/policysim) around Window, its ablations, and the same wrapper
// around Duel (hints-duel).
var simPolicies = map[string]func() policy.Factory{
	"hints":      func() policy.Factory { return policysim.HintFactory(policy.NewWindow, policysim.DefaultHintConfig()) },
	"hints-duel": func() policy.Factory { return policysim.HintFactory(policy.NewDuel, policysim.DefaultHintConfig()) },
	"hints-nopin": func() policy.Factory {
		c := policysim.DefaultHintConfig()
		c.SoftPin = false
		return policysim.HintFactory(policy.NewWindow, c)
	},
	"hints-noend": func() policy.Factory {
		c := policysim.DefaultHintConfig()
		c.SessionEnd = false
		return policysim.HintFactory(policy.NewWindow, c)
	},
	"hints-noephemeral": func() policy.Factory {
		c := policysim.DefaultHintConfig()
		c.Ephemeral = false
		return policysim.HintFactory(policy.NewWindow, c)
	},
	"hints-wire": func() policy.Factory {
		return policysim.WireHintFactory(policy.NewWindow, policysim.DefaultHintConfig().PinGraceMs)
	},
	"hints-noshared": func() policy.Factory {
		c := policysim.DefaultHintConfig()
		c.SharedClass = 0
		return policysim.HintFactory(policy.NewWindow, c)
	},
}

// lookupSimPolicy finds a tier policy or a simulator-only one.
func lookupSimPolicy(name string) (policy.Factory, error) {
	if f, ok := simPolicies[name]; ok {
		return f(), nil
	}
	f, err := policy.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("%w (or a simulator policy: %v)", err, simPolicyNames())
	}
	return f, nil
}

func simPolicyNames() []string {
	out := make([]string, 0, len(simPolicies))
	for n := range simPolicies {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func parseSimArgs(args []string) (simArgs, error) {
	var a simArgs
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.StringVar(&a.tracePath, "trace", "", "Mooncake-format trace (JSON lines)")
	fs.Int64Var(&a.capacityTokens, "capacity-tokens", 3_000_000, "tier capacity in tokens")
	fs.IntVar(&a.blockTokens, "block-tokens", trace.MooncakeBlockTokens, "tokens per block (capacity in blocks = capacity-tokens / block-tokens)")
	fs.StringVar(&a.policyName, "policy", "duel", "policy: "+strings.Join(append(policy.Names(), simPolicyNames()...), ", "))
	compareList := fs.String("compare", "", "comma-separated policies also replayed at each capacity (e.g. s3fifo,window)")
	fs.BoolVar(&a.sweep, "sweep", false, "sweep capacities and plot hit ratio against capacity")
	sweepList := fs.String("sweep-tokens", "500000,1000000,2000000,3000000,5000000,7500000,10000000,15000000,20000000,30000000", "comma-separated capacities (tokens) for --sweep")
	fs.StringVar(&a.plotPath, "plot", "sim_sweep.png", "PNG file written by --sweep")
	fs.BoolVar(&a.opt.ProtectRequest, "protect-request", false, "do not let a request evict its own blocks while it is processed")
	touchAfterMiss := fs.Bool("touch-after-miss", true, "touch a request's resident blocks after its first miss too; false: only its hit prefix, as ctxd sees `ctxbench replay` (docs/policy.md), and --ctxd reads only the prefix a lookup reports")
	fs.Uint64Var(&a.keySalt, "key-salt", 0, "replay the trace with the block hashes of `ctxbench replay --key-salt N` (a policy that hashes keys, such as Window's ghosts, then sees what ctxd saw), and --ctxd with exactly those keys (else a random salt per run); 0: the trace's ids")
	fs.BoolVar(&a.oracles, "oracles", false, "also print the partial-oracle bounds (oracle-reused-death, oracle-reused-future; docs/policy.md)")
	fs.StringVar(&a.ctxd.addr, "ctxd", "", "also replay the trace against a real ctxd at this native address (start it with --dram-capacity = capacity in blocks x --ctxd-block-bytes, --nvme-dir off)")
	fs.StringVar(&a.ctxd.namespace, "ctxd-namespace", "default", "namespace of the ctxd replay's blocks")
	fs.IntVar(&a.ctxd.blockBytes, "ctxd-block-bytes", 4096, "bytes per block in the ctxd replay")
	fs.BoolVar(&a.ctxd.hints, "ctxd-hints", false, "send each block's agent hint (reuse, retain) with its put in the ctxd replay")
	fs.BoolVar(&a.ctxd.sessions, "ctxd-sessions", false, "with --ctxd-hints: also send session ids with puts, each request's retain window with its reads, and END_SESSION when a session ends")
	fs.Float64Var(&a.ctxd.speed, "ctxd-speed", 10, "with --ctxd-hints: replay at N times the trace's pace, retain windows scaled by 1/N")
	fs.Int64Var(&a.ctxd.graceMs, "ctxd-grace-ms", policysim.DefaultHintConfig().PinGraceMs, "with --ctxd-hints: added to resume_within_ms for the retain window (the simulator's PinGraceMs)")
	if err := fs.Parse(args); err != nil {
		return a, fmt.Errorf("%w: %v", errSimUsage, err)
	}
	a.opt.PrefixTouchOnly = !*touchAfterMiss
	a.ctxd.prefixOnly = a.opt.PrefixTouchOnly
	a.ctxd.fixedKeys = a.keySalt != 0
	if a.ctxd.addr != "" && (a.sweep || a.ctxd.blockBytes < 8 || a.ctxd.blockBytes%8 != 0 || a.ctxd.speed <= 0) {
		return a, fmt.Errorf("%w: --ctxd needs no --sweep, a --ctxd-block-bytes multiple of 8 and a positive --ctxd-speed", errSimUsage)
	}
	if a.ctxd.sessions && !a.ctxd.hints {
		return a, fmt.Errorf("%w: --ctxd-sessions needs --ctxd-hints", errSimUsage)
	}
	if a.tracePath == "" {
		return a, fmt.Errorf("%w: --trace is required", errSimUsage)
	}
	if a.blockTokens < 1 {
		return a, fmt.Errorf("%w: --block-tokens must be positive", errSimUsage)
	}
	if a.capacityTokens < int64(a.blockTokens) {
		return a, fmt.Errorf("%w: --capacity-tokens %d is below one block of %d tokens", errSimUsage, a.capacityTokens, a.blockTokens)
	}
	if _, err := lookupSimPolicy(a.policyName); err != nil {
		return a, fmt.Errorf("%w: %v", errSimUsage, err)
	}
	if *compareList != "" {
		for _, n := range strings.Split(*compareList, ",") {
			n = strings.TrimSpace(n)
			if _, err := lookupSimPolicy(n); err != nil {
				return a, fmt.Errorf("%w: --compare: %v", errSimUsage, err)
			}
			a.compare = append(a.compare, n)
		}
	}
	for _, f := range strings.Split(*sweepList, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil || v < int64(a.blockTokens) {
			return a, fmt.Errorf("%w: --sweep-tokens entry %q is not a capacity of at least one block", errSimUsage, f)
		}
		a.sweepTokens = append(a.sweepTokens, v)
	}
	return a, nil
}

func runSim(ctx context.Context, args []string) error {
	a, err := parseSimArgs(args)
	if err != nil {
		return err
	}
	reqs, err := trace.ReadFile(a.tracePath)
	if err != nil {
		return err
	}
	saltTrace(reqs, replay.SaltMask(a.keySalt))
	if !a.sweep {
		row, err := simulate(ctx, reqs, a.policyName, a.compare, int(a.capacityTokens/int64(a.blockTokens)), a.opt, a.oracles)
		if err != nil {
			return err
		}
		printSimRow(os.Stdout, a, row)
		if a.ctxd.addr != "" {
			fmt.Printf("ctxd at %s: needs --dram-capacity %d (%d blocks of %d bytes)\n", a.ctxd.addr, row.blocks*int64(a.ctxd.blockBytes), row.blocks, a.ctxd.blockBytes)
			cr, err := replayCtxd(ctx, reqs, a.ctxd, os.Stderr)
			if err != nil {
				return err
			}
			fmt.Printf("%-22s hit ratio %.4f  = %5.1f%% of bound  (%d accesses, %d hit blocks verified, %s wall, paced lag at most %s)\n",
				cr.Policy, cr.HitRatio(), 100*frac(cr.Result, row.bound), cr.Total, cr.checked, cr.wall.Round(time.Millisecond), cr.maxLag.Round(time.Millisecond))
			if a.ctxd.sessions {
				fmt.Printf("%-22s %d sessions ended, %d blocks released\n", "", cr.ended, cr.released)
			}
		}
		return nil
	}
	rows, err := simSweep(ctx, reqs, a)
	if err != nil {
		return err
	}
	printSimSweep(os.Stdout, a, rows)
	if err := writeSweepPNG(a.plotPath, a.tracePath, a.policyName, rows); err != nil {
		return err
	}
	fmt.Printf("plot: %s\n", a.plotPath)
	return nil
}

// simRow is one capacity's outcome for the chosen policy, LRU and Belady.
type simRow struct {
	tokens, blocks int64
	bound          float64
	policy         policysim.Result
	lru            policysim.Result
	belady         policysim.Result
	oracles        []policysim.Result // partial oracles, with --oracles
	compare        []policysim.Result // --compare policies
}

// saltTrace XORs mask into every hash id of reqs.
func saltTrace(reqs []trace.Request, mask uint64) {
	if mask == 0 {
		return
	}
	for i := range reqs {
		for j := range reqs[i].HashIDs {
			reqs[i].HashIDs[j] ^= mask
		}
	}
}

func simulate(ctx context.Context, reqs []trace.Request, name string, compare []string, blocks int, opt policysim.Options, oracles bool) (simRow, error) {
	f, err := lookupSimPolicy(name)
	if err != nil {
		return simRow{}, err
	}
	row := simRow{blocks: int64(blocks), bound: trace.InfiniteCacheHitRatio(reqs)}
	if row.policy, err = policysim.Run(reqs, blocks, name, f, opt); err != nil {
		return row, err
	}
	if err := ctx.Err(); err != nil {
		return row, err
	}
	if row.lru, err = policysim.Run(reqs, blocks, "lru", policy.NewLRU, opt); err != nil {
		return row, err
	}
	if row.belady, err = policysim.Belady(reqs, blocks, opt); err != nil {
		return row, err
	}
	for _, n := range compare {
		cf, err := lookupSimPolicy(n)
		if err != nil {
			return row, err
		}
		r, err := policysim.Run(reqs, blocks, n, cf, opt)
		if err != nil {
			return row, err
		}
		row.compare = append(row.compare, r)
		if err := ctx.Err(); err != nil {
			return row, err
		}
	}
	if oracles {
		for _, k := range []policysim.Knowledge{policysim.KnowsDeath, policysim.KnowsFuture} {
			r, err := policysim.ReusedOracle(reqs, blocks, k, opt)
			if err != nil {
				return row, err
			}
			row.oracles = append(row.oracles, r)
		}
	}
	return row, ctx.Err()
}

func simSweep(ctx context.Context, reqs []trace.Request, a simArgs) ([]simRow, error) {
	rows := make([]simRow, 0, len(a.sweepTokens))
	for _, tok := range a.sweepTokens {
		row, err := simulate(ctx, reqs, a.policyName, a.compare, int(tok/int64(a.blockTokens)), a.opt, a.oracles)
		if err != nil {
			return nil, err
		}
		row.tokens = tok
		rows = append(rows, row)
	}
	return rows, nil
}

func frac(r policysim.Result, bound float64) float64 {
	if bound == 0 {
		return 0
	}
	return r.HitRatio() / bound
}

func printSimRow(w io.Writer, a simArgs, r simRow) {
	fmt.Fprintf(w, "trace %s, capacity %d tokens = %d blocks of %d tokens\n", a.tracePath, a.capacityTokens, r.blocks, a.blockTokens)
	fmt.Fprintf(w, "infinite-cache bound  %.4f\n", r.bound)
	all := append([]policysim.Result{r.policy}, r.compare...)
	for _, res := range append(append(all, r.lru, r.belady), r.oracles...) {
		fmt.Fprintf(w, "%-22s hit ratio %.4f  = %5.1f%% of bound\n", res.Policy, res.HitRatio(), 100*frac(res, r.bound))
	}
}

func printSimSweep(w io.Writer, a simArgs, rows []simRow) {
	fmt.Fprintf(w, "trace %s, %d tokens per block; hit ratio (%% of bound %.4f)\n", a.tracePath, a.blockTokens, rows[0].bound)
	fmt.Fprintf(w, "%12s %8s  %-16s", "tokens", "blocks", a.policyName)
	for _, n := range a.compare {
		fmt.Fprintf(w, " %-16s", n)
	}
	fmt.Fprintf(w, " %-16s %-16s", "lru", "belady")
	for _, o := range rows[0].oracles {
		fmt.Fprintf(w, " %-22s", o.Policy)
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		fmt.Fprintf(w, "%12d %8d  %.4f (%5.1f%%)", r.tokens, r.blocks, r.policy.HitRatio(), 100*frac(r.policy, r.bound))
		for _, c := range r.compare {
			fmt.Fprintf(w, "  %.4f (%5.1f%%)", c.HitRatio(), 100*frac(c, r.bound))
		}
		fmt.Fprintf(w, "  %.4f (%5.1f%%)  %.4f (%5.1f%%)", r.lru.HitRatio(), 100*frac(r.lru, r.bound),
			r.belady.HitRatio(), 100*frac(r.belady, r.bound))
		for _, o := range r.oracles {
			fmt.Fprintf(w, "  %.4f (%5.1f%%)      ", o.HitRatio(), 100*frac(o, r.bound))
		}
		fmt.Fprintln(w)
	}
}
