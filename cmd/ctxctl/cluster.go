package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/cluster"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
)

func init() {
	register("cluster", "cluster membership: status, join, drain, remove, transfer-leadership, repair, rebalance status", func(ctx context.Context, args []string) error {
		return runCluster(ctx, args, os.Stdout, os.Stderr)
	})
}

const clusterUsage = `usage:
  ctxctl cluster status [--addr HOST:PORT] [--json]
  ctxctl cluster join --id ID --raft-addr HOST:PORT --data-addr HOST:PORT --http-addr HOST:PORT [--zone Z] [--capacity SIZE]
  ctxctl cluster drain ID... [--no-wait] [--interval 1s]
  ctxctl cluster drain --cancel ID
  ctxctl cluster remove ID [--force] [--interval 1s]
  ctxctl cluster transfer-leadership [ID]
  ctxctl cluster repair [--json]
  ctxctl cluster rebalance status [--json]

Every action takes --addr (a ctxd HTTP address, default 127.0.0.1:7401; any
member will do, changes are forwarded to the leader), the cluster secret
(--cluster-secret, default $CTXTIER_CLUSTER_SECRET; or --cluster-secret-file,
default $CTXTIER_CLUSTER_SECRET_FILE, e.g. a node's DATA_DIR/cluster.secret;
--token and $CTXTIER_CLUSTER_TOKEN are its older names), --tls-ca (default
$CTXTIER_TLS_CA: the CA of a ctxd run with --tls-clients; talk https), --timeout
(per request) and --json. status shows the cluster as the node at --addr
sees it. join adds a node by hand (a ctxd started with --join adds itself).
drain marks nodes draining: they take no new shards, and the leader copies
every shard they hold to the nodes placement picks now; it waits (printing
progress) until the index places nothing on them, and fails if a drain
stalls. --cancel makes a draining node alive again. remove drains the node
first, then takes it out of Raft and marks it left; --force skips the drain
(blocks with parity elsewhere are repaired, single copies on the node are
lost). Removing the leader hands leadership over first.
transfer-leadership with no ID picks the most up-to-date follower.
rebalance status shows the leader's progress moving shards to the members
placement picks after membership changed (asked of the leader, found
through --addr).`

