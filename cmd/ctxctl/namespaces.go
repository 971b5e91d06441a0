package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/client"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
)

func init() {
	register("namespaces", "namespaces: create (block or object kind), list, show, set-quota", func(ctx context.Context, args []string) error {
		return runNamespaces(ctx, args, os.Stdout, os.Stderr)
	})
}

const namespacesUsage = `usage:
  ctxctl namespaces create NAME [--kind block|object] [--data-shards K] [--parity-shards M]
                            [--quota-dram SIZE] [--quota-nvme SIZE] [--quota-s3 SIZE] [--addr HOST:PORT] [--json]
  ctxctl namespaces list [--addr HOST:PORT] [--json]
  ctxctl namespaces show NAME [--addr HOST:PORT] [--json]
  ctxctl namespaces set-quota NAME [--dram SIZE] [--nvme SIZE] [--s3 SIZE] [--addr HOST:PORT] [--json]

Talks to a ctxd's HTTP API (--addr, default 127.0.0.1:7401). --kind object
makes an S3 object namespace (any object key; what S3 CreateBucket makes);
block, the default, is an engines' namespace of hex-keyed immutable blocks.
With ctxd --auth required, pass --access-key and --secret (or
CTXTIER_ACCESS_KEY / CTXTIER_SECRET).

A quota is a namespace's byte limit in one tier of each node (SIZE: 4096,
512MiB, 1GiB, ...; 0 is unlimited). At its DRAM or NVMe quota a namespace's
puts evict its own least recently used blocks there (DRAM's demote to NVMe),
never another namespace's. set-quota replaces all three quotas: a tier not
given is unlimited. show prints the quotas and the bytes the namespace holds
in each tier of the node at --addr.`

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
	var quota [3]sizeFlag // dram, nvme, s3
	switch action {
	case "create":
		fs.StringVar(&kind, "kind", string(block.KindBlock), "block or object")
		fs.IntVar(&ns.DataShards, "data-shards", 0, "erasure code k (0: the default, 1)")
		fs.IntVar(&ns.ParityShards, "parity-shards", 0, "erasure code m")
		fs.Var(&quota[0], "quota-dram", "byte quota in DRAM per node (0: unlimited)")
		fs.Var(&quota[1], "quota-nvme", "byte quota on NVMe per node (0: unlimited)")
		fs.Var(&quota[2], "quota-s3", "byte quota in S3 (0: unlimited)")
	case "set-quota":
		fs.Var(&quota[0], "dram", "byte quota in DRAM per node (0 or absent: unlimited)")
		fs.Var(&quota[1], "nvme", "byte quota on NVMe per node (0 or absent: unlimited)")
		fs.Var(&quota[2], "s3", "byte quota in S3 (0 or absent: unlimited)")
	}
	// The name comes first; flags follow it.
	switch action {
	case "create", "show", "set-quota":
		if len(rest) == 0 || rest[0] == "" || rest[0][0] == '-' {
			fmt.Fprintln(errOut, namespacesUsage)
			return fmt.Errorf("namespaces %s: missing NAME", action)
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
		ns.Quota = block.Quota{DRAM: int64(quota[0]), NVMe: int64(quota[1]), S3: int64(quota[2])}
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
	case "show":
		st, err := hc.NamespaceStatus(ctx, ns.Name)
		if err != nil {
			return err
		}
		return printNamespaceStatus(out, *asJSON, st)
	case "set-quota":
		st, err := hc.SetQuota(ctx, ns.Name, block.Quota{DRAM: int64(quota[0]), NVMe: int64(quota[1]), S3: int64(quota[2])})
		if err != nil {
			return err
		}
		return printNamespaceStatus(out, *asJSON, st)
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
		fmt.Fprintf(out, "%-24s %-6s k=%d m=%d max_block_size=%d quota=%s\n", n.Name, kind, n.DataShards, n.ParityShards, n.MaxBlockSize, formatQuota(n.Quota))
	}
	return nil
}

// formatQuota is "dram=1GiB,nvme=10GiB" for the tiers with a quota, or "none".
func formatQuota(q block.Quota) string {
	var parts []string
	for _, t := range []block.Tier{block.TierDRAM, block.TierNVMe, block.TierS3} {
		if v := q.Of(t); v > 0 {
			parts = append(parts, string(t)+"="+block.FormatSize(v))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// printNamespaceStatus prints one namespace with its quota and usage per tier.
func printNamespaceStatus(out io.Writer, asJSON bool, st httpwire.NamespaceStatus) error {
	if asJSON {
		return json.NewEncoder(out).Encode(st)
	}
	if err := printNamespaces(out, false, []block.Namespace{st.Namespace}); err != nil {
		return err
	}
	fmt.Fprintf(out, "%-6s %14s %14s\n", "tier", "bytes", "quota")
	for _, t := range []block.Tier{block.TierDRAM, block.TierNVMe, block.TierS3} {
		used, counted := st.Usage[t]
		q := "unlimited"
		if v := st.Quota.Of(t); v > 0 {
			q = block.FormatSize(v)
		}
		u := "-" // this node does not count the tier (or has none)
		if counted {
			u = strconv.FormatInt(used, 10)
		}
		fmt.Fprintf(out, "%-6s %14s %14s\n", t, u, q)
	}
	return nil
}

// sizeFlag is a byte size flag (block.ParseSize).
type sizeFlag int64

func (f *sizeFlag) String() string { return strconv.FormatInt(int64(*f), 10) }

func (f *sizeFlag) Set(s string) error {
	v, err := block.ParseSize(s)
	if err != nil {
		return err
	}
	*f = sizeFlag(v)
	return nil
}
