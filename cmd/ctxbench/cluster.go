package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxtier/ctxtier/cmd/internal/subcmd"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/client"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
	"github.com/ctxtier/ctxtier/internal/freeport"
)

func init() {
	register("cluster", "on a multi-node cluster: put/get MB/s of RS(2,1) vs one copy, and index commits per second", runCluster)
}

// clusterConfig is the cluster mode's flags.
type clusterConfig struct {
	Addrs            []string
	Start            bool
	Ctxd             string
	DRAMCapacity     string
	DRAMPrefault     bool
	BlockSize        int
	Blocks           int
	Rounds           int
	Concurrency      int
	IndexBlockSize   int
	IndexBlocks      int
	IndexConcurrency int
	// IndexBatch blocks per request in the index phase: above 1, the
	// phase puts native-protocol batches (NativeAddrs) and also measures
	// batches of 1 through the same path.
	IndexBatch  int
	NativeAddrs []string
	// IndexRoute sends each block of a native batch to its owner (the
	// member placement ranks first for it: client.Cluster), so no node
	// forwards a block it does not own; false sends batch j whole to
	// node j mod nodes.
	IndexRoute bool
	// Read is the read level of the get phases: linearizable (each get
	// sees every acknowledged put at once) or local (the bench first waits
	// until every node's index holds the blocks).
	Read string
	// ReadOps single-key exists requests per read level, ReadConcurrency
	// in flight, measure a linearizable read against a local one (0 skips).
	ReadOps         int
	ReadConcurrency int
	// Profile, with Start, is a directory for CPU profiles of every node
	// and of ctxbench, ProfileSeconds long, taken at the start of the
	// index phase's main run (nodeProfiler).
	Profile        string
	ProfileSeconds int
}

