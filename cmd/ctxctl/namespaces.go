package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/client"
)

func init() {
	register("namespaces", "namespaces: create (block or object kind), list", func(ctx context.Context, args []string) error {
		return runNamespaces(ctx, args, os.Stdout, os.Stderr)
	})
}

const namespacesUsage = `usage:
  ctxctl namespaces create NAME [--kind block|object] [--data-shards K] [--parity-shards M] [--addr HOST:PORT] [--json]
  ctxctl namespaces list [--addr HOST:PORT] [--json]

Talks to a ctxd's HTTP API (--addr, default 127.0.0.1:7401). --kind object
makes an S3 object namespace (any object key; what S3 CreateBucket makes);
block, the default, is an engines' namespace of hex-keyed immutable blocks.
With ctxd --auth required, pass --access-key and --secret (or
CTXTIER_ACCESS_KEY / CTXTIER_SECRET).`

func runNamespaces(ctx context.Context, args []string, out, errOut io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(errOut, namespacesUsage)
		return fmt.Errorf("namespaces: missing action")
	}
	action, rest := args[0], args[1:]
	fs := flag.NewFlagSet("namespaces "+action, flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() { fmt.Fprintln(errOut, namespacesUsage) }
	addr := fs.String("addr", "127.0.0.1:7401", "a ctxd HTTP address")
	access := fs.String("access-key", os.Getenv("CTXTIER_ACCESS_KEY"), "access key id (ctxd --auth required)")
	secret := fs.String("secret", os.Getenv("CTXTIER_SECRET"), "secret (ctxd --auth required)")
	timeout := fs.Duration("timeout", 15*time.Second, "request timeout")
	asJSON := fs.Bool("json", false, "print JSON")
	var ns block.Namespace
	var kind string
	if action == "create" {
		fs.StringVar(&kind, "kind", string(block.KindBlock), "block or object")
		fs.IntVar(&ns.DataShards, "data-shards", 0, "erasure code k (0: the default, 1)")
		fs.IntVar(&ns.ParityShards, "parity-shards", 0, "erasure code m")
	}
	// The name comes first; flags follow it.
	if action == "create" {
		if len(rest) == 0 || rest[0] == "" || rest[0][0] == '-' {
			fmt.Fprintln(errOut, namespacesUsage)
			return fmt.Errorf("namespaces create: missing NAME")
		}
		ns.Name, rest = rest[0], rest[1:]
	}
	if err := fs.Parse(rest); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("namespaces %s: unexpected argument %q", action, fs.Arg(0))
	}
	cfg := client.HTTPDefaultConfig()
	cfg.BaseURL, cfg.AccessKeyID, cfg.Secret = "http://"+*addr, *access, *secret
	hc, err := client.NewHTTP(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	switch action {
	case "create":
		ns.Kind = block.Kind(kind)
		if err := ns.WithDefaults().Validate(); err != nil {
			return err
		}
		got, err := hc.CreateNamespace(ctx, ns)
		if err != nil {
			return err
		}
		return printNamespaces(out, *asJSON, []block.Namespace{got})
	case "list":
		list, err := hc.ListNamespaces(ctx)
		if err != nil {
			return err
		}
		return printNamespaces(out, *asJSON, list)
	}
	fmt.Fprintln(errOut, namespacesUsage)
	return fmt.Errorf("namespaces: unknown action %q", action)
}

func printNamespaces(out io.Writer, asJSON bool, list []block.Namespace) error {
	if asJSON {
		return json.NewEncoder(out).Encode(list)
	}
	for _, n := range list {
		kind := n.Kind
		if kind == "" {
			kind = block.KindBlock
		}
		fmt.Fprintf(out, "%-24s %-6s k=%d m=%d max_block_size=%d\n", n.Name, kind, n.DataShards, n.ParityShards, n.MaxBlockSize)
	}
	return nil
}
