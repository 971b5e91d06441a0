package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ctxtier/ctxtier/gateway/client"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
	"github.com/ctxtier/ctxtier/internal/clustersecret"
	"github.com/ctxtier/ctxtier/internal/freeport"
)

// localCluster is a cluster of real ctxd processes that `ctxbench cluster
// --start` runs on free 127.0.0.1 ports, with data and logs in a temporary
// directory.
type localCluster struct {
	dir   string
	nodes []*localNode
}

type localNode struct {
	id, http, native, log string
	// s3 is the node's S3 endpoint (empty unless clusterOptions.S3).
	s3      string
	cmd     *exec.Cmd
	exited  chan struct{}
	exitErr error
}

// NativeAddrs are the nodes' native-protocol addresses.
func (lc *localCluster) NativeAddrs() []string {
	out := make([]string, len(lc.nodes))
	for i, n := range lc.nodes {
		out[i] = n.native
	}
	return out
}

// HTTPAddrs are the nodes' HTTP API addresses.
func (lc *localCluster) HTTPAddrs() []string {
	out := make([]string, len(lc.nodes))
	for i, n := range lc.nodes {
		out[i] = n.http
	}
	return out
}

// findCtxd returns path when set, else the ctxd next to this executable,
// else ctxd on PATH.
func findCtxd(path string) (string, error) {
	if path != "" {
		return path, nil
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "ctxd")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath("ctxd")
	if err != nil {
		return "", fmt.Errorf("no ctxd binary next to ctxbench or on PATH (build it with make build, or pass --ctxd): %w", err)
	}
	return p, nil
}

// freePorts returns n distinct 127.0.0.1 addresses that were free a moment
// ago, below the kernel's ephemeral range (internal/freeport: a port the
// kernel offered for ":0" is one it may hand the next outgoing connection).
// Raft needs its address before it listens, so ctxd cannot take port 0.
func freePorts(n int) ([]string, error) {
	out := make([]string, n)
	for i := range out {
		addr, err := freeport.Pick()
		if err != nil {
			return nil, err
		}
		out[i] = addr
	}
	return out, nil
}

// clusterOptions says how startLocalClusterWith starts its nodes.
type clusterOptions struct {
	Ctxd  string
	Nodes int
	DRAM  string
	// Prefault starts every node with --dram-prefault.
	Prefault bool
	// Dir is where the cluster's temporary directory is made (empty: $TMPDIR).
	Dir string
	// S3 serves each node's S3 endpoint on a free port (localNode.s3).
	S3 bool
	// Prepare, when set, runs for each node before it starts, with its
	// data directory, and returns extra ctxd arguments.
	Prepare func(i int, dataDir string) ([]string, error)
}

