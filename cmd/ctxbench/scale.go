package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/partition"
	"github.com/ctxtier/ctxtier/ctxstore/placement"
	"github.com/ctxtier/ctxtier/internal/mix"
	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

func init() {
	register("scale", "the partitioned index (ctxstore/partition) with N simulated nodes in one process: entries/s, commit latency, memory, leader load", runScale)
}

var errScaleUsage = errors.New("ctxbench: bad scale arguments")

// scaleArgs are the flags of ctxbench scale.
type scaleArgs struct {
	nodes         []int
	groupsPerNode int
	replicas      int
	batch         int
	clients       int
	duration      time.Duration
	idle          time.Duration
	heartbeat     time.Duration
	commitTimeout time.Duration
	startTimeout  time.Duration
	grace         time.Duration
	jsonPath      string
	plotDir       string
	from          string
}

func parseScaleArgs(args []string, stderr io.Writer) (scaleArgs, error) {
	var a scaleArgs
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodes := fs.String("nodes", "10,30,100,300,1000", "simulated node counts, comma separated")
	fs.IntVar(&a.groupsPerNode, "groups-per-node", 3, "group replicas each node hosts on average: partitions P = ceil(N x this / replicas)")
	fs.IntVar(&a.replicas, "replicas", 3, "voters per partition")
	fs.IntVar(&a.batch, "batch", 64, "puts per client batch (keys spread over all partitions)")
	fs.IntVar(&a.clients, "clients", 64, "concurrent clients, each with one batch in flight: the offered load, the same for every N")
	fs.DurationVar(&a.duration, "duration", 5*time.Second, "load phase per N")
	fs.DurationVar(&a.idle, "idle", 2*time.Second, "idle phase per N (heartbeat and timer CPU, no load)")
	fs.DurationVar(&a.heartbeat, "heartbeat", 5*time.Second, "Raft heartbeat, election and leader lease timeout of every group")
	fs.DurationVar(&a.commitTimeout, "commit-timeout", raft.DefaultConfig().CommitTimeout, "Raft CommitTimeout of every group (an idle leader still sends its followers an AppendEntries this often)")
	fs.DurationVar(&a.startTimeout, "start-timeout", 2*time.Minute, "how long every partition may take to elect its first leader")
	fs.DurationVar(&a.grace, "grace", 10*time.Second, "how long after a load phase a batch may still wait for its commit before it counts as failed")
	fs.StringVar(&a.jsonPath, "json", "scale.json", "JSON file of the results")
	fs.StringVar(&a.plotDir, "plot-dir", "", "also draw the curves as PNG files in this folder")
	fs.StringVar(&a.from, "from", "", "draw the plots of this JSON file of an earlier run (with --plot-dir) instead of running")
	if err := fs.Parse(args); err != nil {
		return a, err
	}
	if a.from != "" {
		if a.plotDir == "" {
			return a, fmt.Errorf("%w: --from needs --plot-dir", errScaleUsage)
		}
		return a, nil
	}
	for _, s := range strings.Split(*nodes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return a, fmt.Errorf("%w: --nodes %q", errScaleUsage, *nodes)
		}
		a.nodes = append(a.nodes, n)
	}
	switch {
	case a.replicas < 1 || slices.Min(a.nodes) < a.replicas:
		return a, fmt.Errorf("%w: --replicas %d needs at least that many nodes in every run", errScaleUsage, a.replicas)
	case a.groupsPerNode < 1 || a.batch < 1 || a.clients < 1:
		return a, fmt.Errorf("%w: --groups-per-node, --batch and --clients must be positive", errScaleUsage)
	case a.duration <= 0 || a.idle <= 0 || a.startTimeout <= 0 || a.grace <= 0:
		return a, fmt.Errorf("%w: --duration, --idle, --start-timeout and --grace must be positive", errScaleUsage)
	}
	return a, nil
}

