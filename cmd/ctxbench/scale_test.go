package main

import (
	"context"
	"encoding/json"
	"errors"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/partition"
)

func TestParseScaleArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		ok   bool
	}{
		{"defaults", nil, true},
		{"bad node count", []string{"--nodes", "10,x"}, false},
		{"fewer nodes than replicas", []string{"--nodes", "2,10"}, false},
		{"no batch", []string{"--batch", "0"}, false},
		{"no clients", []string{"--clients", "0"}, false},
		{"no groups", []string{"--groups-per-node", "0"}, false},
		{"no duration", []string{"--duration", "0s"}, false},
		{"from without plot dir", []string{"--from", "x.json"}, false},
		{"from with plot dir", []string{"--from", "x.json", "--plot-dir", "d"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseScaleArgs(tc.args, io.Discard)
			if (err == nil) != tc.ok {
				t.Fatalf("err %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, errScaleUsage) {
				t.Fatalf("err %v, want errScaleUsage", err)
			}
		})
	}
}

// TestPartitionPoolBatches: every batch the grouped source hands out is of
// one partition, no key is handed out twice, and an exhausted pool stops.
func TestPartitionPoolBatches(t *testing.T) {
	cfg := partition.DefaultConfig()
	cfg.Partitions = 7
	pp := newPartitionPool(cfg, 700, 42)
	src := pp.source(cfg.Partitions, 3)
	seen := map[uint64]bool{}
	hs := make([]uint64, 8)
	batches := 0
	for k := 0; src(k, hs); k++ {
		p := cfg.Of(block.NewKey(block.DefaultNamespace, hs[0]))
		for _, h := range hs {
			if q := cfg.Of(block.NewKey(block.DefaultNamespace, h)); q != p {
				t.Fatalf("batch %d mixes partitions %d and %d", k, p, q)
			}
			if seen[h] {
				t.Fatalf("key %x handed out twice", h)
			}
			seen[h] = true
		}
		batches++
	}
	// 700 keys over 7 partitions in batches of 8: every partition gives
	// all its whole batches (about 100/8 = 12) before the source stops.
	if batches < 7*10 || len(seen) > 700 {
		t.Fatalf("%d batches, %d keys from a pool of 700", batches, len(seen))
	}
}

// TestScaleHarnessSmall runs the harness at N=10 for a moment: both load
// phases acknowledge entries, every acknowledged entry is verified in its
// partition's index (scaleOne fails otherwise), one leader per partition,
// and the JSON file draws its plots.
func TestScaleHarnessSmall(t *testing.T) {
	dir := t.TempDir()
	a, err := parseScaleArgs([]string{"--nodes", "10", "--duration", "500ms", "--idle", "200ms", "--clients", "8", "--batch", "16",
		"--json", filepath.Join(dir, "s.json")}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out strings.Builder
	if err := scaleMain(ctx, a, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(a.jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var f scaleFile
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Results) != 1 {
		t.Fatalf("%d results for one N", len(f.Results))
	}
	r := f.Results[0]
	if r.Nodes != 10 || r.Partitions != 10 || r.Groups != 30 {
		t.Fatalf("N=%d P=%d replicas=%d, want 10, 10 (3 groups per node, 3 voters), 30", r.Nodes, r.Partitions, r.Groups)
	}
	if r.Spread.Acked == 0 || r.Grouped.Acked == 0 || r.Verified != r.Spread.Acked+r.Grouped.Acked {
		t.Fatalf("acked %d + %d, verified %d", r.Spread.Acked, r.Grouped.Acked, r.Verified)
	}
	if got := r.LedMean * float64(r.Nodes); got < float64(r.Partitions)-0.01 || got > float64(r.Partitions)+0.01 {
		t.Fatalf("%.2f groups led in all, want one per partition (%d)", got, r.Partitions)
	}
	if !strings.Contains(out.String(), "nodes=10 ") || !strings.Contains(out.String(), "grouped_entries_per_cpu_s=") {
		t.Fatalf("result line: %q", out.String())
	}
	plots := filepath.Join(dir, "plots")
	if err := scaleMain(ctx, scaleArgs{from: a.jsonPath, plotDir: plots}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"scale_entries_per_cpu.png", "scale_commit_latency.png", "scale_memory.png", "scale_leader_load.png", "scale_idle_cpu.png", "scale_log_entries.png"} {
		fh, err := os.Open(filepath.Join(plots, name))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(fh)
		fh.Close()
		if err != nil || img.Bounds().Dx() != 960 {
			t.Fatalf("%s: %v", name, err)
		}
	}
}