// runCluster implements "ctxctl cluster"; it writes to out and errOut so tests can drive it.
func runCluster(ctx context.Context, args []string, out, errOut io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(errOut, clusterUsage)
		return fmt.Errorf("cluster: missing action")
	}
	action, rest := args[0], args[1:]
	fs := flag.NewFlagSet("cluster "+action, flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() { fmt.Fprintln(errOut, clusterUsage) }
	addr := fs.String("addr", "127.0.0.1:7401", "a ctxd HTTP address")
	readSecret := secretFlags(fs)
	readTLS := tlsFlag(fs)
	timeout := fs.Duration("timeout", 15*time.Second, "request timeout")
	asJSON := fs.Bool("json", false, "print JSON")
	var m clusterapi.Member
	var capacity string
	if action == "join" {
		fs.StringVar(&m.ID, "id", "", "node id")
		fs.StringVar(&m.RaftAddr, "raft-addr", "", "the node's Raft address (host:port)")
		fs.StringVar(&m.DataAddr, "data-addr", "", "the node's data (native protocol) address")
		fs.StringVar(&m.HTTPAddr, "http-addr", "", "the node's HTTP API address")
		fs.StringVar(&m.Zone, "zone", "", "the node's zone (placement spreads shards across zones)")
		fs.StringVar(&capacity, "capacity", "0", "bytes the node offers (e.g. 64GiB)")
	}
	var force, cancelDrain, noWait bool
	interval := time.Second
	switch action {
	case "remove":
		fs.BoolVar(&force, "force", false, "remove without draining first (single copies on the node are lost)")
		fs.DurationVar(&interval, "interval", interval, "how often to check the drain's progress")
	case "drain":
		fs.BoolVar(&cancelDrain, "cancel", false, "make a draining node alive again")
		fs.BoolVar(&noWait, "no-wait", false, "start the drain and return")
		fs.DurationVar(&interval, "interval", interval, "how often to check the drain's progress")
	}
	var pos []string
	for {
		if err := fs.Parse(rest); err != nil {
			return err
		}
		rest = fs.Args()
		if len(rest) == 0 {
			break
		}
		pos, rest = append(pos, rest[0]), rest[1:]
	}
	token, err := readSecret()
	if err != nil {
		return err
	}
	tlsConf, err := readTLS()
	if err != nil {
		return err
	}
	cfg := control.DefaultConfig()
	cfg.Token, cfg.Timeout, cfg.TLS = token, *timeout, tlsConf
	if err := cfg.Validate(); err != nil {
		return err
	}
	c := clusterapi.NewClient(*addr, control.WithConfig(cfg))
	wantArgs := func(max int) error {
		if len(pos) > max {
			return fmt.Errorf("cluster %s: unexpected argument %q", action, pos[max])
		}
		return nil
	}
	switch action {
	case "status":
		if err := wantArgs(0); err != nil {
			return err
		}
		st, err := c.Status(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, st)
		}
		return printStatus(out, st)
	case "join":
		if err := wantArgs(0); err != nil {
			return err
		}
		n, err := parseBytes(capacity)
		if err != nil {
			return fmt.Errorf("cluster join: --capacity: %w", err)
		}
		m.Capacity = n
		if _, err := m.FSM(); err != nil {
			return fmt.Errorf("cluster join: %w", err)
		}
		got, err := c.Join(ctx, m)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, got)
		}
		fmt.Fprintf(out, "joined %s (raft %s, http %s) as a voter\n", got.ID, got.RaftAddr, got.HTTPAddr)
		return nil
	case "drain":
		if len(pos) == 0 || cancelDrain && len(pos) != 1 {
			return fmt.Errorf("cluster drain: want node ids (exactly one with --cancel)")
		}
		if interval <= 0 {
			return fmt.Errorf("cluster drain: --interval must be positive")
		}
		if cancelDrain {
			if err := c.CancelDrain(ctx, pos[0]); err != nil {
				return err
			}
			if *asJSON {
				return printJSON(out, clusterapi.DrainResponse{ID: pos[0], State: "alive"})
			}
			fmt.Fprintf(out, "drain of %s cancelled; it is alive again\n", pos[0])
			return nil
		}
		return drain(ctx, c, pos, !noWait, interval, *asJSON, out, errOut)
	case "remove":
		if len(pos) != 1 {
			return fmt.Errorf("cluster remove: want exactly one node id")
		}
		if interval <= 0 {
			return fmt.Errorf("cluster remove: --interval must be positive")
		}
		var err error
		if force {
			err = c.ForceRemove(ctx, pos[0])
		} else if err = drain(ctx, c, pos, true, interval, false, out, errOut); err == nil {
			err = c.Remove(ctx, pos[0])
		}
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, clusterapi.RemoveResponse{Removed: pos[0]})
		}
		fmt.Fprintf(out, "removed %s\n", pos[0])
		return nil
	case "transfer-leadership":
		if err := wantArgs(1); err != nil {
			return err
		}
		id := ""
		if len(pos) == 1 {
			id = pos[0]
		}
		tr, err := c.TransferLeadership(ctx, id)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, tr)
		}
		to := tr.Leader
		if to == "" {
			to = "(not known yet)"
		}
		fmt.Fprintf(out, "leadership: %s -> %s\n", tr.Previous, to)
		return nil
	case "repair":
		if err := wantArgs(0); err != nil {
			return err
		}
		rep, err := c.Repair(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, rep)
		}
		return printRepair(out, rep)
	case "rebalance":
		if len(pos) != 1 || pos[0] != "status" {
			return fmt.Errorf("cluster rebalance: want \"rebalance status\"")
		}
		st, err := rebalanceStatus(ctx, c, func(addr string) *clusterapi.Client { return clusterapi.NewClient(addr, control.WithConfig(cfg)) })
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, st)
		}
		return printRebalance(out, st)
	}
	fmt.Fprintln(errOut, clusterUsage)
	return fmt.Errorf("cluster: unknown action %q", action)
}

// drain starts draining ids and, with wait, follows the leader's progress
// until the index places nothing on them. Progress lines go to out, or to
// errOut when the start replies are printed as JSON.
func drain(ctx context.Context, c *clusterapi.Client, ids []string, wait bool, interval time.Duration, asJSON bool, out, errOut io.Writer) error {
	var started []clusterapi.DrainResponse
	for _, id := range ids {
		r, err := c.Drain(ctx, id)
		if err != nil {
			return fmt.Errorf("draining %s: %w", id, err)
		}
		started = append(started, r)
	}
	progressOut := out
	if asJSON {
		progressOut = errOut
		if err := printJSON(out, started); err != nil {
			return err
		}
	} else {
		for _, r := range started {
			switch {
			case r.Drain != nil && r.Drain.ShardsLeft == 0:
				fmt.Fprintf(out, "draining %s: nothing to move\n", r.ID)
			case r.Drain != nil:
				fmt.Fprintf(out, "draining %s: %s to move\n", r.ID, describeDrain(*r.Drain))
			default:
				fmt.Fprintf(out, "draining %s\n", r.ID)
			}
		}
	}
	if !wait {
		return nil
	}
	last := map[string]int{}
	for _, r := range started {
		if r.Drain != nil {
			last[r.ID] = r.Drain.ShardsLeft
		}
	}
	err := c.WaitDrained(ctx, ids, interval, func(d cluster.DrainStatus) {
		if n, ok := last[d.ID]; ok && n == d.ShardsLeft {
			return
		}
		last[d.ID] = d.ShardsLeft
		fmt.Fprintf(progressOut, "%s: %s left, %d moved\n", d.ID, plural(d.ShardsLeft, "shard"), d.MovedShards)
	})
	if err != nil {
		return err
	}
	for _, id := range ids {
		fmt.Fprintf(progressOut, "drained %s: the index places nothing on it\n", id)
	}
	return nil
}