// scaleResult is one N's measurements (a line of output, an element of
// the JSON file).
type scaleResult struct {
	Nodes      int     `json:"nodes"`
	Partitions int     `json:"partitions"`
	Groups     int     `json:"group_replicas"` // partitions x replicas
	StartS     float64 `json:"start_s"`
	// Idle phase.
	IdleCPUPerNodeMs float64 `json:"idle_cpu_ms_per_s_per_node"` // CPU ms per wall second per node
	HeapIdlePerNode  float64 `json:"heap_idle_bytes_per_node"`
	// Load phases: each batch's keys spread over every partition, and each
	// batch's keys in one partition.
	Spread  scalePhase `json:"spread"`
	Grouped scalePhase `json:"grouped"`
	// After both.
	HeapPerNode   float64 `json:"heap_after_bytes_per_node"`
	HeapPerEntry  float64 `json:"heap_bytes_per_entry"` // growth over the idle heap, per acknowledged entry (all replicas, FSM + Raft log)
	HostedMax     int     `json:"groups_hosted_max"`    // group replicas on the node with the most (the mean is group_replicas / nodes)
	LedMax        int     `json:"groups_led_max"`
	LedMean       float64 `json:"groups_led_mean"`
	BusiestShare  float64 `json:"busiest_apply_share"`        // the node applying the most index operations: its share of all applies
	BusiestLead   float64 `json:"busiest_leader_apply_share"` // the same, counting only applies of groups a node leads at the end
	LeaderChanges int     `json:"leader_changes"`             // partitions whose leader at the end is not the one before the load
	Verified      int64   `json:"entries_verified"`
	Load          string  `json:"loadavg"`
}

// scalePhase is one load phase's measurements.
type scalePhase struct {
	Acked         int64   `json:"entries_acked"`
	Failed        int64   `json:"entries_failed"`
	EntriesPerS   float64 `json:"entries_per_s"`
	EntriesPerCPU float64 `json:"entries_per_cpu_s"`
	CPUUtil       float64 `json:"cpu_cores_used"`
	// EntriesPerMarginalCPU counts only the CPU above the idle phase's
	// rate (heartbeats, timers) over the same wall time: the cost of the
	// entries themselves.
	EntriesPerMarginalCPU float64 `json:"entries_per_marginal_cpu_s"`
	PerLogEntry           float64 `json:"entries_per_log_entry"`
	CommitP50Ms           float64 `json:"commit_p50_ms"`
	CommitP99Ms           float64 `json:"commit_p99_ms"`
}

// scaleFile is the JSON file: the run's settings and its results.
type scaleFile struct {
	Command    string        `json:"command"`
	GOMAXPROCS int           `json:"gomaxprocs"`
	NumCPU     int           `json:"num_cpu"`
	Start      time.Time     `json:"start"`
	LoadStart  string        `json:"loadavg_start"`
	LoadEnd    string        `json:"loadavg_end"`
	Results    []scaleResult `json:"results"`
}

func runScale(ctx context.Context, args []string) error {
	return runParsed(ctx, args, parseScaleArgs, scaleMain)
}

func scaleMain(ctx context.Context, a scaleArgs, out, progress io.Writer) error {
	if a.from != "" {
		b, err := os.ReadFile(a.from)
		if err != nil {
			return err
		}
		var f scaleFile
		if err := json.Unmarshal(b, &f); err != nil {
			return fmt.Errorf("ctxbench scale: %s: %w", a.from, err)
		}
		return writeScalePlots(a.plotDir, f, out)
	}
	f := scaleFile{Command: "ctxbench scale " + strings.Join(os.Args[min(2, len(os.Args)):], " "), GOMAXPROCS: runtime.GOMAXPROCS(0),
		NumCPU: runtime.NumCPU(), Start: time.Now().UTC(), LoadStart: loadAvg()}
	for _, n := range a.nodes {
		r, err := scaleOne(ctx, a, n, progress)
		if err != nil {
			return fmt.Errorf("ctxbench scale: N=%d: %w", n, err)
		}
		fmt.Fprintf(out, "scale: nodes=%d partitions=%d group_replicas=%d start_s=%.1f idle_cpu_ms_per_s_per_node=%.2f heap_idle_kib_per_node=%.1f "+
			"%s %s heap_kib_per_node=%.1f heap_b_per_entry=%.0f groups_hosted_max=%d groups_led_max=%d groups_led_mean=%.2f "+
			"busiest_apply_share=%.4f busiest_x_n=%.2f busiest_leader_apply_share=%.4f leader_changes=%d entries_verified=%d loadavg=%q\n",
			r.Nodes, r.Partitions, r.Groups, r.StartS, r.IdleCPUPerNodeMs, r.HeapIdlePerNode/1024,
			r.Spread.format("spread"), r.Grouped.format("grouped"), r.HeapPerNode/1024, r.HeapPerEntry, r.HostedMax, r.LedMax, r.LedMean,
			r.BusiestShare, r.BusiestShare*float64(r.Nodes), r.BusiestLead, r.LeaderChanges, r.Verified, r.Load)
		f.Results = append(f.Results, r)
		f.LoadEnd = loadAvg()
		if err := writeScaleJSON(a.jsonPath, f); err != nil {
			return err
		}
	}
	if a.plotDir != "" {
		return writeScalePlots(a.plotDir, f, out)
	}
	return nil
}

