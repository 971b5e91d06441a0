package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxtier/ctxtier/sim/trace"
)

func TestParseSimArgsRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no trace", nil},
		{"unknown policy", []string{"--trace", "x", "--policy", "nope"}},
		{"capacity below a block", []string{"--trace", "x", "--capacity-tokens", "100"}},
		{"bad block size", []string{"--trace", "x", "--block-tokens", "0"}},
		{"bad sweep entry", []string{"--trace", "x", "--sweep-tokens", "1000000,abc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parseSimArgs(tc.args); !errors.Is(err, errSimUsage) {
				t.Fatalf("err %v, want errSimUsage", err)
			}
		})
	}
}

func TestSimSweepWritesPNG(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "t.jsonl")
	data := `{"timestamp":0,"input_length":1024,"output_length":1,"hash_ids":[1,2]}
{"timestamp":1,"input_length":1536,"output_length":1,"hash_ids":[1,2,3]}
{"timestamp":2,"input_length":1024,"output_length":1,"hash_ids":[4,5]}
{"timestamp":3,"input_length":1536,"output_length":1,"hash_ids":[1,2,3]}
`
	if err := os.WriteFile(tr, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	png := filepath.Join(dir, "out.png")
	err := runSim(context.Background(), []string{"--trace", tr, "--sweep", "--sweep-tokens", "1024,2048,4096", "--plot", png})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(png)
	if err != nil || len(b) < 8 || string(b[1:4]) != "PNG" {
		t.Fatalf("plot not written as PNG: %v", err)
	}
}

func TestSimulateWithOracles(t *testing.T) {
	reqs := []trace.Request{{HashIDs: []uint64{1, 2}}, {HashIDs: []uint64{1, 2, 3}}, {HashIDs: []uint64{4, 5}}, {HashIDs: []uint64{1, 2, 3}}}
	row, err := simulate(context.Background(), reqs, "window", nil, 3, false, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(row.oracles) != 2 || row.oracles[0].Policy != "oracle-reused-death" || row.oracles[1].Policy != "oracle-reused-future" {
		t.Fatalf("oracle rows %+v", row.oracles)
	}
	for _, o := range row.oracles {
		if o.Total != row.lru.Total || o.HitRatio() > row.bound {
			t.Fatalf("%s: %d/%d accesses, ratio %.3f above bound %.3f", o.Policy, o.Hits, o.Total, o.HitRatio(), row.bound)
		}
	}
	var out strings.Builder
	printSimRow(&out, simArgs{tracePath: "t", capacityTokens: 1536, blockTokens: 512}, row)
	if !strings.Contains(out.String(), "oracle-reused-future") {
		t.Fatalf("oracles not printed:\n%s", out.String())
	}
}
