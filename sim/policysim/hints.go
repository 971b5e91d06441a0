package policysim

import (
	"errors"
	"fmt"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/sim/trace"
	"github.com/ctxtier/ctxtier/tiers/policy"
)

// RequestObserver is implemented by policies that read a request's session
// and hints: the replay calls BeginRequest before the request's first block
// and EndRequest after its last.
type RequestObserver interface {
	BeginRequest(r *trace.Request)
	EndRequest(r *trace.Request)
}

// ErrHintConfig reports an unusable HintConfig.
var ErrHintConfig = errors.New("policysim: invalid hint config")

// HintConfig selects the mechanisms of the hint-aware policy; each can be
// switched off to measure its effect.
type HintConfig struct {
	// SoftPin keeps a request's blocks out of the victim choice until
	// resume_within_ms (plus PinGraceMs for the call itself) after the
	// request, unless nothing else is evictable.
	SoftPin    bool
	PinGraceMs int64
	// SessionEnd moves the blocks a session inserted, except its shared
	// prefix, to the cold end when the session ends.
	SessionEnd bool
	// Ephemeral keeps a request's ephemeral tail blocks at the cold end
	// (the first victims) instead of in the inner policy.
	Ephemeral bool
	// SharedClass is the priority class of shared-prefix blocks inside the
	// inner policy (0 disables: they are ordinary blocks); a higher class
	// is evicted only when the lower ones have no evictable block.
	SharedClass uint8
}

// DefaultHintConfig enables every mechanism.
func DefaultHintConfig() HintConfig {
	return HintConfig{SoftPin: true, PinGraceMs: 10_000, SessionEnd: true, Ephemeral: true, SharedClass: 1}
}

// Validate reports whether c is usable.
func (c HintConfig) Validate() error {
	if c.PinGraceMs < 0 {
		return fmt.Errorf("%w: PinGraceMs %d < 0", ErrHintConfig, c.PinGraceMs)
	}
	if c.SharedClass > 7 {
		return fmt.Errorf("%w: SharedClass %d > 7", ErrHintConfig, c.SharedClass)
	}
	return nil
}

// HintFactory builds hint-aware policies around the policies inner builds;
// c must be valid. On requests without hints the policy is inner exactly.
// The mechanisms are tiers/policy.Hinted's, the code ctxd's DRAM tier runs;
// this wrapper turns a request's hints into each block's (the shared prefix
// is block.ReuseShared, the ephemeral tail block.ReuseNever, the resume
// window a retain window) and releases a session's own blocks when it ends.
func HintFactory(inner policy.Factory, c HintConfig) policy.Factory {
	return func(expectedBlocks int) policy.Policy {
		core := policy.HintConfig{SoftPin: c.SoftPin, Ephemeral: c.Ephemeral, SharedClass: c.SharedClass}.Wrap(inner(expectedBlocks))
		return &hinted{cfg: c, core: core, sessions: map[string][]owned{}}
	}
}

type owned struct {
	h   policy.Handle
	gen uint32
}

// hinted feeds a request's hints, block by block, to policy.Hinted.
type hinted struct {
	cfg      HintConfig
	core     *policy.Hinted
	gen      []uint32           // bumped when a handle's block leaves or revives
	hash     []uint64           // each handle's block
	sessions map[string][]owned // session -> blocks it inserted

	// The request in progress.
	now     int64
	pos     map[uint64]int
	r       *trace.Request
	shared  int
	ephFrom int // index of the first ephemeral block
	pinTo   int64
}

func (p *hinted) BeginRequest(r *trace.Request) {
	p.r = r
	p.now = r.TimestampMs
	p.core.SetNow(p.now)
	p.shared, p.ephFrom, p.pinTo = 0, len(r.HashIDs), 0
	h := r.Hints
	if h == nil {
		return
	}
	if p.pos == nil {
		p.pos = map[uint64]int{}
	}
	clear(p.pos)
	for i, id := range r.HashIDs {
		p.pos[id] = i
	}
	p.shared = h.SharedPrefixBlocks
	if p.cfg.Ephemeral {
		p.ephFrom = len(r.HashIDs) - h.EphemeralTailBlocks
	}
	if p.cfg.SoftPin && h.ResumeWithinMs > 0 && !h.SessionEnd {
		p.pinTo = r.TimestampMs + h.ResumeWithinMs + p.cfg.PinGraceMs
	}
}

