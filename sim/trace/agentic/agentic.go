// Package agentic generates synthetic agentic request traces: sessions of an
// agent harness that share a few harness prefixes (system prompt and tool
// definitions), grow their context turn by turn with tool results and
// visible output, wait 2–30 s for a tool between calls, fork sub-agents
// from the lead's context that run and end, and decode reasoning that the
// next turn never resends. Each request carries the session ids and the
// hints a harness would know (trace.Hints). The output is a Mooncake-format
// trace (one block = trace.MooncakeBlockTokens tokens) with one deliberate
// extension: hash_ids lists the prompt's blocks followed by the blocks the
// engine decodes and stores (reasoning and visible output), counted by
// hints.ephemeral_tail_blocks; input_length covers the prompt only.
//
// Why the decoded blocks are never reused: the next turn resends the
// visible output after the context with the reasoning dropped, so its
// blocks sit at other positions and chain to other hashes.
package agentic

import (
	"container/heap"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/ctxtier/ctxtier/sim/trace"
)

// ErrConfig reports an unusable configuration.
var ErrConfig = errors.New("agentic: invalid config")

// Range is an inclusive integer range drawn uniformly.
type Range struct{ Min, Max int }

func (r Range) valid() bool { return r.Min >= 0 && r.Max >= r.Min }

func (r Range) draw(g *rand.Rand) int { return r.Min + g.IntN(r.Max-r.Min+1) }

// Tool is a class of tool call: its wait is drawn from WaitMs and the
// harness announces ResumeWithinMs (the class's timeout) as a hint.
type Tool struct {
	WaitMs         Range
	ResumeWithinMs int64
	Weight         int
}

// Config shapes the workload. Sizes are in blocks, times in milliseconds.
type Config struct {
	Seed     uint64
	Sessions int // lead sessions
	// Harnesses is the number of distinct harness prefixes; each session
	// uses one, chosen uniformly.
	Harnesses    int
	PrefixBlocks Range // system prompt + tool definitions of a harness
	TaskBlocks   Range // the user's task at a session's start
	Turns        Range // calls of a lead session
	ToolBlocks   Range // tool result appended per turn
	Visible      Range // visible output appended per turn
	Reasoning    Range // reasoning blocks decoded per call, never reused
	CallMs       Range // model time of one call (prefill + decode)
	Tools        []Tool
	// ArrivalMs is the mean gap between lead session starts (exponential).
	ArrivalMs float64
	// SubAgentPercent is the chance, per lead turn, of forking a sub-agent
	// from the lead's current context.
	SubAgentPercent int
	SubAgentTurns   Range
}

// DefaultConfig is the workload docs/policy.md measures.
func DefaultConfig() Config {
	return Config{
		Seed: 1, Sessions: 400, Harnesses: 4,
		PrefixBlocks: Range{8, 24}, TaskBlocks: Range{1, 4}, Turns: Range{4, 24},
		ToolBlocks: Range{1, 6}, Visible: Range{0, 1}, Reasoning: Range{1, 3},
		CallMs: Range{1000, 6000},
		Tools: []Tool{
			{WaitMs: Range{2000, 5000}, ResumeWithinMs: 5000, Weight: 5},
			{WaitMs: Range{5000, 15000}, ResumeWithinMs: 15000, Weight: 3},
			{WaitMs: Range{15000, 30000}, ResumeWithinMs: 30000, Weight: 2},
		},
		ArrivalMs: 300, SubAgentPercent: 12, SubAgentTurns: Range{2, 6},
	}
}

// Validate reports whether c is usable.
func (c Config) Validate() error {
	switch {
	case c.Sessions < 1:
		return fmt.Errorf("%w: Sessions %d < 1", ErrConfig, c.Sessions)
	case c.Harnesses < 1:
		return fmt.Errorf("%w: Harnesses %d < 1", ErrConfig, c.Harnesses)
	case !c.PrefixBlocks.valid() || c.PrefixBlocks.Min < 1:
		return fmt.Errorf("%w: PrefixBlocks %+v", ErrConfig, c.PrefixBlocks)
	case !c.TaskBlocks.valid() || !c.ToolBlocks.valid() || !c.Visible.valid() || !c.Reasoning.valid() || !c.CallMs.valid():
		return fmt.Errorf("%w: a block or time range has Min < 0 or Max < Min", ErrConfig)
	case !c.Turns.valid() || c.Turns.Min < 1 || !c.SubAgentTurns.valid() || c.SubAgentTurns.Min < 1:
		return fmt.Errorf("%w: Turns and SubAgentTurns need Min >= 1", ErrConfig)
	case len(c.Tools) == 0:
		return fmt.Errorf("%w: no tool classes", ErrConfig)
	case !(c.ArrivalMs > 0):
		return fmt.Errorf("%w: ArrivalMs %v <= 0", ErrConfig, c.ArrivalMs)
	case c.SubAgentPercent < 0 || c.SubAgentPercent > 100:
		return fmt.Errorf("%w: SubAgentPercent %d not in [0, 100]", ErrConfig, c.SubAgentPercent)
	}
	for i, t := range c.Tools {
		if !t.WaitMs.valid() || t.Weight < 1 || t.ResumeWithinMs < int64(t.WaitMs.Max) {
			return fmt.Errorf("%w: tool %d: %+v (weight >= 1, resume >= max wait)", ErrConfig, i, t)
		}
	}
	return nil
}