func parseClusterFlags(args []string, errOut io.Writer) (clusterConfig, error) {
	var c clusterConfig
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.SetOutput(errOut)
	var addrs, natives, size, isize string
	fs.StringVar(&addrs, "addrs", "127.0.0.1:7411,127.0.0.1:7421,127.0.0.1:7431", "HTTP API addresses of the nodes, comma-separated (the default is make cluster's); with one address, every alive member it lists is used")
	fs.BoolVar(&c.Start, "start", false, "start 3 ctxd processes on free 127.0.0.1 ports in a temporary directory, run against them, then stop them and delete the directory (--addrs is ignored)")
	fs.StringVar(&c.Ctxd, "ctxd", "", "ctxd binary for --start (default: the ctxd next to ctxbench, else ctxd on PATH)")
	fs.StringVar(&c.DRAMCapacity, "dram-capacity", "1GiB", "--dram-capacity of each node started by --start")
	fs.BoolVar(&c.DRAMPrefault, "dram-prefault", false, "start the nodes of --start with --dram-prefault (each populates its whole DRAM arena before it serves, so puts take no first-touch page faults)")
	fs.StringVar(&size, "block-size", "2MiB", "block size of the put/get phases")
	fs.IntVar(&c.Blocks, "blocks", 64, "blocks put, then read back, per round and namespace")
	fs.IntVar(&c.Rounds, "rounds", 3, "rounds; each puts and gets --blocks blocks in both namespaces (alternating which goes first), then deletes them")
	fs.IntVar(&c.Concurrency, "concurrency", 6, "requests in flight in the put/get phases, spread round-robin over the nodes")
	fs.StringVar(&isize, "index-block-size", "4KiB", "block size of the index commit phase")
	fs.IntVar(&c.IndexBlocks, "index-blocks", 4000, "one-copy blocks put in the index commit phase (0 skips it)")
	fs.IntVar(&c.IndexConcurrency, "index-concurrency", 64, "requests in flight in the index commit phase")
	fs.IntVar(&c.IndexBatch, "index-batch", 1, "blocks per request in the index commit phase: 1 puts single blocks over HTTP; N > 1 puts native-protocol batches of N blocks (one index commit each) and measures batches of 1 over the same protocol beside them")
	fs.BoolVar(&c.IndexRoute, "index-route", true, "with --index-batch above 1: send each block of a batch straight to its owner, the node placement ranks first for it (the Go client's cluster-aware client.Cluster; a batch is split into one request per owner, sent in parallel); false sends each batch whole to one node in turn, which forwards the blocks it does not own")
	fs.StringVar(&natives, "native-addrs", "127.0.0.1:7410,127.0.0.1:7420,127.0.0.1:7430", "native-protocol addresses of the nodes, in --addrs order, for --index-batch above 1 (ignored with --start)")
	fs.IntVar(&c.ReadOps, "read-ops", 4000, "single-key exists requests per read level in the read-level phase, which compares linearizable reads with local ones (0 skips it)")
	fs.IntVar(&c.ReadConcurrency, "read-concurrency", 32, "requests in flight in the read-level phase")
	fs.StringVar(&c.Read, "read", "linearizable", "read level of the get phases: linearizable (X-Ctxtier-Read: linearizable; gets start right after the puts) or local (each node's own index; the bench first waits, untimed, until every node has applied the puts)")
	fs.StringVar(&c.Profile, "profile", "", "with --start: start the nodes with --pprof-listen and write CPU profiles of every node and of ctxbench, taken at the start of the index phase's main run, to this directory")
	fs.IntVar(&c.ProfileSeconds, "profile-seconds", 5, "length of the --profile CPU profiles: keep it under the main run's duration (a window longer than the run also profiles the checks and deletes that follow it)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if c.BlockSize, err = parseSize(size); err != nil {
		return c, err
	}
	if c.IndexBlockSize, err = parseSize(isize); err != nil {
		return c, err
	}
	if _, err := parseSize(c.DRAMCapacity); err != nil {
		return c, fmt.Errorf("--dram-capacity: %w", err)
	}
	c.Addrs = subcmd.SplitList(addrs)
	c.NativeAddrs = subcmd.SplitList(natives)
	switch {
	case !c.Start && len(c.Addrs) == 0:
		return c, errors.New("--addrs names no address")
	case c.BlockSize < 8 || c.BlockSize > block.HardMaxBlockSize:
		return c, fmt.Errorf("--block-size %d out of range 8..%d", c.BlockSize, block.HardMaxBlockSize)
	case c.IndexBlockSize < 8 || c.IndexBlockSize > block.HardMaxBlockSize:
		return c, fmt.Errorf("--index-block-size %d out of range 8..%d", c.IndexBlockSize, block.HardMaxBlockSize)
	case c.Blocks < 1 || c.Rounds < 1:
		return c, errors.New("--blocks and --rounds must be at least 1")
	case c.Blocks*c.Rounds > 1<<24 || c.IndexBlocks > 1<<24:
		return c, errors.New("--blocks x --rounds and --index-blocks must stay under 16M")
	case c.IndexBlocks < 0:
		return c, errors.New("--index-blocks must not be negative")
	case c.Concurrency < 1 || c.Concurrency > 1024 || c.IndexConcurrency < 1 || c.IndexConcurrency > 1024:
		return c, errors.New("--concurrency and --index-concurrency must be in 1..1024")
	case c.ReadOps < 0 || c.ReadOps > 1<<24 || c.ReadConcurrency < 1 || c.ReadConcurrency > 1024:
		return c, errors.New("--read-ops must be in 0..16M and --read-concurrency in 1..1024")
	case c.IndexBatch < 1 || c.IndexBatch > 4096:
		return c, errors.New("--index-batch must be in 1..4096")
	case c.IndexBatch > 1 && !c.Start && len(c.NativeAddrs) == 0:
		return c, errors.New("--index-batch above 1 needs --native-addrs (or --start)")
	case c.Profile != "" && !c.Start:
		return c, errors.New("--profile needs --start")
	case c.ProfileSeconds < 1 || c.ProfileSeconds > 600:
		return c, errors.New("--profile-seconds must be in 1..600")
	case c.Read != "linearizable" && c.Read != "local":
		return c, fmt.Errorf("--read %q: want linearizable or local", c.Read)
	}
	return c, nil
}

func runCluster(ctx context.Context, args []string) error {
	return runParsed(ctx, args, parseClusterFlags, runClusterWith)
}

// benchNS is one of the two namespaces compared and what was measured in it.
type benchNS struct {
	name, label, desc string
	k, m              int
	put, get          opStat
}

// opStat accumulates one kind of operation over the rounds.
type opStat struct {
	ops   int
	bytes int64
	dur   time.Duration
}

