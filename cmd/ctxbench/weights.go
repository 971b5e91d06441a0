package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/internal/freeport"
	"github.com/ctxtier/ctxtier/internal/weights"
)

func init() {
	register("weights", "a checkpoint pulled by concurrent workers from a 3-node cluster: GB/s vs raw loopback TCP, lower-tier bytes per served byte, time to the last complete checkpoint vs versitygw", runWeights)
}

// weightsConfig is the weights mode's flags.
type weightsConfig struct {
	Start        bool
	Ctxd         string
	Versitygw    string
	Size         int64
	Files        int
	Pullers      int
	Parallel     int
	ChunkSize    int64
	DRAMCapacity string
	NVMeCapacity string
	DataShards   int
	ParityShards int
	// Route sends each worker's ranged GETs to the nodes holding their
	// blocks (weights.Config.Route); off, every GET goes through the
	// worker's first node.
	Route bool
	// Join lets each worker join the others' stream (weights.Config.Join).
	Join bool
	// Late starts the last worker this long after the others (tier and
	// versitygw pulls alike), to measure a pull that joins a running
	// stream.
	Late time.Duration
	// Direct gives every worker the nodes' native addresses
	// (weights.Config.Direct): the workers run on the nodes' machine, and
	// whole blocks in a node's DRAM are copied out of its memory file by
	// descriptor instead of over S3.
	Direct bool
	// Verify is the digest the workers check every chunk with
	// (weights.Config.Verify).
	Verify string
	// Dir holds the checkpoint, the versitygw bucket and the nodes' data
	// (default: the system's temporary directory).
	Dir string
	// Profile is a directory for CPU profiles of every node and of
	// ctxbench (the pullers), ProfileSeconds long, taken from the start of
	// the tier pull (nodeProfiler).
	Profile        string
	ProfileSeconds int
}

