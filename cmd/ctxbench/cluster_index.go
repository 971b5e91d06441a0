package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/client"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
)

// indexResult is what the index commit phase measured. Every acknowledged
// put is one block entry committed in the Raft index (the cluster backend
// answers a put only once its entry is applied on the leader), so entries
// per second is acknowledged puts over the phase's time. The leader's Raft
// commit index and its group-commit histogram, read before and after,
// show how many log entries carried them.
type indexResult struct {
	puts int
	dur  time.Duration
	// batch is the blocks per request, via the protocol that carried them;
	// single is the batches-of-1 run over the same protocol measured
	// beside a batched one.
	batch  int
	via    string
	single *indexResult
	// leader is set when the same node led before and after the phase;
	// the deltas below are its own and meaningless across a change.
	leader     string
	logEntries uint64
	// batchOps and batchEntries are the deltas of the leader's
	// ctxtier_raft_batch_ops_sum and _count: index operations and the
	// group-committed log entries that carried them.
	batchOps, batchEntries float64
	haveBatch              bool
	// cpu is the CPU time the nodes and ctxbench used during the run
	// (cpu.err set when it could not be read: not --start).
	cpu cpuSample
	// phases is the nodes' put-phase times over the run (the deltas of
	// ctxtier_cluster_put_phase_seconds summed over the nodes); ok is
	// false when a node does not export it.
	phases putPhases
}

// putPhases sums the two halves of the puts (or batch puts) the nodes
// coordinated: shard writes and index commits, seconds and counts.
type putPhases struct {
	shards, commit float64
	n              float64
	// forwards counts the requests that carried a batch put's shards to a
	// peer (ctxtier_cluster_shard_batches_total; a single put's one
	// forwarded shard is not counted): what owner routing saves.
	forwards float64
	// proposals counts the forwards of index proposals from followers to
	// the leader (ctxtier_cluster_forwards_total; concurrent proposals
	// share one); proposalsOK is false when a node does not export it.
	proposals   float64
	proposalsOK bool
	ok          bool
}

// readPutPhases reads ctxtier_cluster_put_phase_seconds from every node.
func (b *clusterBench) readPutPhases(ctx context.Context) putPhases {
	p := putPhases{ok: true, proposalsOK: true}
	for _, a := range b.addrs {
		text, err := fetchMetrics(ctx, a)
		if err != nil {
			return putPhases{}
		}
		shards, ok1 := promSamples(text, "ctxtier_cluster_put_phase_seconds_sum", `phase="shards"`)
		commit, ok2 := promSamples(text, "ctxtier_cluster_put_phase_seconds_sum", `phase="commit"`)
		n, ok3 := promSamples(text, "ctxtier_cluster_put_phase_seconds_count", `phase="commit"`)
		fw, ok4 := promSamples(text, "ctxtier_cluster_shard_batches_total", "")
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return putPhases{}
		}
		p.shards, p.commit, p.n, p.forwards = p.shards+shards, p.commit+commit, p.n+n, p.forwards+fw
		prop, ok5 := promSamples(text, "ctxtier_cluster_forwards_total", "")
		p.proposals, p.proposalsOK = p.proposals+prop, p.proposalsOK && ok5
	}
	return p
}

func (p putPhases) minus(q putPhases) putPhases {
	if !p.ok || !q.ok {
		return putPhases{}
	}
	return putPhases{shards: p.shards - q.shards, commit: p.commit - q.commit, n: p.n - q.n, forwards: p.forwards - q.forwards,
		proposals: p.proposals - q.proposals, proposalsOK: p.proposalsOK && q.proposalsOK, ok: true}
}

// leaderSnap is the leader's Raft progress at one moment.
type leaderSnap struct {
	id            string
	commit        uint64
	ops, entries  float64
	haveBatch     bool
	metricsErrMsg string
}