func (s *opStat) add(ops, size int, d time.Duration) {
	s.ops += ops
	s.bytes += int64(ops) * int64(size)
	s.dur += d
}

// MBps is logical block bytes (not shard bytes) per second, in 10^6 bytes.
func (s opStat) MBps() float64 { return float64(s.bytes) / s.dur.Seconds() / 1e6 }
func (s opStat) OpsPerSec() float64 {
	return float64(s.ops) / s.dur.Seconds()
}

// clusterBench runs the cluster mode against a set of nodes.
type clusterBench struct {
	cfg      clusterConfig
	addrs    []string
	clients  []*client.HTTPClient
	natives  []*client.Client // native-protocol clients of the index phase (--index-batch above 1)
	owners   *client.Cluster  // --index-route: the cluster-aware client of the index phase
	profiler *nodeProfiler    // --profile: set by runClusterWith
	cpu      *cpuMeter        // the started nodes' CPU time (--start only)
	run      uint64           // the high 32 bits of every key hash of this run
	seq      uint32
	verified atomic.Int64
	progress io.Writer
}

func newBenchHTTPClient(addr string, conns int) (*client.HTTPClient, error) {
	cfg := client.HTTPDefaultConfig()
	cfg.BaseURL = "http://" + addr
	cfg.MaxIdleConnsPerHost = max(conns, 1)
	return client.NewHTTP(cfg)
}

// runClusterWith runs the whole mode and prints the results to out;
// progress gets one line per phase.
func runClusterWith(ctx context.Context, cfg clusterConfig, out, progress io.Writer) error {
	addrs := cfg.Addrs
	if cfg.Start {
		opts := clusterOptions{Ctxd: cfg.Ctxd, Nodes: 3, DRAM: cfg.DRAMCapacity, Prefault: cfg.DRAMPrefault}
		var prof *nodeProfiler
		if cfg.Profile != "" {
			if err := os.MkdirAll(cfg.Profile, 0o755); err != nil {
				return err
			}
			prof = &nodeProfiler{dir: cfg.Profile, seconds: cfg.ProfileSeconds}
			opts.Prepare = func(i int, _ string) ([]string, error) {
				addr, err := freeport.Pick()
				if err != nil {
					return nil, err
				}
				prof.ids = append(prof.ids, fmt.Sprintf("n%d", i+1))
				prof.addrs = append(prof.addrs, addr)
				return []string{"--pprof-listen", addr}, nil
			}
		}
		lc, err := startLocalClusterWith(ctx, opts, progress)
		if err != nil {
			return err
		}
		failed := true
		defer func() { lc.stop(progress, failed) }()
		addrs = lc.HTTPAddrs()
		cfg.NativeAddrs = lc.NativeAddrs()
		cpu := &cpuMeter{}
		for _, nd := range lc.nodes {
			cpu.pids = append(cpu.pids, nd.cmd.Process.Pid)
		}
		err = runClusterOn(ctx, cfg, addrs, prof, cpu, out, progress)
		failed = err != nil
		return err
	}
	return runClusterOn(ctx, cfg, addrs, nil, nil, out, progress)
}

