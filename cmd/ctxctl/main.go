// Command ctxctl is ctxtier's operator CLI. Each subcommand lives in its own
// file and registers itself with register.
package main

import (
	"context"

	"github.com/ctxtier/ctxtier/cmd/internal/subcmd"
)

var commands = subcmd.New("ctxctl", "command")

// register adds a subcommand; called from init functions in this package.
func register(name, summary string, run func(ctx context.Context, args []string) error) {
	commands.Register(name, summary, run)
}

func main() { commands.Main() }
