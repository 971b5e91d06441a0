package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
)

func init() {
	register("keys", "manage access keys (S3 and block APIs): create, list, revoke", func(ctx context.Context, args []string) error {
		return runKeys(ctx, args, os.Stdout, os.Stderr)
	})
}

const keysUsage = `usage:
  ctxctl keys create --namespaces a,b[,team-*|*] [--description TEXT] [--json] [WHERE]
  ctxctl keys list [--json] [WHERE]
  ctxctl keys revoke ACCESS_KEY_ID [WHERE]

WHERE is either a cluster or one node's file:

  --addr HOST:PORT with the cluster secret (--cluster-secret, default
  $CTXTIER_CLUSTER_SECRET; or --cluster-secret-file, default
  $CTXTIER_CLUSTER_SECRET_FILE; --tls-ca for a ctxd run with --tls-clients):
  the keys are replicated through Raft (their
  secrets sealed under a key derived from the cluster secret), any node will
  do, and a key works on every node within a second.

  --data-dir DIR (the default, ./ctxd-data): DIR/credentials.json, secrets
  sealed with AES-256-GCM under DIR/node.key (created on first use, mode
  0600), known to that node only. A running ctxd picks up changes within a
  second.

The secret is printed once, at create.`

// keyStore is where keys are managed: a node's file or the cluster.
type keyStore interface {
	Create(ctx context.Context, namespaces []string, description string) (credential.Credential, error)
	List(ctx context.Context) ([]credential.Credential, error)
	Revoke(ctx context.Context, id string) error
}

// runKeys implements "ctxctl keys"; it writes to out and errOut so tests can drive it.
func runKeys(ctx context.Context, args []string, out, errOut io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(errOut, keysUsage)
		return fmt.Errorf("keys: missing action")
	}
	action, rest := args[0], args[1:]
	fs := flag.NewFlagSet("keys "+action, flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() { fmt.Fprintln(errOut, keysUsage) }
	dataDir := fs.String("data-dir", "./ctxd-data", "ctxd data directory (keys of that node only)")
	addr := fs.String("addr", "", "a ctxd HTTP address: manage the cluster's replicated keys (needs the cluster secret)")
	timeout := fs.Duration("timeout", 15*time.Second, "request timeout (with --addr)")
	readSecret := secretFlags(fs)
	readTLS := tlsFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	var namespaces, desc *string
	if action == "create" {
		namespaces = fs.String("namespaces", "", "comma-separated namespaces the key may use (\"*\" for all, \"prefix*\" for a prefix)")
		desc = fs.String("description", "", "free text shown by list")
	}
	// Allow the positional id before or after flags.
	var pos []string
	for len(rest) > 0 {
		if err := fs.Parse(rest); err != nil {
			return err
		}
		rest = fs.Args()
		if len(rest) > 0 {
			pos, rest = append(pos, rest[0]), rest[1:]
		}
	}
	var store keyStore
	if *addr != "" {
		secret, err := readSecret()
		if err != nil {
			return err
		}
		if secret == "" {
			return fmt.Errorf("keys: --addr needs the cluster secret (--cluster-secret, --cluster-secret-file or $CTXTIER_CLUSTER_SECRET)")
		}
		tlsConf, err := readTLS()
		if err != nil {
			return err
		}
		cfg := control.DefaultConfig()
		cfg.Token, cfg.Timeout, cfg.TLS = secret, *timeout, tlsConf
		if err := cfg.Validate(); err != nil {
			return err
		}
		store = remoteKeys{clusterapi.NewClient(*addr, control.WithConfig(cfg))}
	} else {
		fstore, err := credential.OpenFile(credential.DefaultConfig(*dataDir))
		if err != nil {
			return err
		}
		store = fstore
	}
	switch action {
	case "create":
		if len(pos) > 0 {
			return fmt.Errorf("keys create: unexpected argument %q", pos[0])
		}
		var scope []string
		for _, s := range strings.Split(*namespaces, ",") {
			if s = strings.TrimSpace(s); s != "" {
				scope = append(scope, s)
			}
		}
		c, err := store.Create(ctx, scope, *desc)
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(out).Encode(map[string]any{
				"access_key_id": c.AccessKeyID, "secret_access_key": c.Secret, "namespaces": c.Namespaces,
				"description": c.Description, "created": c.Created,
			})
		}
		fmt.Fprintf(out, "access_key_id     %s\nsecret_access_key %s\nnamespaces        %s\n", c.AccessKeyID, c.Secret, strings.Join(c.Namespaces, ","))
		fmt.Fprintln(errOut, "The secret is shown only now; store it safely.")
		return nil
	case "list":
		if len(pos) > 0 {
			return fmt.Errorf("keys list: unexpected argument %q", pos[0])
		}
		list, err := store.List(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			if list == nil {
				list = []credential.Credential{}
			}
			return json.NewEncoder(out).Encode(list)
		}
		tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ACCESS KEY ID\tNAMESPACES\tCREATED\tDESCRIPTION")
		for _, c := range list {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.AccessKeyID, strings.Join(c.Namespaces, ","), c.Created.Format("2006-01-02T15:04:05Z"), c.Description)
		}
		return tw.Flush()
	case "revoke":
		if len(pos) != 1 {
			return fmt.Errorf("keys revoke: want exactly one access key id")
		}
		if err := store.Revoke(ctx, pos[0]); err != nil {
			return err
		}
		fmt.Fprintf(out, "revoked %s\n", pos[0])
		return nil
	}
	fmt.Fprintln(errOut, keysUsage)
	return fmt.Errorf("keys: unknown action %q", action)
}