func runClusterOn(ctx context.Context, cfg clusterConfig, addrs []string, prof *nodeProfiler, cpu *cpuMeter, out, progress io.Writer) error {
	if len(addrs) == 1 {
		st, err := clusterapi.NewClient(addrs[0]).Status(ctx)
		if err != nil {
			return fmt.Errorf("cluster status from %s: %w", addrs[0], err)
		}
		addrs = nil
		for _, m := range st.Members {
			if m.State == "alive" && m.HTTPAddr != "" {
				addrs = append(addrs, m.HTTPAddr)
			}
		}
	}
	b := &clusterBench{cfg: cfg, addrs: addrs, progress: progress, profiler: prof, cpu: cpu,
		run: (rand.Uint64() | 1<<63) &^ 0xffff_ffff}
	conns := max(cfg.Concurrency, cfg.IndexConcurrency)/len(addrs) + 2
	for _, a := range addrs {
		hc, err := newBenchHTTPClient(a, conns)
		if err != nil {
			return err
		}
		defer hc.Close()
		b.clients = append(b.clients, hc)
	}
	leader, err := b.leader(ctx)
	if err != nil {
		return err
	}
	one := &benchNS{name: "ctxbench-one-copy", label: "one_copy", desc: "one copy (k=1,m=0)", k: 1, m: 0}
	rs := &benchNS{name: "ctxbench-rs21", label: "rs21", desc: "RS(2,1) (k=2,m=1)", k: 2, m: 1}
	for _, ns := range []*benchNS{one, rs} {
		if err := b.ensureNamespace(ctx, ns); err != nil {
			return err
		}
	}
	big := newPayload(cfg.BlockSize, 1)
	// Warm-up, not measured: a connection per node and both namespaces' paths.
	for _, ns := range []*benchNS{one, rs} {
		if _, _, err := b.putGetDelete(ctx, ns, big, len(b.clients), len(b.clients)); err != nil {
			return fmt.Errorf("warm-up in %s: %w", ns.name, err)
		}
	}
	for r := range cfg.Rounds {
		order := []*benchNS{one, rs}
		if r%2 == 1 {
			order = []*benchNS{rs, one}
		}
		hashes := map[*benchNS][]uint64{}
		for _, ns := range order {
			hashes[ns] = b.hashes(cfg.Blocks)
		}
		phase := func(op string, stat func(*benchNS) *opStat, run func(context.Context, *benchNS, payload, []uint64, int) (time.Duration, error)) error {
			for _, ns := range order {
				d, err := run(ctx, ns, big, hashes[ns], cfg.Concurrency)
				if err != nil {
					return fmt.Errorf("round %d: %s in %s: %w", r+1, op, ns.name, err)
				}
				stat(ns).add(cfg.Blocks, cfg.BlockSize, d)
				fmt.Fprintf(progress, "round %d/%d: %-20s %s %d x %s in %v\n", r+1, cfg.Rounds, ns.desc, op, cfg.Blocks, block.FormatSize(int64(cfg.BlockSize)), d.Round(time.Millisecond))
			}
			return nil
		}
		if err := phase("put", func(ns *benchNS) *opStat { return &ns.put }, b.putAll); err != nil {
			return err
		}
		for _, ns := range order {
			if err := b.readyToRead(ctx, ns, hashes[ns]); err != nil {
				return fmt.Errorf("round %d: %w", r+1, err)
			}
		}
		if err := phase("get", func(ns *benchNS) *opStat { return &ns.get }, b.getAll); err != nil {
			return err
		}
		for _, ns := range order {
			if err := b.deleteAll(ctx, ns, hashes[ns], cfg.Concurrency); err != nil {
				return fmt.Errorf("round %d: delete in %s: %w", r+1, ns.name, err)
			}
		}
	}
	defer func() {
		for _, c := range b.natives {
			c.Close()
		}
		if b.owners != nil {
			b.owners.Close()
		}
	}()
	var idx *indexResult
	if cfg.IndexBlocks > 0 {
		if idx, err = b.indexPhase(ctx, one); err != nil {
			return err
		}
	}
	var rl *readLevelResult
	if cfg.ReadOps > 1 {
		if rl, err = b.readLevelPhase(ctx, one); err != nil {
			return err
		}
	}

	fmt.Fprintf(out, "cluster: nodes=%d leader=%s block=%d blocks=%d rounds=%d concurrency=%d read=%s loadavg=%q (HTTP API, requests round-robin over the nodes)\n",
		len(addrs), leader.ID, cfg.BlockSize, cfg.Blocks, cfg.Rounds, cfg.Concurrency, cfg.Read, loadAvg())
	for _, ns := range []*benchNS{one, rs} {
		fmt.Fprintf(out, "%-18s put %d in %.2fs: %.1f MB/s, %.1f ops/s; get %d in %.2fs: %.1f MB/s, %.1f ops/s\n", ns.desc,
			ns.put.ops, ns.put.dur.Seconds(), ns.put.MBps(), ns.put.OpsPerSec(), ns.get.ops, ns.get.dur.Seconds(), ns.get.MBps(), ns.get.OpsPerSec())
	}
	if idx != nil {
		idx.describe(out, cfg)
	}
	if rl != nil {
		rl.describe(out)
	}
	for _, ns := range []*benchNS{one, rs} {
		fmt.Fprintf(out, "%s_put_mb_s=%.1f\n%s_put_ops_s=%.1f\n%s_get_mb_s=%.1f\n%s_get_ops_s=%.1f\n",
			ns.label, ns.put.MBps(), ns.label, ns.put.OpsPerSec(), ns.label, ns.get.MBps(), ns.label, ns.get.OpsPerSec())
	}
	fmt.Fprintf(out, "ratio_rs21_vs_one_copy_put=%.3f\nratio_rs21_vs_one_copy_get=%.3f\n", rs.put.MBps()/one.put.MBps(), rs.get.MBps()/one.get.MBps())
	if idx != nil {
		idx.print(out)
	}
	if rl != nil {
		rl.print(out)
	}
	fmt.Fprintf(out, "verified_reads=%d\n", b.verified.Load())
	return nil
}

