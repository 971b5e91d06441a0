package main

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	// leader is set when the same node led before and after the phase;
	// the deltas below are its own and meaningless across a change.
	leader     string
	logEntries uint64
	// batchOps and batchEntries are the deltas of the leader's
	// ctxtier_raft_batch_ops_sum and _count: index operations and the
	// group-committed log entries that carried them.
	batchOps, batchEntries float64
	haveBatch              bool
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
		return s, nil
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
// holds every one, reads a sample back, and deletes them.
func (b *clusterBench) indexPhase(ctx context.Context, ns *benchNS) (*indexResult, error) {
	cfg := b.cfg
	p := newPayload(cfg.IndexBlockSize, 2)
	hashes := b.hashes(cfg.IndexBlocks)
	before, berr := b.snapLeader(ctx)
	d, err := b.putAll(ctx, ns, p, hashes, cfg.IndexConcurrency)
	if err != nil {
		return nil, fmt.Errorf("index phase: put: %w", err)
	}
	after, aerr := b.snapLeader(ctx)
	res := &indexResult{puts: len(hashes), dur: d}
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
	fmt.Fprintf(b.progress, "index: %d x %s one-copy puts, %d in flight, in %v\n", len(hashes), block.FormatSize(int64(cfg.IndexBlockSize)), cfg.IndexConcurrency, d.Round(time.Millisecond))
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
	fmt.Fprintf(out, "index: %d one-copy puts of %d B, %d in flight, in %.2fs: %.0f block entries/s",
		r.puts, cfg.IndexBlockSize, cfg.IndexConcurrency, r.dur.Seconds(), float64(r.puts)/r.dur.Seconds())
	if r.leader != "" {
		fmt.Fprintf(out, "; leader %s's commit index advanced %d", r.leader, r.logEntries)
		if r.haveBatch {
			fmt.Fprintf(out, "; its batcher committed %.0f index ops in %.0f log entries", r.batchOps, r.batchEntries)
		}
	}
	fmt.Fprintln(out)
}

func (r *indexResult) print(out io.Writer) {
	fmt.Fprintf(out, "index_commit_entries_per_s=%.0f\n", float64(r.puts)/r.dur.Seconds())
	if r.leader == "" {
		return
	}
	fmt.Fprintf(out, "index_raft_log_entries=%d\n", r.logEntries)
	if r.logEntries > 0 {
		fmt.Fprintf(out, "index_entries_per_log_entry=%.2f\n", float64(r.puts)/float64(r.logEntries))
	}
	if r.haveBatch && r.batchEntries > 0 {
		fmt.Fprintf(out, "index_batch_ops_per_entry=%.2f\n", r.batchOps/r.batchEntries)
	}
}