func (b *clusterBench) snapLeader(ctx context.Context) (leaderSnap, error) {
	l, err := b.leader(ctx)
	if err != nil {
		return leaderSnap{}, err
	}
	st, err := clusterapi.NewClient(l.HTTPAddr).Status(ctx)
	if err != nil {
		return leaderSnap{}, err
	}
	if st.State != "leader" {
		return leaderSnap{}, fmt.Errorf("%s is %s, not leader", l.ID, st.State)
	}
	s := leaderSnap{id: l.ID, commit: st.Raft.CommitIndex}
	text, err := fetchMetrics(ctx, l.HTTPAddr)
	if err != nil {
		s.metricsErrMsg = err.Error()
		return s, nil //nolint:nilerr // the failure is kept in s.metricsErrMsg
	}
	label := `node_id="` + l.ID + `"`
	var okOps, okEntries bool
	s.ops, okOps = promSamples(text, "ctxtier_raft_batch_ops_sum", label)
	s.entries, okEntries = promSamples(text, "ctxtier_raft_batch_ops_count", label)
	s.haveBatch = okOps && okEntries
	return s, nil
}

// indexPhase puts IndexBlocks small blocks into ns (one copy, so shard
// traffic is smallest and the index is what is exercised) with
// IndexConcurrency requests in flight, then checks that the leader's index
// holds every one, reads a sample back, and deletes them. With IndexBatch
// above 1 the requests are native-protocol batches of IndexBatch blocks,
// and a shorter run of batches of 1 over the same protocol goes first, for
// the ratio.
func (b *clusterBench) indexPhase(ctx context.Context, ns *benchNS) (*indexResult, error) {
	cfg := b.cfg
	if cfg.IndexBatch <= 1 {
		return b.indexRun(ctx, ns, cfg.IndexBlocks, 1)
	}
	if err := b.dialNative(ctx); err != nil {
		return nil, err
	}
	single, err := b.indexRun(ctx, ns, max(cfg.IndexBlocks/4, 1), 1)
	if err != nil {
		return nil, err
	}
	res, err := b.indexRun(ctx, ns, cfg.IndexBlocks, cfg.IndexBatch)
	if err != nil {
		return nil, err
	}
	res.single = single
	return res, nil
}

// dialNative connects a native-protocol client to each node.
func (b *clusterBench) dialNative(ctx context.Context) error {
	if len(b.cfg.NativeAddrs) != len(b.addrs) {
		return fmt.Errorf("%d native addresses for %d nodes", len(b.cfg.NativeAddrs), len(b.addrs))
	}
	conns := max(b.cfg.IndexConcurrency/len(b.addrs), 1)
	if b.cfg.IndexRoute {
		cc := client.ClusterDefaultConfig()
		cc.Native.Conns = min(conns, 16)
		for i, a := range b.cfg.NativeAddrs {
			cc.Nodes = append(cc.Nodes, client.ClusterNode{Native: a, HTTP: b.addrs[i]})
		}
		owners, err := client.DialCluster(ctx, cc)
		if err != nil {
			return fmt.Errorf("native protocol, routed to owners: %w", err)
		}
		b.owners = owners
		return nil
	}
	for _, a := range b.cfg.NativeAddrs {
		c, err := client.Dial(ctx, a, client.Options{Conns: min(conns, 16)})
		if err != nil {
			return fmt.Errorf("native protocol at %s: %w", a, err)
		}
		b.natives = append(b.natives, c)
	}
	return nil
}

