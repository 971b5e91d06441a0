package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
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