func (p *hinted) EndRequest(r *trace.Request) {
	if r.Hints == nil || !r.Hints.SessionEnd || !p.cfg.SessionEnd {
		return
	}
	for _, o := range p.sessions[r.Session] {
		if p.gen[o.h] == o.gen {
			p.core.Release(o.h)
		}
	}
	delete(p.sessions, r.Session)
}

// position is the index of a block in the request in progress, or -1.
func (p *hinted) position(hash uint64) int {
	if p.r == nil || p.r.Hints == nil {
		return -1
	}
	if i, ok := p.pos[hash]; ok {
		return i
	}
	return -1
}

func (p *hinted) Insert(h policy.Handle, m policy.Meta) {
	for int(h) >= len(p.gen) {
		p.gen = append(p.gen, 0)
		p.hash = append(p.hash, 0)
	}
	p.gen[h]++
	p.hash[h] = m.Hash
	i := p.position(m.Hash)
	switch {
	case i >= p.ephFrom:
		m.Reuse = block.ReuseNever
	case i >= 0 && i < p.shared:
		m.Reuse = block.ReuseShared
	case i >= 0 && p.r.Session != "":
		p.sessions[p.r.Session] = append(p.sessions[p.r.Session], owned{h: h, gen: p.gen[h]})
	}
	if m.Reuse != block.ReuseNever && p.pinTo > 0 {
		m.Retain = p.pinTo - p.now
	}
	p.core.Insert(h, m)
}

func (p *hinted) Touch(h policy.Handle) {
	if p.core.Cold(h) {
		p.gen[h]++ // a revived block leaves its session's list
	}
	p.core.Touch(h)
	if i := p.position(p.hash[h]); i >= 0 && i < p.ephFrom && p.pinTo > 0 {
		p.core.Retain(h, p.pinTo)
	}
}

func (p *hinted) Remove(h policy.Handle) {
	p.gen[h]++
	p.core.Remove(h)
}

func (p *hinted) Victim(evictable func(policy.Handle) bool) (policy.Handle, bool) {
	return p.core.Victim(evictable)
}

func (p *hinted) Len() int { return p.core.Len() }

// WireHintFactory builds policies that see only what a put carries on the
// wire: each inserted block's hint from trace.Request.BlockHint (grace
// PinGraceMs), given to policy.Hinted with ctxd's default HintConfig (a
// hit restarts a block's own retain window; no session-end release), on the
// trace's clock in milliseconds. It is what ctxd's default policy does with
// the hints `ctxbench sim --ctxd --ctxd-hints` sends.
func WireHintFactory(inner policy.Factory, graceMs int64) policy.Factory {
	return func(expectedBlocks int) policy.Policy {
		c := policy.DefaultHintConfig()
		c.DefaultRetain = c.DefaultRetain / int64(time.Millisecond) // the trace's clock is in ms
		return &wireHinted{Hinted: c.Wrap(inner(expectedBlocks)), grace: time.Duration(graceMs) * time.Millisecond}
	}
}

type wireHinted struct {
	*policy.Hinted
	grace time.Duration
	r     *trace.Request
	pos   map[uint64]int
}

func (p *wireHinted) BeginRequest(r *trace.Request) {
	p.r = r
	p.SetNow(r.TimestampMs)
	if p.pos == nil {
		p.pos = map[uint64]int{}
	}
	clear(p.pos)
	for i, id := range r.HashIDs {
		p.pos[id] = i
	}
}

func (p *wireHinted) EndRequest(*trace.Request) {}

func (p *wireHinted) Insert(h policy.Handle, m policy.Meta) {
	if i, ok := p.pos[m.Hash]; ok && p.r != nil {
		reuse, retain := p.r.BlockHint(i, p.grace, 1)
		m.Reuse, m.Retain = reuse, int64(retain/time.Millisecond)
	}
	p.Hinted.Insert(h, m)
}
