package main

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/ctxtier/ctxtier/sim/trace"
)

func TestAgenticArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no out", nil},
		{"no sessions", []string{"--out", "x", "--sessions", "0"}},
		{"bad percent", []string{"--out", "x", "--subagent-percent", "200"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := parseAgenticArgs(tc.args); !errors.Is(err, errAgenticUsage) {
				t.Fatalf("err %v, want errAgenticUsage", err)
			}
		})
	}
}

func TestAgenticWritesReadableTrace(t *testing.T) {
	out := filepath.Join(t.TempDir(), "a.jsonl")
	if err := runAgentic(context.Background(), []string{"--out", out, "--sessions", "5"}); err != nil {
		t.Fatal(err)
	}
	reqs, err := trace.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	sessions := map[string]bool{}
	for _, r := range reqs {
		if r.Hints == nil {
			t.Fatal("request without hints")
		}
		if r.ParentSession == "" {
			sessions[r.Session] = true
		}
	}
	if len(sessions) != 5 {
		t.Fatalf("%d lead sessions, want 5", len(sessions))
	}
}