// describeDrain says what a draining node holds: "12 shards of 10 blocks (one 3, r3 7)".
func describeDrain(d cluster.DrainStatus) string {
	s := fmt.Sprintf("%s of %s", plural(d.ShardsLeft, "shard"), plural(d.BlocksLeft, "block"))
	if len(d.Namespaces) > 0 {
		names := make([]string, 0, len(d.Namespaces))
		for ns := range d.Namespaces {
			names = append(names, ns)
		}
		sort.Strings(names)
		for i, ns := range names {
			names[i] = fmt.Sprintf("%s %d", ns, d.Namespaces[ns])
		}
		s += " (" + strings.Join(names, ", ") + ")"
	}
	return s
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func printJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printStatus(out io.Writer, st clusterapi.Status) error {
	leader := "none known"
	if st.Leader != nil {
		leader = fmt.Sprintf("%s at %s", st.Leader.ID, st.Leader.HTTPAddr)
	}
	fmt.Fprintf(out, "node %s (%s), leader %s\n", st.NodeID, st.State, leader)
	r := st.Raft
	fmt.Fprintf(out, "raft term %d, commit %d, applied %d, last log %d, last contact %s\n", r.Term, r.CommitIndex, r.AppliedIndex, r.LastLogIndex, r.LastContact)
	if r.Fault != "" {
		fmt.Fprintf(out, "FSM FAULT: %s (this node must be upgraded)\n", r.Fault)
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tVOTER\tLEADER\tZONE\tCAPACITY\tHTTP\tRAFT\tDATA")
	for _, m := range st.Members {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, dash(m.State), yesNo(m.Voter), star(m.Leader), dash(m.Zone), formatBytes(m.Capacity), dash(m.HTTPAddr), dash(m.RaftAddr), dash(m.DataAddr))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for i, d := range st.Drains {
		if i == 0 {
			fmt.Fprintln(out)
		}
		line := fmt.Sprintf("drain %s: %s left", d.ID, describeDrain(d))
		if d.Done {
			line = fmt.Sprintf("drain %s: done, nothing left on it", d.ID)
		}
		if d.Active {
			line += "; moved " + plural(int(d.MovedShards), "shard")
			if d.MovedBytes > 0 {
				line += " (" + formatBytes(int64(d.MovedBytes)) + ")"
			}
			if d.LostBlocks > 0 {
				line += fmt.Sprintf("; %s found on no holder (entry deleted)", plural(int(d.LostBlocks), "block"))
			}
			if d.Stuck > 0 {
				line += fmt.Sprintf("; %s stuck", plural(d.Stuck, "block"))
			}
			if d.Unreachable {
				line += "; not answering"
			}
		}
		fmt.Fprintln(out, line)
	}
	return nil
}

// printRepair prints the repair object's fields one per line (nested
// values as compact JSON), or the raw value when it is not an object.
func printRepair(out io.Writer, rep clusterapi.RepairResponse) error {
	fmt.Fprintf(out, "repair on node %s\n", rep.NodeID)
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(rep.Repair, &fields); err != nil {
		_, err := fmt.Fprintf(out, "%s\n", rep.Repair)
		return err
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	for _, k := range keys {
		v := string(fields[k])
		var s string
		if json.Unmarshal(fields[k], &s) == nil {
			v = s
		}
		fmt.Fprintf(tw, "  %s\t%s\n", k, v)
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func star(b bool) string {
	if b {
		return "*"
	}
	return ""
}

var byteUnits = []struct {
	suffix string
	n      int64
}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// formatBytes prints n in the largest binary unit that keeps it >= 1.
func formatBytes(n int64) string {
	if n <= 0 {
		return "-"
	}
	for _, u := range byteUnits {
		if n >= u.n {
			if n%u.n == 0 {
				return fmt.Sprintf("%d%s", n/u.n, u.suffix)
			}
			return fmt.Sprintf("%.1f%s", float64(n)/float64(u.n), u.suffix)
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// parseBytes reads "123", "123B" or an integer with a KiB/MiB/GiB/TiB suffix.
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	for _, u := range byteUnits {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
			if err != nil || v < 0 || v > (1<<62)/u.n {
				return 0, fmt.Errorf("bad size %q", s)
			}
			return v * u.n, nil
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, errors.New("bad size " + strconv.Quote(s) + " (want bytes, or a KiB/MiB/GiB/TiB suffix)")
	}
	return v, nil
}