// indexRun is one timed run of the index phase: n blocks in requests of
// batch blocks (batch 1 without native clients: single HTTP puts).
func (b *clusterBench) indexRun(ctx context.Context, ns *benchNS, n, batch int) (*indexResult, error) {
	cfg := b.cfg
	p := newPayload(cfg.IndexBlockSize, 2)
	hashes := b.hashes(n)
	if b.owners != nil {
		// Before the CPU and the clock start: a client's own queue.
		hashes = b.byOwner(ns, hashes, batch)
	}
	via := "HTTP"
	switch {
	case b.owners != nil:
		via = "native (to owners)"
	case len(b.natives) > 0:
		via = "native"
	}
	before, berr := b.snapLeader(ctx)
	phases0 := b.readPutPhases(ctx)
	cpu0 := b.cpu.sample()
	var cpu1 cpuSample
	var d time.Duration
	var err error
	if via != "HTTP" {
		// The main run (the one --index-batch asks for) is the one profiled.
		var wait func() error
		if batch == cfg.IndexBatch {
			wait = b.profiler.start(ctx, b.progress)
		}
		d, err = b.putNative(ctx, ns, p, hashes, batch, cfg.IndexConcurrency)
		cpu1 = b.cpu.sample() // before the profiles' wait
		if wait != nil {
			if perr := wait(); perr != nil {
				fmt.Fprintf(b.progress, "index: profiles: %v\n", perr)
			}
		}
	} else {
		d, err = b.putAll(ctx, ns, p, hashes, cfg.IndexConcurrency)
		cpu1 = b.cpu.sample()
	}
	if err != nil {
		return nil, fmt.Errorf("index phase: put: %w", err)
	}
	after, aerr := b.snapLeader(ctx)
	res := &indexResult{puts: len(hashes), dur: d, batch: batch, via: via, cpu: cpu1,
		phases: b.readPutPhases(ctx).minus(phases0)}
	if res.cpu.err = errors.Join(cpu0.err, cpu1.err); res.cpu.err == nil {
		res.cpu.nodes, res.cpu.bench = cpu1.nodes-cpu0.nodes, cpu1.bench-cpu0.bench
	}
	switch {
	case berr != nil || aerr != nil:
		fmt.Fprintf(b.progress, "index: no leader statistics: %v\n", errors.Join(berr, aerr))
	case before.id != after.id:
		fmt.Fprintf(b.progress, "index: the leader changed during the phase (%s, then %s): no log statistics\n", before.id, after.id)
	default:
		res.leader = after.id
		res.logEntries = after.commit - before.commit
		if before.haveBatch && after.haveBatch {
			res.batchOps, res.batchEntries, res.haveBatch = after.ops-before.ops, after.entries-before.entries, true
		} else if msg := after.metricsErrMsg + before.metricsErrMsg; msg != "" {
			fmt.Fprintf(b.progress, "index: leader metrics: %s\n", msg)
		}
	}
	fmt.Fprintf(b.progress, "index: %d x %s one-copy puts, %s requests of %d, %d in flight, in %v\n", len(hashes), block.FormatSize(int64(cfg.IndexBlockSize)), via, batch, cfg.IndexConcurrency, d.Round(time.Millisecond))
	if err := b.checkIndexed(ctx, ns, hashes); err != nil {
		return nil, err
	}
	sample := hashes[:min(len(hashes), 256)]
	if err := b.readyToRead(ctx, ns, sample); err != nil {
		return nil, fmt.Errorf("index phase: %w", err)
	}
	if _, err := b.getAll(ctx, ns, p, sample, cfg.IndexConcurrency); err != nil {
		return nil, fmt.Errorf("index phase: reading back: %w", err)
	}
	if err := b.deleteAll(ctx, ns, hashes, cfg.IndexConcurrency); err != nil {
		return nil, fmt.Errorf("index phase: delete: %w", err)
	}
	return res, nil
}

// putNative puts hashes in native-protocol batches of batch blocks, conc
// batches in flight: with --index-route each block of a batch to its owner
// (b.owners), else batch j whole to node j mod nodes. Every block of
// every batch must be acknowledged; the first failure stops the run.
func (b *clusterBench) putNative(ctx context.Context, ns *benchNS, p payload, hashes []uint64, batch, conc int) (time.Duration, error) {
	sums := p.sums(hashes) // before the clock starts, as for putAll
	size := len(p.base)
	batches := (len(hashes) + batch - 1) / batch
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range min(conc, batches) {
		buf := make([]byte, batch*size)
		items := make([]client.PutItem, 0, batch)
		wg.Go(func() {
			for ctx.Err() == nil {
				j := int(next.Add(1) - 1)
				if j >= batches {
					return
				}
				items = items[:0]
				for k, i := 0, j*batch; i < min((j+1)*batch, len(hashes)); k, i = k+1, i+1 {
					items = append(items, client.PutItem{Key: block.NewKey(ns.name, hashes[i]),
						Data: p.fill(buf[k*size:], hashes[i]), Opts: block.PutOptions{Sum: sums[i], HasSum: true}})
				}
				var errs []error
				var err error
				var via string
				if b.owners != nil {
					errs, err = b.owners.PutBatch(ctx, items)
					via = "their owners"
				} else {
					node := j % len(b.natives)
					errs, err = b.natives[node].PutBatch(ctx, items)
					via = b.cfg.NativeAddrs[node]
				}
				if err == nil {
					err = errors.Join(errs...)
				}
				if err != nil {
					cancel(fmt.Errorf("batch via %s: %w", via, err))
					return
				}
			}
		})
	}
	wg.Wait()
	d := time.Since(start)
	if err := context.Cause(ctx); err != nil {
		return d, err
	}
	return d, nil
}