func parseWeightsFlags(args []string, errOut io.Writer) (weightsConfig, error) {
	var c weightsConfig
	fs := flag.NewFlagSet("weights", flag.ContinueOnError)
	fs.SetOutput(errOut)
	var size, chunk string
	fs.BoolVar(&c.Start, "start", false, "start 3 ctxd processes (S3 endpoints, NVMe tiers) and a versitygw on free 127.0.0.1 ports in a temporary directory, run against them, then stop them and delete it (required: the mode always runs its own nodes)")
	fs.StringVar(&c.Ctxd, "ctxd", "", "ctxd binary (default: the ctxd next to ctxbench, else ctxd on PATH)")
	fs.StringVar(&c.Versitygw, "versitygw", "", "versitygw binary (default: $CTXTIER_VERSITYGW, else the one scripts/versitygw.sh install caches)")
	fs.StringVar(&size, "size", "8GiB", "checkpoint size (synthetic safetensors files)")
	fs.IntVar(&c.Files, "files", 2, "safetensors files the checkpoint is split into")
	fs.IntVar(&c.Pullers, "pullers", 4, "concurrent workers, each reading the whole checkpoint through its own node's S3 endpoint (worker i: node i mod 3, the others after it for failover)")
	fs.IntVar(&c.Parallel, "parallel", 4, "ranged GETs in flight per worker")
	fs.StringVar(&chunk, "chunk-size", "16MiB", "bytes per ranged GET (and per checksum)")
	fs.StringVar(&c.DRAMCapacity, "dram-capacity", "256MiB", "--dram-capacity of each node: under the checkpoint's share per node, most of it is read from NVMe (an NVMe-resident run); over it, from DRAM")
	fs.StringVar(&c.NVMeCapacity, "nvme-capacity", "12GiB", "--nvme-capacity of each node (its segment files live in the run's directory)")
	fs.IntVar(&c.DataShards, "data-shards", 1, "erasure code of the weights namespace: data shards")
	fs.IntVar(&c.ParityShards, "parity-shards", 0, "erasure code of the weights namespace: parity shards")
	fs.BoolVar(&c.Route, "route", true, "send each ranged GET to the node that holds its blocks (GetObjectLocations); false: every GET through the worker's own node, which reads the blocks it does not hold from their holders")
	fs.BoolVar(&c.Join, "join", true, "let each worker join a stream already running: start inside the longest run of chunks the nodes hold in DRAM (weights.Config.Join); false: every worker starts at the first chunk")
	fs.DurationVar(&c.Late, "late", 0, "start the last worker this long after the others (0: all at once); the tier's and versitygw's pulls alike")
	fs.BoolVar(&c.Direct, "direct", false, "co-located workers: copy whole blocks in a node's DRAM out of its memory file by descriptor (weights.Config.Direct) instead of over S3; the baselines are unchanged")
	fs.StringVar(&c.Verify, "verify", weights.VerifyXXH3, "digest every chunk is checked with: xxh3 (the manifest's XXH3-128) or sha256")
	fs.StringVar(&c.Dir, "dir", "", "directory for the checkpoint, versitygw's bucket and the nodes' data (default: $TMPDIR)")
	fs.StringVar(&c.Profile, "profile", "", "start the nodes with --pprof-listen and write CPU profiles of every node (n1.pprof...) and of ctxbench, the pullers (ctxbench.pprof), taken from the start of the tier pull, to this directory")
	fs.IntVar(&c.ProfileSeconds, "profile-seconds", 5, "length of the --profile CPU profiles (keep it under the tier pull's duration)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if c.Size, err = block.ParseSize(size); err != nil {
		return c, fmt.Errorf("--size: %w", err)
	}
	if c.ChunkSize, err = block.ParseSize(chunk); err != nil {
		return c, fmt.Errorf("--chunk-size: %w", err)
	}
	for _, s := range []string{c.DRAMCapacity, c.NVMeCapacity} {
		if _, err := block.ParseSize(s); err != nil {
			return c, fmt.Errorf("capacity %q: %w", s, err)
		}
	}
	switch {
	case !c.Start:
		return c, errors.New("--start is required: the mode runs its own three nodes and versitygw")
	case c.Files < 1 || c.Files > 1000:
		return c, errors.New("--files must be in 1..1000")
	case c.Size < int64(c.Files)<<20:
		return c, errors.New("--size must be at least 1 MiB per file")
	case c.Pullers < 1 || c.Pullers > 64:
		return c, errors.New("--pullers must be in 1..64")
	case c.Parallel < 1 || c.Parallel > 64:
		return c, errors.New("--parallel must be in 1..64")
	case c.DataShards < 1 || c.ParityShards < 0 || c.DataShards+c.ParityShards > 3:
		return c, errors.New("--data-shards + --parity-shards must be in 1..3 (three nodes)")
	case c.Late < 0 || c.Late > 10*time.Minute:
		return c, errors.New("--late must be in 0..10m")
	case c.ProfileSeconds < 1 || c.ProfileSeconds > 600:
		return c, errors.New("--profile-seconds must be in 1..600")
	}
	wc := weights.DefaultConfig()
	wc.ChunkSize, wc.Verify = c.ChunkSize, c.Verify
	if err := wc.Validate(); err != nil {
		return c, fmt.Errorf("--chunk-size or --verify: %w", err)
	}
	return c, nil
}

func runWeights(ctx context.Context, args []string) error {
	return runParsed(ctx, args, parseWeightsFlags, runWeightsWith)
}

// weightsResult is what one run measured.
type weightsResult struct {
	size               int64
	push               time.Duration
	tier, raw, vgw     time.Duration // to the last worker's complete checkpoint
	lowerBytes, served float64
	// readLocal, readRemote and readDecoded are the bytes of the blocks
	// the nodes served from their own tiers, fetched from a peer, and
	// decoded from erasure shards (ctxtier_cluster_read_bytes_total).
	readLocal, readRemote, readDecoded float64
	lowerByNode                        []string
	promotions, direct, shared         float64
	nvmeReads, s3Reads                 float64
	workerTier, workerVGW              []time.Duration
	// descBytes is what the tier's workers copied by descriptor (Direct).
	descBytes float64
	// cpuNodes and cpuBench are the CPU time (user + system) the three
	// nodes and ctxbench (the pullers) used during the tier pull.
	cpuNodes, cpuBench time.Duration
	// cpuRaw is ctxbench's CPU time (both ends) in the raw TCP phase.
	cpuRaw time.Duration
}

