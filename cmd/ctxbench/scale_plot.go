package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// writeScalePlots draws the scaling harness's curves against N (log x) into
// dir: scale_entries_per_cpu.png, scale_commit_latency.png,
// scale_memory.png, scale_leader_load.png, scale_idle_cpu.png and
// scale_log_entries.png.
func writeScalePlots(dir string, f scaleFile, out io.Writer) error {
	if len(f.Results) == 0 {
		return fmt.Errorf("ctxbench scale: no results to plot")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var ns []float64
	for _, r := range f.Results {
		ns = append(ns, float64(r.Nodes))
	}
	series := func(i int, name string, get func(scaleResult) float64) plotSeries {
		s := plotSeries{name: name, col: palette[i%len(palette)], xs: ns}
		for _, r := range f.Results {
			s.ys = append(s.ys, get(r))
		}
		return s
	}
	note := fmt.Sprintf(" (%d cpus, load %s)", f.NumCPU, strings.Fields(f.LoadStart + " ?")[0])
	xl := "simulated nodes n (log scale)"
	plots := map[string]linePlot{
		"scale_entries_per_cpu.png": {title: "committed entries per cpu-second of the process" + note, series: []plotSeries{
			series(0, "batches spread over all partitions", func(r scaleResult) float64 { return r.Spread.EntriesPerCPU }),
			series(1, "each batch in one partition", func(r scaleResult) float64 { return r.Grouped.EntriesPerCPU }),
			series(2, "spread, cpu above idle only", func(r scaleResult) float64 { return measured(r.Spread.EntriesPerMarginalCPU) }),
			series(3, "grouped, cpu above idle only", func(r scaleResult) float64 { return measured(r.Grouped.EntriesPerMarginalCPU) }),
		}},
		"scale_commit_latency.png": {title: "batch commit latency, ms" + note, series: []plotSeries{
			series(0, "spread p50", func(r scaleResult) float64 { return measured(r.Spread.CommitP50Ms) }),
			series(1, "spread p99", func(r scaleResult) float64 { return measured(r.Spread.CommitP99Ms) }),
			series(2, "grouped p50", func(r scaleResult) float64 { return measured(r.Grouped.CommitP50Ms) }),
			series(3, "grouped p99", func(r scaleResult) float64 { return measured(r.Grouped.CommitP99Ms) }),
		}},
		"scale_memory.png": {title: "heap kib per node (idle, after load) and bytes per entry" + note, series: []plotSeries{
			series(0, "kib per node, idle", func(r scaleResult) float64 { return r.HeapIdlePerNode / 1024 }),
			series(1, "kib per node, after load", func(r scaleResult) float64 { return r.HeapPerNode / 1024 }),
			series(2, "bytes per entry", func(r scaleResult) float64 { return r.HeapPerEntry }),
		}},
		"scale_leader_load.png": {title: "load per node: groups hosted and led (max, mean), busiest node applies over the mean" + note, series: []plotSeries{
			series(0, "groups hosted, max", func(r scaleResult) float64 { return float64(r.HostedMax) }),
			series(1, "groups hosted, mean", func(r scaleResult) float64 { return float64(r.Groups) / float64(r.Nodes) }),
			series(2, "groups led, max", func(r scaleResult) float64 { return float64(r.LedMax) }),
			series(3, "groups led, mean", func(r scaleResult) float64 { return r.LedMean }),
			series(4, "busiest applies / mean", func(r scaleResult) float64 { return r.BusiestShare * float64(r.Nodes) }),
			series(5, "busiest leader applies / mean", func(r scaleResult) float64 { return r.BusiestLead * float64(r.Nodes) }),
		}},
		"scale_idle_cpu.png": {title: "idle cpu ms per second per node (heartbeats, commit timeouts)" + note, series: []plotSeries{
			series(0, "idle cpu ms/s per node", func(r scaleResult) float64 { return r.IdleCPUPerNodeMs }),
		}},
		"scale_log_entries.png": {title: "index entries per raft log entry" + note, series: []plotSeries{
			series(1, "batches spread over all partitions", func(r scaleResult) float64 { return r.Spread.PerLogEntry }),
			series(2, "each batch in one partition", func(r scaleResult) float64 { return r.Grouped.PerLogEntry }),
		}},
	}
	for name, lp := range plots {
		lp.xLabel, lp.logX, lp.xTicks = xl, true, ns
		if err := lp.writePNG(filepath.Join(dir, name)); err != nil {
			return err
		}
		fmt.Fprintf(out, "plot: %s\n", filepath.Join(dir, name))
	}
	return nil
}

// measured is v, or NaN (no point drawn) for 0, which the results use for
// a figure that could not be measured.
func measured(v float64) float64 {
	if v == 0 {
		return math.NaN()
	}
	return v
}
