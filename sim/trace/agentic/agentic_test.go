package agentic

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/ctxtier/ctxtier/sim/trace"
)

func small() Config {
	c := DefaultConfig()
	c.Sessions = 40
	c.SubAgentPercent = 30
	return c
}

func TestGenerateInvariants(t *testing.T) {
	c := small()
	reqs, err := Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	bySession := map[string][]trace.Request{}
	prefixOf := map[uint64][]uint64{} // first block -> shared prefix
	var last int64
	subs, ends := 0, 0
	for i, r := range reqs {
		if r.TimestampMs < last {
			t.Fatalf("request %d: timestamp %d before %d", i, r.TimestampMs, last)
		}
		last = r.TimestampMs
		h := r.Hints
		if h == nil || r.Session == "" {
			t.Fatalf("request %d has no session or hints", i)
		}
		if h.SharedPrefixBlocks < c.PrefixBlocks.Min || h.SharedPrefixBlocks > c.PrefixBlocks.Max {
			t.Fatalf("request %d: shared prefix %d outside %+v", i, h.SharedPrefixBlocks, c.PrefixBlocks)
		}
		if h.EphemeralTailBlocks < c.Reasoning.Min || h.SharedPrefixBlocks+h.EphemeralTailBlocks > len(r.HashIDs) {
			t.Fatalf("request %d: ephemeral tail %d of %d blocks", i, h.EphemeralTailBlocks, len(r.HashIDs))
		}
		if got := (len(r.HashIDs) - h.EphemeralTailBlocks) * trace.MooncakeBlockTokens; got != r.InputLength {
			t.Fatalf("request %d: input_length %d, prompt blocks make %d", i, r.InputLength, got)
		}
		// Shared prefixes are identical across sessions of one harness.
		p := r.HashIDs[:h.SharedPrefixBlocks]
		if q, ok := prefixOf[p[0]]; ok && !reflect.DeepEqual(p, q) {
			t.Fatalf("request %d: prefix %v differs from %v", i, p, q)
		}
		prefixOf[p[0]] = p
		if h.SessionEnd {
			ends++
		} else if h.ResumeWithinMs < 2000 || h.ResumeWithinMs > 30000 {
			t.Fatalf("request %d: resume_within_ms %d", i, h.ResumeWithinMs)
		}
		if r.ParentSession != "" {
			subs++
		}
		bySession[r.Session] = append(bySession[r.Session], r)
	}
	if len(prefixOf) > c.Harnesses || len(prefixOf) < 2 {
		t.Fatalf("%d distinct harness prefixes, want 2..%d", len(prefixOf), c.Harnesses)
	}
	if subs == 0 {
		t.Fatal("no sub-agent requests")
	}
	if ends != len(bySession) {
		t.Fatalf("%d session ends for %d sessions", ends, len(bySession))
	}
	for id, rs := range bySession {
		for k := 1; k < len(rs); k++ {
			prev, cur := rs[k-1], rs[k]
			prompt := prev.HashIDs[:len(prev.HashIDs)-prev.Hints.EphemeralTailBlocks]
			// Prefix chaining: each turn resends the previous prompt and
			// appends new blocks; the decoded tail is never resent.
			if len(cur.HashIDs) <= len(prompt) || !reflect.DeepEqual(cur.HashIDs[:len(prompt)], prompt) {
				t.Fatalf("session %s turn %d does not extend the previous prompt", id, k)
			}
			tail := prev.HashIDs[len(prompt):]
			for _, b := range tail {
				for _, x := range cur.HashIDs {
					if x == b {
						t.Fatalf("session %s: ephemeral block %d reused", id, b)
					}
				}
			}
			if wait := cur.TimestampMs - prev.TimestampMs; wait < int64(c.CallMs.Min+2000) || wait > int64(c.CallMs.Max+30000) {
				t.Fatalf("session %s: %d ms between calls", id, wait)
			}
			if prev.Hints.SessionEnd {
				t.Fatalf("session %s continues after its end", id)
			}
		}
		// A sub-agent forks from its parent's context: its first prompt
		// starts with a whole earlier prompt of the parent.
		if p := rs[0].ParentSession; p != "" {
			if !strings.HasPrefix(id, p+".") {
				t.Fatalf("sub-agent %s of %s", id, p)
			}
			forked := false
			for _, pr := range bySession[p] {
				prompt := pr.HashIDs[:len(pr.HashIDs)-pr.Hints.EphemeralTailBlocks]
				if pr.TimestampMs < rs[0].TimestampMs && len(prompt) < len(rs[0].HashIDs) && reflect.DeepEqual(rs[0].HashIDs[:len(prompt)], prompt) {
					forked = true
				}
			}
			if !forked {
				t.Fatalf("sub-agent %s does not start with a prompt of %s", id, p)
			}
		}
	}
}

func TestGenerateDeterministicAndRoundTrips(t *testing.T) {
	a, err := Generate(small())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Generate(small())
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed gave different traces")
	}
	c := small()
	c.Seed = 2
	d, _ := Generate(c)
	if reflect.DeepEqual(a, d) {
		t.Fatal("different seeds gave the same trace")
	}
	var buf bytes.Buffer
	if err := trace.Write(&buf, a); err != nil {
		t.Fatal(err)
	}
	back, err := trace.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, back) {
		t.Fatal("trace does not round-trip through Write and Read")
	}
}

func TestValidateRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
	}{
		{"no sessions", func(c *Config) { c.Sessions = 0 }},
		{"no harness", func(c *Config) { c.Harnesses = 0 }},
		{"empty prefix", func(c *Config) { c.PrefixBlocks = Range{0, 0} }},
		{"inverted range", func(c *Config) { c.ToolBlocks = Range{3, 1} }},
		{"no turns", func(c *Config) { c.Turns = Range{0, 3} }},
		{"no tools", func(c *Config) { c.Tools = nil }},
		{"resume below wait", func(c *Config) { c.Tools[0].ResumeWithinMs = 1 }},
		{"bad arrival", func(c *Config) { c.ArrivalMs = 0 }},
		{"bad percent", func(c *Config) { c.SubAgentPercent = 101 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mod(&c)
			if _, err := Generate(c); !errors.Is(err, ErrConfig) {
				t.Fatalf("err %v, want ErrConfig", err)
			}
		})
	}
}
