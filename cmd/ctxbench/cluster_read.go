package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/client"
)

// readLevelResult is what the read-level phase measured: single-key exists
// requests per second at each read level, over the same blocks, nodes and
// concurrency.
type readLevelResult struct {
	ops       int // per level
	conc      int
	local     time.Duration
	linearize time.Duration
}

func (r *readLevelResult) localOpsPerSec() float64 { return float64(r.ops) / r.local.Seconds() }
func (r *readLevelResult) linOpsPerSec() float64   { return float64(r.ops) / r.linearize.Seconds() }

// readLevelPhase measures what a linearizable read costs against a local
// one: it puts 64 small one-copy blocks, waits until every node indexes
// them, then sends ReadOps single-key exists requests per level (HTTP
// batch/exists, round-robin over the nodes, ReadConcurrency in flight) in
// four alternating passes (local, linearizable, local, linearizable), so
// both levels see the same load drift. Every answer must say present.
func (b *clusterBench) readLevelPhase(ctx context.Context, ns *benchNS) (*readLevelResult, error) {
	cfg := b.cfg
	p := newPayload(cfg.IndexBlockSize, 3)
	hashes := b.hashes(64)
	if _, err := b.putAll(ctx, ns, p, hashes, cfg.ReadConcurrency); err != nil {
		return nil, fmt.Errorf("read-level phase: put: %w", err)
	}
	if err := b.awaitIndexed(ctx, ns, hashes); err != nil {
		return nil, fmt.Errorf("read-level phase: %w", err)
	}
	res := &readLevelResult{ops: 2 * (cfg.ReadOps / 2), conc: cfg.ReadConcurrency}
	for pass := range 4 {
		lin := pass%2 == 1
		pctx := ctx
		if lin {
			pctx = client.WithLinearizable(ctx)
		}
		d, err := b.each(pctx, cfg.ReadOps/2, cfg.ReadConcurrency, 0, func(ctx context.Context, c *client.HTTPClient, i int, _ []byte) error {
			k := block.NewKey(ns.name, hashes[i%len(hashes)])
			ok, err := c.ExistsBatch(ctx, []block.Key{k})
			if err != nil {
				return err
			}
			if !ok[0] {
				return fmt.Errorf("%s: indexed block reads as absent", k)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read-level phase: exists: %w", err)
		}
		level := "local"
		if lin {
			level = "linearizable"
			res.linearize += d
		} else {
			res.local += d
		}
		fmt.Fprintf(b.progress, "read levels: pass %d/4: %d %s exists, %d in flight, in %v\n", pass+1, cfg.ReadOps/2, level, cfg.ReadConcurrency, d.Round(time.Millisecond))
	}
	if err := b.deleteAll(ctx, ns, hashes, cfg.ReadConcurrency); err != nil {
		return nil, fmt.Errorf("read-level phase: delete: %w", err)
	}
	return res, nil
}

func (r *readLevelResult) describe(out io.Writer) {
	fmt.Fprintf(out, "read levels: %d single-key exists per level, %d in flight: local %.0f ops/s, linearizable %.0f ops/s\n",
		r.ops, r.conc, r.localOpsPerSec(), r.linOpsPerSec())
}

func (r *readLevelResult) print(out io.Writer) {
	fmt.Fprintf(out, "exists_local_ops_s=%.0f\nexists_linearizable_ops_s=%.0f\nratio_linearizable_vs_local_exists=%.3f\n",
		r.localOpsPerSec(), r.linOpsPerSec(), r.linOpsPerSec()/r.localOpsPerSec())
}
