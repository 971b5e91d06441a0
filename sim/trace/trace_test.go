package trace

import (
	"math"
	"strings"
	"testing"

	"github.com/ctxtier/ctxtier/internal/testdep"
)

func TestReadAndBound(t *testing.T) {
	in := `{"timestamp": 0, "input_length": 1024, "output_length": 5, "hash_ids": [1, 2]}

{"timestamp": 10, "input_length": 1536, "output_length": 5, "hash_ids": [1, 2, 3]}
{"timestamp": 20, "input_length": 1024, "output_length": 5, "hash_ids": [9, 2]}
`
	reqs, err := Read(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 3 || reqs[1].TimestampMs != 10 || len(reqs[1].HashIDs) != 3 {
		t.Fatalf("parsed %+v", reqs)
	}
	// Hits: request 2 hits 1,2 (3 misses); request 3 misses 9 so 2 does not count.
	if got, want := InfiniteCacheHitRatio(reqs), 2.0/7.0; math.Abs(got-want) > 1e-12 {
		t.Fatalf("bound %v, want %v", got, want)
	}
}

func TestReadAgentFields(t *testing.T) {
	in := `{"timestamp": 0, "input_length": 1024, "output_length": 5, "hash_ids": [1, 2, 3], "session": "s1", "parent_session": "s0", "hints": {"priority": 2, "shared_prefix_blocks": 1, "resume_within_ms": 5000, "session_end": true, "ephemeral_tail_blocks": 1}}
{"timestamp": 10, "input_length": 512, "output_length": 5, "hash_ids": [1]}
`
	reqs, err := Read(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := Hints{Priority: 2, SharedPrefixBlocks: 1, ResumeWithinMs: 5000, SessionEnd: true, EphemeralTailBlocks: 1}
	if r := reqs[0]; r.Session != "s1" || r.ParentSession != "s0" || r.Hints == nil || *r.Hints != want {
		t.Fatalf("agent fields parsed as %+v", r)
	}
	if r := reqs[1]; r.Session != "" || r.Hints != nil {
		t.Fatalf("absent fields parsed as %+v", r)
	}
}

func TestReadRejectsBadHints(t *testing.T) {
	for _, tc := range []struct{ name, line string }{
		{"shared beyond request", `{"hash_ids": [1], "hints": {"shared_prefix_blocks": 2}}`},
		{"ephemeral beyond request", `{"hash_ids": [1], "hints": {"ephemeral_tail_blocks": 3}}`},
		{"negative resume", `{"hash_ids": [1], "hints": {"resume_within_ms": -1}}`},
		{"negative shared", `{"hash_ids": [1], "hints": {"shared_prefix_blocks": -1}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tc.line + "\n"))
			if err == nil || !strings.Contains(err.Error(), "line 1") {
				t.Fatalf("want a line-1 error, got %v", err)
			}
		})
	}
}

func TestReadRejectsMalformedLine(t *testing.T) {
	_, err := Read(strings.NewReader("{\"timestamp\": 0}\n{not json\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("want a line-2 error, got %v", err)
	}
}

// TestSharedTraceBounds checks the published bounds of the shared traces
// (36.6% and 64.0%), when ../shared is present.
func TestSharedTraceBounds(t *testing.T) {
	for _, tc := range []struct {
		file  string
		bound float64
	}{{"conversation_trace.jsonl", 0.366}, {"synthetic_trace.jsonl", 0.640}} {
		path := "../../../shared/traces/" + tc.file
		testdep.Path(t, path, "shared trace "+tc.file, "the shared traces live in ../shared/traces beside the repository")
		reqs, err := ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := InfiniteCacheHitRatio(reqs); math.Abs(got-tc.bound) > 0.001 {
			t.Errorf("%s: bound %.4f, want %.3f", tc.file, got, tc.bound)
		}
	}
}
