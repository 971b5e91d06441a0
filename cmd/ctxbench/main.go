// Command ctxbench measures ctxtier: block load against a running ctxd with a
// raw-TCP baseline, trace replay, and offline policy simulation. Each mode is a
// subcommand in its own file that registers itself with register.
package main

import (
	"context"

	"github.com/ctxtier/ctxtier/cmd/internal/subcmd"
)

var commands = subcmd.New("ctxbench", "mode")

// register adds a subcommand; called from init functions in this package.
func register(name, summary string, run func(ctx context.Context, args []string) error) {
	commands.Register(name, summary, run)
}

func main() { commands.Main() }