// leader returns the leader's record as the first node that knows it sees it.
func (b *clusterBench) leader(ctx context.Context) (clusterapi.Member, error) {
	var last error
	for _, a := range b.addrs {
		st, err := clusterapi.NewClient(a).Status(ctx)
		if err != nil {
			last = err
			continue
		}
		if st.Leader != nil {
			return *st.Leader, nil
		}
		last = fmt.Errorf("%s knows no leader", a)
	}
	return clusterapi.Member{}, fmt.Errorf("finding the leader: %w", last)
}

// ensureNamespace creates ns on the leader (a follower would forward it),
// retrying through leader changes for 30 s, and waits until every node
// serves it. An existing identical definition is fine.
func (b *clusterBench) ensureNamespace(ctx context.Context, ns *benchNS) error {
	def := block.Namespace{Name: ns.name, DataShards: ns.k, ParityShards: ns.m}
	deadline := time.Now().Add(30 * time.Second)
	for {
		leader, err := b.leader(ctx)
		if err == nil {
			var hc *client.HTTPClient
			if hc, err = newBenchHTTPClient(leader.HTTPAddr, 1); err == nil {
				var got block.Namespace
				got, err = hc.CreateNamespace(ctx, def)
				hc.Close()
				if err == nil && (got.DataShards != ns.k || got.ParityShards != ns.m) {
					return fmt.Errorf("namespace %s has k=%d m=%d, want k=%d m=%d", ns.name, got.DataShards, got.ParityShards, ns.k, ns.m)
				}
				if errors.Is(err, block.ErrNamespaceExists) {
					return fmt.Errorf("namespace %s exists with another definition (want k=%d m=%d): %w", ns.name, ns.k, ns.m, err)
				}
			}
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("creating namespace %s: %w", ns.name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for i, hc := range b.clients {
		for {
			_, err := hc.Namespace(ctx, ns.name)
			if err == nil {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("namespace %s on %s: %w", ns.name, b.addrs[i], err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// hashes returns n key hashes no earlier call of this run returned; the
// random high bits keep runs against the same cluster apart.
func (b *clusterBench) hashes(n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		b.seq++
		out[i] = b.run | uint64(b.seq)
	}
	return out
}

// each runs fn(ctx, c, i, buf) for i in [0, n) on conc workers, item i
// going to node i mod nodes; the first error stops the phase and is
// returned. Each worker owns a buffer of bufSize bytes. It returns the time
// from the first request to the last answer.
func (b *clusterBench) each(ctx context.Context, n, conc, bufSize int, fn func(ctx context.Context, c *client.HTTPClient, i int, buf []byte) error) (time.Duration, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	workers := min(conc, n)
	bufs := make([][]byte, workers)
	for w := range bufs {
		bufs[w] = make([]byte, bufSize)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(ctx, b.clients[i%len(b.clients)], i, bufs[w]); err != nil {
					cancel(fmt.Errorf("via %s: %w", b.addrs[i%len(b.addrs)], err))
					return
				}
			}
		})
	}
	wg.Wait()
	d := time.Since(start)
	return d, context.Cause(ctx)
}

func (b *clusterBench) putAll(ctx context.Context, ns *benchNS, p payload, hashes []uint64, conc int) (time.Duration, error) {
	sums := p.sums(hashes) // before the clock starts, as a client that has its sums would
	return b.each(ctx, len(hashes), conc, len(p.base), func(ctx context.Context, c *client.HTTPClient, i int, buf []byte) error {
		return c.Put(ctx, block.NewKey(ns.name, hashes[i]), p.fill(buf, hashes[i]), block.PutOptions{Sum: sums[i], HasSum: true})
	})
}

// getAll reads every block back and compares its bytes with what was put.
func (b *clusterBench) getAll(ctx context.Context, ns *benchNS, p payload, hashes []uint64, conc int) (time.Duration, error) {
	if b.cfg.Read == "linearizable" {
		ctx = client.WithLinearizable(ctx)
	}
	return b.each(ctx, len(hashes), conc, len(p.base), func(ctx context.Context, c *client.HTTPClient, i int, buf []byte) error {
		k := block.NewKey(ns.name, hashes[i])
		n, err := c.GetInto(ctx, k, buf)
		if err != nil {
			return err
		}
		if err := p.check(buf[:n], hashes[i]); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		b.verified.Add(1)
		return nil
	})
}

func (b *clusterBench) deleteAll(ctx context.Context, ns *benchNS, hashes []uint64, conc int) error {
	_, err := b.each(ctx, len(hashes), conc, 0, func(ctx context.Context, c *client.HTTPClient, i int, _ []byte) error {
		if err := c.Delete(ctx, block.NewKey(ns.name, hashes[i])); err != nil && !errors.Is(err, block.ErrNotFound) {
			return err
		}
		return nil
	})
	return err
}

// putGetDelete puts n blocks, reads them back and deletes them.
func (b *clusterBench) putGetDelete(ctx context.Context, ns *benchNS, p payload, n, conc int) (put, get time.Duration, err error) {
	hashes := b.hashes(n)
	if put, err = b.putAll(ctx, ns, p, hashes, conc); err != nil {
		return put, 0, err
	}
	if err = b.readyToRead(ctx, ns, hashes); err != nil {
		return put, 0, err
	}
	if get, err = b.getAll(ctx, ns, p, hashes, conc); err != nil {
		return put, get, err
	}
	return put, get, b.deleteAll(ctx, ns, hashes, conc)
}

// payload is the bench's block content: block h is one shared random base
// with h stamped into its first 8 bytes, so every block differs and a read
// is checked against what was put without keeping each block.
type payload struct{ base []byte }

func newPayload(size int, seed uint64) payload {
	r := rand.New(rand.NewPCG(seed, uint64(size)))
	p := payload{base: make([]byte, size)}
	for i := 0; i+8 <= size; i += 8 {
		binary.LittleEndian.PutUint64(p.base[i:], r.Uint64())
	}
	return p
}

// fill writes block h into buf and returns it.
func (p payload) fill(buf []byte, h uint64) []byte {
	b := buf[:len(p.base)]
	copy(b, p.base)
	binary.LittleEndian.PutUint64(b, h)
	return b
}

// check reports whether got is exactly block h.
func (p payload) check(got []byte, h uint64) error {
	switch {
	case len(got) != len(p.base):
		return fmt.Errorf("read %d bytes, put %d", len(got), len(p.base))
	case binary.LittleEndian.Uint64(got) != h:
		return fmt.Errorf("read the bytes of block %016x", binary.LittleEndian.Uint64(got))
	case !bytes.Equal(got[8:], p.base[8:]):
		i := 8
		for got[i] == p.base[i] {
			i++
		}
		return fmt.Errorf("read bytes differ from the put's at offset %d", i)
	}
	return nil
}

// sums returns the CRC-32C of each block.
func (p payload) sums(hashes []uint64) []uint32 {
	buf := make([]byte, len(p.base))
	out := make([]uint32, len(hashes))
	for i, h := range hashes {
		out[i] = block.Checksum(p.fill(buf, h))
	}
	return out
}

// promSamples reads the samples of Prometheus text whose metric name is
// name (without labels or with them) and whose labels contain label; it
// returns their sum and whether there was any.
func promSamples(text, name, label string) (float64, bool) {
	var sum float64
	found := false
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest == "" || rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		if label != "" && !strings.Contains(rest, label) {
			continue
		}
		f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	return sum, found
}

// fetchMetrics returns the text of a node's /metrics.
func fetchMetrics(ctx context.Context, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s/metrics: %s", addr, resp.Status)
	}
	return string(body), nil
}
