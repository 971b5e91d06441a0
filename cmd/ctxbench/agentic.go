package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/ctxtier/ctxtier/sim/trace"
	"github.com/ctxtier/ctxtier/sim/trace/agentic"
)

func init() {
	register("agentic", "write a synthetic agentic trace (sessions, tool waits, sub-agents, hints) as Mooncake JSON lines", runAgentic)
}

var errAgenticUsage = errors.New("ctxbench: bad agentic arguments")

func parseAgenticArgs(args []string) (string, agentic.Config, error) {
	c := agentic.DefaultConfig()
	fs := flag.NewFlagSet("agentic", flag.ContinueOnError)
	out := fs.String("out", "", "output trace file (JSON lines)")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "random seed (same seed, same trace)")
	fs.IntVar(&c.Sessions, "sessions", c.Sessions, "lead sessions")
	fs.IntVar(&c.Harnesses, "harnesses", c.Harnesses, "distinct harness prefixes (system prompt + tool definitions)")
	fs.Float64Var(&c.ArrivalMs, "arrival-ms", c.ArrivalMs, "mean gap between session starts (ms, exponential)")
	fs.IntVar(&c.SubAgentPercent, "subagent-percent", c.SubAgentPercent, "chance per lead turn of forking a sub-agent")
	fs.IntVar(&c.Turns.Max, "max-turns", c.Turns.Max, "most calls of a lead session")
	if err := fs.Parse(args); err != nil {
		return "", c, fmt.Errorf("%w: %v", errAgenticUsage, err)
	}
	if *out == "" {
		return "", c, fmt.Errorf("%w: --out is required", errAgenticUsage)
	}
	if err := c.Validate(); err != nil {
		return "", c, fmt.Errorf("%w: %v", errAgenticUsage, err)
	}
	return *out, c, nil
}

func runAgentic(_ context.Context, args []string) error {
	out, c, err := parseAgenticArgs(args)
	if err != nil {
		return err
	}
	reqs, err := agentic.Generate(c)
	if err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := trace.Write(f, reqs); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	blocks := 0
	for _, r := range reqs {
		blocks += len(r.HashIDs)
	}
	fmt.Printf("%s: %d requests, %d block accesses, infinite-cache bound %.4f\n", out, len(reqs), blocks, trace.InfiniteCacheHitRatio(reqs))
	return nil
}
