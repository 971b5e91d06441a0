// Package subcmd is the subcommand dispatcher that ctxtier's command-line
// tools share: each subcommand registers itself from an init function in its
// own file, and Main picks one from os.Args. It also holds the small flag
// helpers the tools share (SplitList).
package subcmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// Func runs one subcommand with the arguments after its name.
type Func func(ctx context.Context, args []string) error

type command struct {
	summary string
	run     Func
}

// Set is one tool's subcommands.
type Set struct {
	tool     string // program name, for messages
	noun     string // what a subcommand is called in usage ("mode", "command")
	commands map[string]command
}

// New returns an empty set for the named tool.
func New(tool, noun string) *Set {
	return &Set{tool: tool, noun: noun, commands: map[string]command{}}
}

// Register adds a subcommand; a duplicate name is a programming error.
func (s *Set) Register(name, summary string, run Func) {
	if _, dup := s.commands[name]; dup {
		panic(s.tool + ": duplicate subcommand " + name)
	}
	s.commands[name] = command{summary: summary, run: run}
}

// Usage writes the list of subcommands.
func (s *Set) Usage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s <%s> [flags]\n\n%ss:\n", s.tool, s.noun, s.noun)
	names := make([]string, 0, len(s.commands))
	width := 0
	for n := range s.commands {
		names = append(names, n)
		width = max(width, len(n))
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-*s  %s\n", width, n, s.commands[n].summary)
	}
	fmt.Fprintf(w, "\nRun '%s <%s> -h' for its flags.\n", s.tool, s.noun)
}

// Run dispatches args (os.Args[1:]) and returns the process exit code:
// 0 on success, 1 when the subcommand failed, 2 for a usage error.
func (s *Set) Run(ctx context.Context, args []string, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		s.Usage(stderr)
		return 2
	}
	cmd, ok := s.commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "%s: unknown %s %q\n\n", s.tool, s.noun, args[0])
		s.Usage(stderr)
		return 2
	}
	if err := cmd.run(ctx, args[1:]); err != nil {
		fmt.Fprintf(stderr, "%s %s: %v\n", s.tool, args[0], err)
		return 1
	}
	return 0
}

// Main runs the set on os.Args with a context cancelled by SIGINT/SIGTERM,
// and exits with Run's code.
func (s *Set) Main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := s.Run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}
