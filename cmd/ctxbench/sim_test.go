package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxtier/ctxtier/sim/policysim"
	"github.com/ctxtier/ctxtier/sim/replay"
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
	row, err := simulate(context.Background(), reqs, "window", nil, 3, policysim.Options{}, true)
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

// TestParseSimArgsReplaySemantics: --touch-after-miss=false selects the
// simulator's PrefixTouchOnly and prefix-only reads in the ctxd replay;
// --key-salt fixes the ctxd replay's keys; saltTrace XORs the replay's
// mask into every id.
func TestParseSimArgsReplaySemantics(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		prefixOnly bool
		salt       uint64
	}{
		{"defaults", nil, false, 0},
		{"replay semantics", []string{"--touch-after-miss=false"}, true, 0},
		{"replay keys", []string{"--key-salt", "1"}, false, 1},
		{"both", []string{"--key-salt", "3", "--touch-after-miss=false"}, true, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := parseSimArgs(append([]string{"--trace", "x"}, tc.args...))
			if err != nil {
				t.Fatal(err)
			}
			if a.opt.PrefixTouchOnly != tc.prefixOnly || a.ctxd.prefixOnly != tc.prefixOnly {
				t.Fatalf("prefix only: simulator %v, ctxd replay %v; want %v", a.opt.PrefixTouchOnly, a.ctxd.prefixOnly, tc.prefixOnly)
			}
			if a.keySalt != tc.salt || a.ctxd.fixedKeys != (tc.salt != 0) {
				t.Fatalf("key salt %d, fixed ctxd keys %v; want %d", a.keySalt, a.ctxd.fixedKeys, tc.salt)
			}
		})
	}
	rs := []trace.Request{{HashIDs: []uint64{1, 2}}, {HashIDs: []uint64{2, 3}}}
	saltTrace(rs, replay.SaltMask(5))
	m := replay.SaltMask(5)
	if m == 0 || rs[0].HashIDs[0] != 1^m || rs[0].HashIDs[1] != 2^m || rs[1].HashIDs[0] != 2^m || rs[1].HashIDs[1] != 3^m {
		t.Fatalf("salted ids %v %v, mask %x", rs[0].HashIDs, rs[1].HashIDs, m)
	}
}