// checkIndexed asks the leader whether its index holds every key: it must,
// at once, for every put it acknowledged.
func (b *clusterBench) checkIndexed(ctx context.Context, ns *benchNS, hashes []uint64) error {
	l, err := b.leader(ctx)
	if err != nil {
		return err
	}
	hc, err := newBenchHTTPClient(l.HTTPAddr, 1)
	if err != nil {
		return err
	}
	defer hc.Close()
	missing, err := missingKeys(ctx, hc, ns, hashes)
	if err != nil {
		return fmt.Errorf("index phase: exists on the leader: %w", err)
	}
	if len(missing) > 0 {
		return fmt.Errorf("index phase: %d acknowledged puts are not in the leader's index, %s the first", len(missing), missing[0])
	}
	return nil
}

// readyToRead prepares the get of just-put blocks: with --read local it
// waits (awaitIndexed); a linearizable get needs no wait.
func (b *clusterBench) readyToRead(ctx context.Context, ns *benchNS, hashes []uint64) error {
	if b.cfg.Read == "linearizable" {
		return nil
	}
	return b.awaitIndexed(ctx, ns, hashes)
}

// awaitIndexed waits until every node's index holds every key. A follower
// applies committed entries a moment after the leader acknowledged them,
// so a block put through one node may not be found through another yet;
// the get phases start once every node has them (not timed).
func (b *clusterBench) awaitIndexed(ctx context.Context, ns *benchNS, hashes []uint64) error {
	deadline := time.Now().Add(10 * time.Second)
	for i, hc := range b.clients {
		for {
			missing, err := missingKeys(ctx, hc, ns, hashes)
			if err != nil {
				return fmt.Errorf("exists on %s: %w", b.addrs[i], err)
			}
			if len(missing) == 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: %d acknowledged puts still not in its index after 10 s, %s the first", b.addrs[i], len(missing), missing[0])
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return nil
}

// missingKeys returns the keys hc's node does not find in its index.
func missingKeys(ctx context.Context, hc *client.HTTPClient, ns *benchNS, hashes []uint64) ([]block.Key, error) {
	const chunk = 1024 // the HTTP API's batch limit
	var missing []block.Key
	for lo := 0; lo < len(hashes); lo += chunk {
		keys := make([]block.Key, 0, chunk)
		for _, h := range hashes[lo:min(lo+chunk, len(hashes))] {
			keys = append(keys, block.NewKey(ns.name, h))
		}
		ok, err := hc.ExistsBatch(ctx, keys)
		if err != nil {
			return nil, err
		}
		for i, e := range ok {
			if !e {
				missing = append(missing, keys[i])
			}
		}
	}
	return missing, nil
}

func (r *indexResult) describe(out io.Writer, cfg clusterConfig) {
	if r.single != nil {
		r.single.describe(out, cfg)
	}
	fmt.Fprintf(out, "index: %d one-copy puts of %d B, %s requests of %d, %d in flight, in %.2fs: %.0f block entries/s",
		r.puts, cfg.IndexBlockSize, r.via, r.batch, cfg.IndexConcurrency, r.dur.Seconds(), r.perSec())
	if r.cpu.err == nil {
		fmt.Fprintf(out, "; CPU: nodes %.2fs, ctxbench %.2fs", r.cpu.nodes.Seconds(), r.cpu.bench.Seconds())
	}
	if ph := r.phases; ph.ok && ph.n > 0 {
		fmt.Fprintf(out, "; per request: shard writes %.1f ms, index commit %.1f ms (means over %.0f); %.0f shard batches forwarded to peers", ph.shards/ph.n*1e3, ph.commit/ph.n*1e3, ph.n, ph.forwards)
	}
	if r.leader != "" {
		fmt.Fprintf(out, "; leader %s's commit index advanced %d", r.leader, r.logEntries)
		if r.haveBatch {
			fmt.Fprintf(out, "; its batcher committed %.0f index ops in %.0f log entries", r.batchOps, r.batchEntries)
		}
	}
	fmt.Fprintln(out)
}

func (r *indexResult) perSec() float64 { return float64(r.puts) / r.dur.Seconds() }

// print writes the key=value lines: the figures of batches of r.batch, and
// with a batches-of-1 run beside it, that run's under index_batch1_.
func (r *indexResult) print(out io.Writer) {
	fmt.Fprintf(out, "index_commit_entries_per_s=%.0f\n", r.perSec())
	fmt.Fprintf(out, "index_batch=%d\n", r.batch)
	r.printLog(out, "index_")
	if s := r.single; s != nil {
		fmt.Fprintf(out, "index_batch1_commit_entries_per_s=%.0f\n", s.perSec())
		s.printLog(out, "index_batch1_")
		fmt.Fprintf(out, "ratio_index_batch_vs_batch1=%.2f\n", r.perSec()/s.perSec())
	}
}

func (r *indexResult) printLog(out io.Writer, prefix string) {
	if r.cpu.err == nil {
		// CPU per entry: the nodes' (all three processes together) and
		// the client's, during the timed run only.
		fmt.Fprintf(out, "%snode_cpu_us_per_entry=%.1f\n", prefix, float64(r.cpu.nodes.Microseconds())/float64(r.puts))
		fmt.Fprintf(out, "%sbench_cpu_us_per_entry=%.1f\n", prefix, float64(r.cpu.bench.Microseconds())/float64(r.puts))
	}
	if ph := r.phases; ph.ok && ph.n > 0 {
		// Mean wall-clock time of each half of a request's put on the
		// node that took it: where a batch waits.
		fmt.Fprintf(out, "%sput_shards_ms_mean=%.2f\n", prefix, ph.shards/ph.n*1e3)
		fmt.Fprintf(out, "%sput_commit_ms_mean=%.2f\n", prefix, ph.commit/ph.n*1e3)
		// Requests on which the nodes took them, and the shard batches
		// they forwarded to peers: about 2 per batch of one-copy blocks
		// sent to any node of three, none when each block goes to its
		// owner (batches of 1 forward single shards, not counted here).
		fmt.Fprintf(out, "%snode_requests=%.0f\n", prefix, ph.n)
		fmt.Fprintf(out, "%speer_shard_batches=%.0f\n", prefix, ph.forwards)
		if ph.proposalsOK {
			// Forwards of the followers' index proposals to the leader.
			fmt.Fprintf(out, "%sproposal_forwards=%.0f\n", prefix, ph.proposals)
		}
	}
	if r.leader == "" {
		return
	}
	fmt.Fprintf(out, "%sraft_log_entries=%d\n", prefix, r.logEntries)
	if r.logEntries > 0 {
		fmt.Fprintf(out, "%sentries_per_log_entry=%.2f\n", prefix, float64(r.puts)/float64(r.logEntries))
	}
	if r.haveBatch && r.batchEntries > 0 {
		fmt.Fprintf(out, "%sbatch_ops_per_entry=%.2f\n", prefix, r.batchOps/r.batchEntries)
	}
}

// byOwner reorders hashes for batches of batch blocks cut from the front:
// each owner's blocks (b.owners.Owner) in batches of its own, the owners'
// batches interleaved so that consecutive requests go to different nodes,
// and what does not fill a batch (at most one part per owner) at the end,
// where a batch may mix owners (client.Cluster splits it). It is the order
// a client that queues blocks per owner would send them in.
func (b *clusterBench) byOwner(ns *benchNS, hashes []uint64, batch int) []uint64 {
	owned := make(map[string][]uint64)
	var order []string
	for _, h := range hashes {
		id, _ := b.owners.Owner(block.NewKey(ns.name, h))
		if _, ok := owned[id]; !ok {
			order = append(order, id)
		}
		owned[id] = append(owned[id], h)
	}
	out := make([]uint64, 0, len(hashes))
	for more := true; more; {
		more = false
		for _, id := range order {
			if hs := owned[id]; len(hs) >= batch {
				out = append(out, hs[:batch]...)
				owned[id] = hs[batch:]
				more = true
			}
		}
	}
	for _, id := range order {
		out = append(out, owned[id]...)
	}
	return out
}
