// Command ctxbench measures ctxtier: block load against a running ctxd with a
// raw-TCP baseline, a multi-node cluster (RS(2,1) vs one copy, index
// commits), trace replay, and offline policy simulation. Each mode is a
// subcommand in its own file that registers itself with register.
package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"

	"github.com/ctxtier/ctxtier/cmd/internal/subcmd"
)

var commands = subcmd.New("ctxbench", "mode")

// register adds a subcommand; called from init functions in this package.
func register(name, summary string, run func(ctx context.Context, args []string) error) {
	commands.Register(name, summary, run)
}

// runParsed parses a mode's flags (errors and -h go to stderr; -h is not a
// failure) and runs it with its results on stdout and progress on stderr.
func runParsed[C any](ctx context.Context, args []string, parse func([]string, io.Writer) (C, error), run func(context.Context, C, io.Writer, io.Writer) error) error {
	cfg, err := parse(args, os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	return run(ctx, cfg, os.Stdout, os.Stderr)
}

func main() { commands.Main() }