type session struct {
	id, parent string
	prefix     int      // shared prefix blocks
	ctx        []uint64 // context blocks (prompt of the next call)
	turnsLeft  int
	sub        bool
}

type event struct {
	at  int64
	seq int // tie-break: creation order
	s   *session
}

type events []event

func (e events) Len() int { return len(e) }
func (e events) Less(i, j int) bool {
	if e[i].at != e[j].at {
		return e[i].at < e[j].at
	}
	return e[i].seq < e[j].seq
}
func (e events) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)   { *e = append(*e, x.(event)) }
func (e *events) Pop() any {
	old := *e
	v := old[len(old)-1]
	*e = old[:len(old)-1]
	return v
}

// Generate returns the requests of the workload in timestamp order; the same
// config gives the same trace.
func Generate(c Config) ([]trace.Request, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	g := rand.New(rand.NewPCG(c.Seed, c.Seed^0x5DEECE66D))
	var nextID uint64 = 1
	fresh := func(n int) []uint64 {
		out := make([]uint64, n)
		for i := range out {
			out[i] = nextID
			nextID++
		}
		return out
	}
	prefixes := make([][]uint64, c.Harnesses)
	for i := range prefixes {
		prefixes[i] = fresh(c.PrefixBlocks.draw(g))
	}
	totalWeight := 0
	for _, t := range c.Tools {
		totalWeight += t.Weight
	}
	pickTool := func() Tool {
		w := g.IntN(totalWeight)
		for _, t := range c.Tools {
			if w < t.Weight {
				return t
			}
			w -= t.Weight
		}
		return c.Tools[len(c.Tools)-1]
	}
	var q events
	seq := 0
	push := func(at int64, s *session) {
		heap.Push(&q, event{at: at, seq: seq, s: s})
		seq++
	}
	var start float64
	for i := range c.Sessions {
		p := prefixes[g.IntN(c.Harnesses)]
		s := &session{id: fmt.Sprintf("s%d", i), prefix: len(p), turnsLeft: c.Turns.draw(g)}
		s.ctx = append(append([]uint64(nil), p...), fresh(c.TaskBlocks.draw(g))...)
		push(int64(start), s)
		start += g.ExpFloat64() * c.ArrivalMs
	}
	subs := map[string]int{}
	var out []trace.Request
	for q.Len() > 0 {
		e := heap.Pop(&q).(event)
		s := e.s
		s.turnsLeft--
		visible := c.Visible.draw(g)
		out1 := c.Reasoning.draw(g) + visible
		ids := append(append([]uint64(nil), s.ctx...), fresh(out1)...)
		h := &trace.Hints{SharedPrefixBlocks: s.prefix, EphemeralTailBlocks: out1}
		if !s.sub {
			h.Priority = 1
		}
		req := trace.Request{
			TimestampMs: e.at, InputLength: len(s.ctx) * trace.MooncakeBlockTokens,
			OutputLength: out1 * trace.MooncakeBlockTokens, HashIDs: ids,
			Session: s.id, ParentSession: s.parent, Hints: h,
		}
		done := e.at + int64(c.CallMs.draw(g))
		if s.turnsLeft == 0 {
			h.SessionEnd = true
			out = append(out, req)
			continue
		}
		tool := pickTool()
		h.ResumeWithinMs = tool.ResumeWithinMs
		out = append(out, req)
		if !s.sub && g.IntN(100) < c.SubAgentPercent {
			n := subs[s.id]
			subs[s.id] = n + 1
			sub := &session{id: fmt.Sprintf("%s.a%d", s.id, n), parent: s.id, prefix: s.prefix, turnsLeft: c.SubAgentTurns.draw(g), sub: true}
			sub.ctx = append(append([]uint64(nil), s.ctx...), fresh(c.TaskBlocks.draw(g))...)
			push(done, sub)
		}
		s.ctx = append(s.ctx, fresh(visible+c.ToolBlocks.draw(g))...)
		push(done+int64(tool.WaitMs.draw(g)), s)
	}
	return out, nil
}