// The weights namespace and the model the bench pushes.
const (
	weightsNS    = "weights"
	weightsModel = "ctxbench/synthetic"
)

// runWeightsWith runs the whole mode and prints one result line to out;
// progress gets a line per phase.
func runWeightsWith(ctx context.Context, cfg weightsConfig, out, progress io.Writer) error {
	vgwBin, err := findVersitygw(cfg.Versitygw)
	if err != nil {
		return err
	}
	root, err := os.MkdirTemp(cfg.Dir, "ctxbench-weights-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	ckpt := filepath.Join(root, "checkpoint")
	if err := os.MkdirAll(ckpt, 0o755); err != nil {
		return err
	}
	var res weightsResult
	t0 := time.Now()
	if res.size, err = writeSafetensors(ckpt, cfg.Size, cfg.Files); err != nil {
		return err
	}
	fmt.Fprintf(progress, "weights: wrote a %s safetensors checkpoint (%d files) in %v\n", block.FormatSize(res.size), cfg.Files, time.Since(t0).Round(time.Millisecond))

	// One S3 key for every node: key files are per node, so they are made
	// once and copied into each node's data directory before it starts.
	seed := filepath.Join(root, "keys")
	keys, err := credential.OpenFile(credential.DefaultConfig(seed))
	if err != nil {
		return err
	}
	key, err := keys.Create(ctx, []string{credential.ScopeAll}, "ctxbench weights")
	if err != nil {
		return err
	}
	var prof *nodeProfiler
	if cfg.Profile != "" {
		if err := os.MkdirAll(cfg.Profile, 0o755); err != nil {
			return err
		}
		prof = &nodeProfiler{dir: cfg.Profile, seconds: cfg.ProfileSeconds}
	}
	lc, err := startLocalClusterWith(ctx, clusterOptions{
		Ctxd: cfg.Ctxd, Nodes: 3, DRAM: cfg.DRAMCapacity, S3: true, Dir: root,
		Prepare: func(i int, data string) ([]string, error) {
			for _, f := range []string{credential.FileName, credential.NodeKeyFile} {
				b, err := os.ReadFile(filepath.Join(seed, f))
				if err != nil {
					return nil, err
				}
				if err := os.WriteFile(filepath.Join(data, f), b, 0o600); err != nil {
					return nil, err
				}
			}
			extra := []string{"--nvme-capacity", cfg.NVMeCapacity}
			if prof != nil {
				addr, err := freeport.Pick()
				if err != nil {
					return nil, err
				}
				prof.ids = append(prof.ids, fmt.Sprintf("n%d", i+1))
				prof.addrs = append(prof.addrs, addr)
				extra = append(extra, "--pprof-listen", addr)
			}
			return extra, nil
		},
	}, progress)
	if err != nil {
		return err
	}
	defer lc.stop(progress, false)
	vgw, err := startVersity(ctx, vgwBin, filepath.Join(root, "versitygw"), filepath.Join(root, "versitygw.log"))
	if err != nil {
		return err
	}
	defer vgw.stop()

	hc, err := newBenchHTTPClient(lc.nodes[0].http, 1)
	if err != nil {
		return err
	}
	defer hc.Close()
	if _, err := hc.CreateNamespace(ctx, block.Namespace{Name: weightsNS, Kind: block.KindObject,
		DataShards: cfg.DataShards, ParityShards: cfg.ParityShards}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", weightsNS, err)
	}
	tierCfg := func(endpoints []string) weights.Config {
		wc := weights.DefaultConfig()
		wc.Endpoints, wc.AccessKey, wc.Secret = endpoints, key.AccessKeyID, key.Secret
		wc.Namespace, wc.ChunkSize, wc.Parallel, wc.Route, wc.Verify = weightsNS, cfg.ChunkSize, cfg.Parallel, cfg.Route, cfg.Verify
		wc.Join = cfg.Join
		return wc
	}
	vgwCfg := tierCfg([]string{vgw.addr})
	vgwCfg.AccessKey, vgwCfg.Secret = versityAccess, versitySecret

	// Push: into the tier through node 1, and into versitygw.
	t0 = time.Now()
	if err := push(ctx, tierCfg([]string{lc.nodes[0].s3}), ckpt); err != nil {
		return err
	}
	res.push = time.Since(t0)
	fmt.Fprintf(progress, "weights: pushed to the tier in %v (%.2f GB/s)\n", res.push.Round(time.Millisecond), float64(res.size)/res.push.Seconds()/1e9)
	if err := push(ctx, vgwCfg, ckpt); err != nil {
		return fmt.Errorf("versitygw: %w", err)
	}

	// Every node serves the manifest (written last) before the workers
	// start: a worker's first read goes to its own node, and routing asks
	// every node which member it is through it.
	for _, nd := range lc.nodes {
		if err := waitManifest(ctx, tierCfg([]string{nd.s3})); err != nil {
			return fmt.Errorf("%s: %w", nd.id, err)
		}
	}

	// The workers, through the tier: worker i starts at node i mod 3.
	before, err := lowerTierSnapshot(ctx, lc)
	if err != nil {
		return err
	}
	cfgs := make([]weights.Config, cfg.Pullers)
	for i := range cfgs {
		var eps []string
		for j := range lc.nodes {
			eps = append(eps, lc.nodes[(i+j)%len(lc.nodes)].s3)
		}
		cfgs[i] = tierCfg(eps)
		if cfg.Direct {
			for j := range lc.nodes {
				cfgs[i].Direct = append(cfgs[i].Direct, lc.nodes[(i+j)%len(lc.nodes)].native)
			}
		}
	}
	cpu := &cpuMeter{}
	for _, nd := range lc.nodes {
		cpu.pids = append(cpu.pids, nd.cmd.Process.Pid)
	}
	cpu0 := cpu.sample()
	waitProf := prof.start(ctx, progress)
	if res.tier, res.workerTier, res.descBytes, err = pullAll(ctx, cfgs, res.size, cfg.Late); err != nil {
		return err
	}
	cpu1 := cpu.sample()
	if err := errors.Join(cpu0.err, cpu1.err); err != nil {
		return err
	}
	res.cpuNodes, res.cpuBench = cpu1.nodes-cpu0.nodes, cpu1.bench-cpu0.bench
	if err := waitProf(); err != nil {
		return err
	}
	after, err := lowerTierSnapshot(ctx, lc)
	if err != nil {
		return err
	}
	res.served = float64(res.size) * float64(cfg.Pullers)
	for i := range after {
		d := after[i].minus(before[i])
		res.nvmeReads += d.nvme
		res.s3Reads += d.s3
		res.promotions += d.promotions
		res.direct += d.direct
		res.shared += d.shared
		res.readLocal += d.local
		res.readRemote += d.remote
		res.readDecoded += d.decoded
		res.lowerByNode = append(res.lowerByNode, fmt.Sprintf("%s=%s", lc.nodes[i].id, block.FormatSize(int64(d.nvme+d.s3))))
	}
	res.lowerBytes = res.nvmeReads + res.s3Reads
	fmt.Fprintf(progress, "weights: %d workers through the tier: last complete after %v\n", cfg.Pullers, res.tier.Round(time.Millisecond))

	// The same bytes over raw loopback TCP, same number of streams.
	raw0 := cpu.sample()
	if res.raw, err = rawTCP(ctx, res.size*int64(cfg.Pullers), cfg.Pullers*cfg.Parallel, int(cfg.ChunkSize)); err != nil {
		return err
	}
	raw1 := cpu.sample()
	if err := errors.Join(raw0.err, raw1.err); err != nil {
		return err
	}
	res.cpuRaw = raw1.bench - raw0.bench
	fmt.Fprintf(progress, "weights: raw loopback TCP, %d streams: %v\n", cfg.Pullers*cfg.Parallel, res.raw.Round(time.Millisecond))

	// Each worker reading the checkpoint from versitygw directly.
	for i := range cfgs {
		cfgs[i] = vgwCfg
	}
	if res.vgw, res.workerVGW, _, err = pullAll(ctx, cfgs, res.size, cfg.Late); err != nil {
		return fmt.Errorf("versitygw: %w", err)
	}
	fmt.Fprintf(progress, "weights: %d workers from versitygw: last complete after %v\n", cfg.Pullers, res.vgw.Round(time.Millisecond))
	res.print(out, cfg)
	return nil
}

func push(ctx context.Context, wc weights.Config, dir string) error {
	c, err := weights.New(wc)
	if err != nil {
		return err
	}
	_, err = c.Push(ctx, dir, weightsModel, nil)
	return err
}

// waitManifest waits (30 s at most) until the endpoint of wc serves the
// model's manifest: a node's index may be a moment behind the leader's
// after a push.
func waitManifest(ctx context.Context, wc weights.Config) error {
	c, err := weights.New(wc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		_, err := c.Manifest(ctx, weightsModel)
		if err == nil || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("manifest of %s: %w", weightsModel, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// pullAll starts one Stream per config at once, the last one late after
// the others (every chunk verified against the manifest's digest, the
// bytes then dropped) and returns the time from the first start until the
// last one completed, each one's time and the bytes they copied by
// descriptor.
func pullAll(ctx context.Context, cfgs []weights.Config, size int64, late time.Duration) (time.Duration, []time.Duration, float64, error) {
	clients := make([]*weights.Client, len(cfgs))
	for i, wc := range cfgs {
		c, err := weights.New(wc)
		if err != nil {
			return 0, nil, 0, err
		}
		defer c.Close()
		clients[i] = c
	}
	each := make([]time.Duration, len(cfgs))
	errs := make([]error, len(cfgs))
	var desc atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if late > 0 && i == len(clients)-1 && len(clients) > 1 {
				select {
				case <-time.After(late):
				case <-ctx.Done():
					errs[i] = ctx.Err()
					return
				}
			}
			st, err := c.Stream(ctx, weightsModel, nil, nil)
			each[i] = time.Since(start)
			desc.Add(st.BytesDirect)
			if err == nil && st.BytesFetched != size {
				err = fmt.Errorf("worker %d fetched %d bytes, want %d", i, st.BytesFetched, size)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	last := time.Since(start)
	return last, each, float64(desc.Load()), errors.Join(errs...)
}

func (r *weightsResult) print(out io.Writer, cfg weightsConfig) {
	gbs := func(d time.Duration) float64 { return r.served / d.Seconds() / 1e9 }
	fmt.Fprintf(out, "weights: size=%s files=%d pullers=%d parallel=%d chunk=%s dram=%s code=k%d+m%d route=%v join=%v late_s=%.1f direct=%v descriptor_bytes_share=%.3f verify=%s "+
		"tier_gb_s=%.3f raw_tcp_gb_s=%.3f ratio_vs_raw_tcp=%.3f "+
		"lower_tier_bytes_per_served_byte=%.3f lower_tier_bytes_per_checkpoint_byte=%.3f lower_tier_bytes=%s (nvme=%s s3=%s; %v) promotions=%.0f promotions_direct=%.0f shared_reads=%.0f "+
		"last_complete_s=%.2f versitygw_last_complete_s=%.2f speedup_vs_versitygw=%.3f push_gb_s=%.3f "+
		"node_cpu_s_per_gb=%.3f puller_cpu_s_per_gb=%.3f raw_tcp_cpu_s_per_gb=%.3f "+
		"local_read_share=%.3f peer_read_bytes_per_served_byte=%.3f\n",
		block.FormatSize(r.size), cfg.Files, cfg.Pullers, cfg.Parallel, block.FormatSize(cfg.ChunkSize), cfg.DRAMCapacity, cfg.DataShards, cfg.ParityShards, cfg.Route, cfg.Join, cfg.Late.Seconds(), cfg.Direct, r.descBytes/r.served, cfg.Verify,
		gbs(r.tier), gbs(r.raw), r.raw.Seconds()/r.tier.Seconds(),
		r.lowerBytes/r.served, r.lowerBytes/float64(r.size), block.FormatSize(int64(r.lowerBytes)), block.FormatSize(int64(r.nvmeReads)), block.FormatSize(int64(r.s3Reads)), r.lowerByNode,
		r.promotions, r.direct, r.shared,
		r.tier.Seconds(), r.vgw.Seconds(), r.vgw.Seconds()/r.tier.Seconds(), float64(r.size)/r.push.Seconds()/1e9,
		r.cpuNodes.Seconds()/(r.served/1e9), r.cpuBench.Seconds()/(r.served/1e9), r.cpuRaw.Seconds()/(r.served/1e9),
		r.readLocal/max(1, r.readLocal+r.readRemote+r.readDecoded), (r.readRemote+r.readDecoded)/r.served)
}

// lowerTierCounters are one node's counters of reads below DRAM, and of
// the bytes of the blocks it served by path (its own tiers, a peer,
// decoded).
type lowerTierCounters struct {
	nvme, s3, promotions, direct, shared float64
	local, remote, decoded               float64
}

func (a lowerTierCounters) minus(b lowerTierCounters) lowerTierCounters {
	return lowerTierCounters{a.nvme - b.nvme, a.s3 - b.s3, a.promotions - b.promotions, a.direct - b.direct, a.shared - b.shared,
		a.local - b.local, a.remote - b.remote, a.decoded - b.decoded}
}

// lowerTierSnapshot reads every node's /metrics: bytes its NVMe and S3
// tiers read from their media (ctxtier_tier_read_bytes_total), promotions
// into DRAM (and those read straight into DRAM's pages) and reads that shared another's lower-tier read.
func lowerTierSnapshot(ctx context.Context, lc *localCluster) ([]lowerTierCounters, error) {
	out := make([]lowerTierCounters, len(lc.nodes))
	for i, nd := range lc.nodes {
		text, err := fetchMetrics(ctx, nd.http)
		if err != nil {
			return nil, err
		}
		var ok bool
		if out[i].nvme, ok = promSamples(text, "ctxtier_tier_read_bytes_total", `tier="nvme"`); !ok {
			return nil, fmt.Errorf("%s: no ctxtier_tier_read_bytes_total{tier=\"nvme\"} in /metrics", nd.id)
		}
		out[i].s3, _ = promSamples(text, "ctxtier_tier_read_bytes_total", `tier="s3"`) // no S3 tier: none
		out[i].promotions, _ = promSamples(text, "ctxtier_tiers_promotions_total", "")
		out[i].direct, _ = promSamples(text, "ctxtier_tiers_promotions_direct_total", "")
		out[i].shared, _ = promSamples(text, "ctxtier_tiers_shared_reads_total", "")
		for _, c := range []struct {
			v    *float64
			path string
		}{{&out[i].local, "local"}, {&out[i].remote, "remote"}, {&out[i].decoded, "decoded"}} {
			if *c.v, ok = promSamples(text, "ctxtier_cluster_read_bytes_total", `path="`+c.path+`"`); !ok {
				return nil, fmt.Errorf("%s: no ctxtier_cluster_read_bytes_total{path=%q} in /metrics", nd.id, c.path)
			}
		}
	}
	return out, nil
}