func writeScaleJSON(path string, f scaleFile) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// scaleOne starts n hosts on one in-memory network, waits for every
// partition's leader, measures an idle phase and a load phase, checks every
// acknowledged entry, and stops the hosts.
func scaleOne(ctx context.Context, a scaleArgs, n int, progress io.Writer) (scaleResult, error) {
	cfg := partition.DefaultConfig()
	cfg.Replicas = a.replicas
	cfg.Partitions = (n*a.groupsPerNode + a.replicas - 1) / a.replicas
	cfg.LeaderTimeout = a.startTimeout
	g := &cfg.Group
	g.HeartbeatTimeout, g.ElectionTimeout, g.LeaderLeaseTimeout, g.CommitTimeout = a.heartbeat, a.heartbeat, a.heartbeat, a.commitTimeout
	// No snapshots during a run: the Raft logs stay in memory, and the
	// heap per entry counts them.
	g.SnapshotInterval, g.SnapshotThreshold = time.Hour, 1<<40
	res := scaleResult{Nodes: n, Partitions: cfg.Partitions, Groups: cfg.Partitions * cfg.Replicas}
	members := make([]placement.Node, n)
	for i := range members {
		members[i] = placement.Node{ID: fmt.Sprintf("n%d", i+1), Zone: "z"}
	}
	layout, err := cfg.Layout(members)
	if err != nil {
		return res, err
	}
	heap0 := float64(heapNow())
	start := time.Now()
	net := partition.NewInmemNetwork(10 * time.Second)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	hosts := make([]*partition.Host, 0, n)
	defer func() {
		var wg sync.WaitGroup
		for _, h := range hosts {
			wg.Go(func() { h.Close() })
		}
		wg.Wait()
	}()
	for _, m := range members {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		h, err := partition.OpenHost(ctx, cfg, m.ID, layout, net, log)
		if err != nil {
			return res, err
		}
		hosts = append(hosts, h)
	}
	router, err := partition.NewRouter(cfg, layout, hosts)
	if err != nil {
		return res, err
	}
	leaders := make([]*raft.Node, cfg.Partitions)
	for p := range cfg.Partitions {
		if leaders[p], err = router.Leader(ctx, p); err != nil {
			return res, err
		}
	}
	res.StartS = time.Since(start).Seconds()
	fmt.Fprintf(progress, "scale: N=%d: %d partitions, %d replicas started and led in %.1fs\n", n, cfg.Partitions, res.Groups, res.StartS)

	// Idle: heartbeats, commit-timeout replication and timers only.
	time.Sleep(a.idle / 4) // the leaders' own member records settle
	cpu0, t0 := cpuTime(), time.Now()
	time.Sleep(a.idle)
	idleCores := (cpuTime() - cpu0).Seconds() / time.Since(t0).Seconds()
	res.IdleCPUPerNodeMs = 1000 * idleCores / float64(n)
	heapIdle := float64(heapNow())
	res.HeapIdlePerNode = (heapIdle - heap0) / float64(n)

	var acked []uint64
	var next atomic.Uint64
	spread := func(_ int, dst []uint64) bool {
		for i := range dst {
			dst[i] = mix.SplitMix64(next.Add(1))
		}
		return true
	}
	if res.Spread, err = scalePhaseRun(ctx, router, cfg.Partitions, a, idleCores, spread, &acked); err != nil {
		return res, err
	}
	// The grouped phase's keys, bucketed by partition beforehand (outside
	// the measured time): enough for ten times the spread phase's rate.
	want := min(4<<20, max(10*int(res.Spread.EntriesPerS*a.duration.Seconds()), 4*a.batch*cfg.Partitions))
	pool := newPartitionPool(cfg, want, 1<<62)
	if res.Grouped, err = scalePhaseRun(ctx, router, cfg.Partitions, a, idleCores, pool.source(cfg.Partitions, a.clients), &acked); err != nil {
		return res, err
	}
	for p := range cfg.Partitions {
		l, err := router.Leader(ctx, p)
		if err != nil {
			return res, err
		}
		if l != leaders[p] {
			res.LeaderChanges++
		}
	}

	// Every acknowledged entry must be in its partition leader's FSM.
	for _, h := range acked {
		k := block.NewKey(block.DefaultNamespace, h)
		e, ok, err := router.Lookup(ctx, k, raft.ReadLocal)
		if err != nil {
			return res, err
		}
		if !ok || e.Sum != uint32(h) {
			return res, fmt.Errorf("acknowledged entry %v is not in partition %d's index (found=%v)", k, cfg.Of(k), ok)
		}
		res.Verified++
	}

	var total, busiest, totalLed, busiestLed uint64
	led := 0
	for _, h := range hosts {
		s := h.Stats()
		total += s.Applied
		busiest = max(busiest, s.Applied)
		totalLed += s.AppliedLed
		busiestLed = max(busiestLed, s.AppliedLed)
		res.LedMax = max(res.LedMax, s.Led)
		res.HostedMax = max(res.HostedMax, s.Groups)
		led += s.Led
	}
	res.LedMean = float64(led) / float64(n)
	res.BusiestShare = float64(busiest) / float64(max(total, 1))
	res.BusiestLead = float64(busiestLed) / float64(max(totalLed, 1))
	heapAfter := float64(heapNow())
	res.HeapPerNode = (heapAfter - heap0) / float64(n)
	res.HeapPerEntry = (heapAfter - heapIdle) / float64(max(len(acked), 1))
	res.Load = loadAvg()
	return res, nil
}