// startLocalClusterWith starts o.Nodes ctxd processes (join-or-bootstrap,
// as scripts/cluster.sh does) and waits until every one is ready and an
// alive voter. Stop it with stop, also after an error.
func startLocalClusterWith(ctx context.Context, o clusterOptions, progress io.Writer) (*localCluster, error) {
	n := o.Nodes
	bin, err := findCtxd(o.Ctxd)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(o.Dir, "ctxbench-cluster-")
	if err != nil {
		return nil, err
	}
	lc := &localCluster{dir: dir}
	ports, err := freePorts(5 * n)
	if err != nil {
		lc.stop(progress, false)
		return nil, err
	}
	var joins []string
	for i := range n {
		joins = append(joins, ports[5*i+1])
	}
	// Every node needs the cluster's secret: draw one for this run.
	secret, err := clustersecret.Generate()
	if err != nil {
		lc.stop(progress, false)
		return nil, err
	}
	zones := []string{"zone-a", "zone-b", "zone-c"}
	for i := range n {
		nd := &localNode{id: fmt.Sprintf("n%d", i+1), http: ports[5*i+1], native: ports[5*i], exited: make(chan struct{})}
		data := filepath.Join(dir, nd.id)
		if err := os.MkdirAll(data, 0o755); err != nil {
			lc.stop(progress, false)
			return nil, err
		}
		if o.S3 {
			nd.s3 = ports[5*i+4]
		}
		var extra []string
		if o.Prefault {
			extra = append(extra, "--dram-prefault")
		}
		if o.Prepare != nil {
			more, err := o.Prepare(i, data)
			if err != nil {
				lc.stop(progress, false)
				return nil, err
			}
			extra = append(extra, more...)
		}
		nd.log = filepath.Join(data, "ctxd.log")
		logf, err := os.Create(nd.log)
		if err != nil {
			lc.stop(progress, false)
			return nil, err
		}
		args := []string{"--node-id", nd.id,
			"--listen", ports[5*i], "--http-listen", nd.http,
			"--raft-listen", ports[5*i+2], "--peer-listen", ports[5*i+3],
			"--s3-admin-listen", nd.s3, "--resp-listen", "", "--data-dir", data, "--zone", zones[i%len(zones)],
			"--dram-capacity", o.DRAM, "--log-level", "warn",
			"--join", strings.Join(joins, ","), "--bootstrap-expect", fmt.Sprint(n), "--cluster-secret", secret}
		nd.cmd = exec.Command(bin, append(args, extra...)...)
		nd.cmd.Stdout, nd.cmd.Stderr = logf, logf
		err = nd.cmd.Start()
		logf.Close() // the child holds its own descriptor
		if err != nil {
			lc.stop(progress, false)
			return nil, fmt.Errorf("starting %s: %w", bin, err)
		}
		go func() {
			nd.exitErr = nd.cmd.Wait()
			close(nd.exited)
		}()
		lc.nodes = append(lc.nodes, nd)
	}
	fmt.Fprintf(progress, "started %d ctxd processes (%s), data and logs in %s\n", n, bin, dir)
	if err := lc.waitUp(ctx, 60*time.Second); err != nil {
		lc.stop(progress, true)
		return nil, err
	}
	return lc, nil
}

// waitUp waits until every node answers /readyz and the first node's
// status shows a leader and every node as an alive voter.
func (lc *localCluster) waitUp(ctx context.Context, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	hcs := make([]*client.HTTPClient, len(lc.nodes))
	for i, nd := range lc.nodes {
		hc, err := newBenchHTTPClient(nd.http, 1)
		if err != nil {
			return err
		}
		defer hc.Close()
		hcs[i] = hc
	}
	var last error
	for {
		for _, nd := range lc.nodes {
			select {
			case <-nd.exited:
				return fmt.Errorf("%s exited while starting: %v (log: %s)", nd.id, nd.exitErr, nd.log)
			default:
			}
		}
		if last = lc.up(ctx, hcs); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("local cluster not up after %v: %v", d, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (lc *localCluster) up(ctx context.Context, hcs []*client.HTTPClient) error {
	for i, hc := range hcs {
		if err := hc.Ready(ctx); err != nil {
			return fmt.Errorf("%s: %w", lc.nodes[i].id, err)
		}
	}
	st, err := clusterapi.NewClient(lc.nodes[0].http).Status(ctx)
	if err != nil {
		return err
	}
	if st.Leader == nil {
		return errors.New("no leader yet")
	}
	alive := 0
	for _, m := range st.Members {
		if m.State == "alive" && m.Voter {
			alive++
		}
	}
	if alive != len(lc.nodes) {
		return fmt.Errorf("%d of %d members alive and voting", alive, len(lc.nodes))
	}
	return nil
}

// stop sends SIGTERM to every node, SIGKILL to those still running 10 s
// later, and deletes the directory; with showLogs it first prints the end
// of each node's log (after a failure).
func (lc *localCluster) stop(progress io.Writer, showLogs bool) {
	for _, nd := range lc.nodes {
		nd.cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, nd := range lc.nodes {
		select {
		case <-nd.exited:
		case <-time.After(time.Until(deadline)):
			nd.cmd.Process.Kill()
			<-nd.exited
		}
	}
	if showLogs {
		for _, nd := range lc.nodes {
			b, _ := os.ReadFile(nd.log)
			if len(b) > 4096 {
				b = b[len(b)-4096:]
			}
			fmt.Fprintf(progress, "--- %s log (end) ---\n%s\n", nd.id, b)
		}
	}
	os.RemoveAll(lc.dir)
}