// scaleLat is a load phase's latencies and its wall and CPU time.
type scaleLat struct {
	ms        []float64
	wall, cpu time.Duration
}

func (l scaleLat) quantile(q float64) float64 {
	if len(l.ms) == 0 {
		return 0 // no batch finished (JSON has no NaN)
	}
	s := slices.Clone(l.ms)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func (ph scalePhase) format(name string) string {
	return strings.NewReplacer("@", name).Replace(fmt.Sprintf("@_entries_acked=%d @_entries_failed=%d @_entries_per_s=%.0f @_entries_per_cpu_s=%.0f @_entries_per_marginal_cpu_s=%.0f @_cpu_cores_used=%.2f "+
		"@_entries_per_log_entry=%.1f @_commit_p50_ms=%.1f @_commit_p99_ms=%.1f",
		ph.Acked, ph.Failed, ph.EntriesPerS, ph.EntriesPerCPU, ph.EntriesPerMarginalCPU, ph.CPUUtil, ph.PerLogEntry, ph.CommitP50Ms, ph.CommitP99Ms))
}

// leaderIndexes is the log index each partition's leader has applied.
func leaderIndexes(ctx context.Context, r *partition.Router, parts int) ([]uint64, error) {
	out := make([]uint64, parts)
	for p := range out {
		l, err := r.Leader(ctx, p)
		if err != nil {
			return nil, err
		}
		out[p] = l.FSM().AppliedIndex()
	}
	return out, nil
}

// scalePhaseRun runs one load phase with keys from keys, appends the
// acknowledged keys' hashes to acked and measures it.
func scalePhaseRun(ctx context.Context, r *partition.Router, parts int, a scaleArgs, idleCores float64, keys keySource, acked *[]uint64) (scalePhase, error) {
	before, err := leaderIndexes(ctx, r, parts)
	if err != nil {
		return scalePhase{}, err
	}
	got, lat, failed := scaleLoad(ctx, r, a, keys)
	after, err := leaderIndexes(ctx, r, parts)
	if err != nil {
		return scalePhase{}, err
	}
	var logEntries uint64
	for p := range after {
		logEntries += after[p] - min(before[p], after[p])
	}
	*acked = append(*acked, got...)
	return scalePhase{
		Acked: int64(len(got)), Failed: failed,
		EntriesPerS:           float64(len(got)) / lat.wall.Seconds(),
		EntriesPerCPU:         float64(len(got)) / lat.cpu.Seconds(),
		CPUUtil:               lat.cpu.Seconds() / lat.wall.Seconds(),
		EntriesPerMarginalCPU: perSecond(len(got), lat.cpu.Seconds()-idleCores*lat.wall.Seconds()),
		PerLogEntry:           float64(len(got)) / float64(max(logEntries, 1)),
		CommitP50Ms:           lat.quantile(0.50), CommitP99Ms: lat.quantile(0.99),
	}, nil
}

// perSecond is n / s, or 0 when s is not positive (not measured).
func perSecond(n int, s float64) float64 {
	if s <= 0 {
		return 0
	}
	return float64(n) / s
}

// keySource fills dst with fresh key hashes for client's next batch; false
// when it has none left.
type keySource func(client int, dst []uint64) bool

// partitionPool holds fresh key hashes bucketed by partition, so a batch
// can be all of one partition.
type partitionPool struct {
	buckets [][]uint64
	cursor  []atomic.Int64
}

// newPartitionPool generates n hashes from seed on and buckets them.
func newPartitionPool(cfg partition.Config, n int, seed uint64) *partitionPool {
	pp := &partitionPool{buckets: make([][]uint64, cfg.Partitions), cursor: make([]atomic.Int64, cfg.Partitions)}
	for i := range uint64(n) {
		h := mix.SplitMix64(seed + i)
		p := cfg.Of(block.NewKey(block.DefaultNamespace, h))
		pp.buckets[p] = append(pp.buckets[p], h)
	}
	return pp
}

// source gives client c the partitions c, c+clients, c+2 clients, ... (mod
// parts) in turn, a whole batch from each; a partition with too few keys
// left is skipped, and when none has, the client stops.
func (pp *partitionPool) source(parts, clients int) keySource {
	return func(c int, dst []uint64) bool {
		for range parts {
			p := c % parts
			c += clients
			b := pp.buckets[p]
			end := pp.cursor[p].Add(int64(len(dst)))
			if end <= int64(len(b)) {
				copy(dst, b[end-int64(len(dst)):end])
				return true
			}
		}
		return false
	}
}

// scaleLoad runs a.clients clients for a.duration, each proposing batches
// of a.batch puts of fresh keys from keys, one after another. It returns
// the acknowledged keys' hashes, the batches' commit latencies and the puts
// not acknowledged.
func scaleLoad(ctx context.Context, r *partition.Router, a scaleArgs, keys keySource) ([]uint64, scaleLat, int64) {
	var (
		failed atomic.Int64
		mu     sync.Mutex
		acked  []uint64
		lat    scaleLat
		wg     sync.WaitGroup
	)
	stop := time.Now().Add(a.duration)
	// A batch still waiting well after the phase (a partition without a
	// leader for long) gives up: its puts count as not acknowledged.
	ctx, cancel := context.WithDeadline(ctx, stop.Add(a.grace))
	defer cancel()
	cpu0, t0 := cpuTime(), time.Now()
	for c := range a.clients {
		wg.Go(func() {
			var mine []uint64
			var ms []float64
			ops := make([]fsm.Op, a.batch)
			hs := make([]uint64, a.batch)
			// Client c's k-th batch asks the source as client c + k x clients.
			for k := c; time.Now().Before(stop) && keys(k, hs); k += a.clients {
				for i, h := range hs {
					ops[i] = fsm.PutOp(block.NewKey(block.DefaultNamespace, h), fsm.Entry{
						Size: 4096, Sum: uint32(h), Placement: []fsm.Shard{{NodeID: "n1"}}, Created: time.Unix(1, 0)})
				}
				t := time.Now()
				res, _ := r.Propose(ctx, ops)
				ms = append(ms, float64(time.Since(t).Microseconds())/1000)
				for i, rs := range res {
					if rs.Status == fsm.StatusCreated {
						mine = append(mine, ops[i].Key.Hash)
					} else {
						failed.Add(1)
					}
				}
			}
			mu.Lock()
			acked = append(acked, mine...)
			lat.ms = append(lat.ms, ms...)
			mu.Unlock()
		})
	}
	wg.Wait()
	lat.wall, lat.cpu = time.Since(t0), cpuTime()-cpu0
	return acked, lat, failed.Load()
}
