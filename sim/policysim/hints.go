package policysim

import (
	"errors"
	"fmt"

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
var ErrHintConfig = errors.New("sim: invalid hint config")

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
func HintFactory(inner policy.Factory, c HintConfig) policy.Factory {
	return func(expectedBlocks int) policy.Policy {
		return &hinted{cfg: c, inner: inner(expectedBlocks), sessions: map[string][]owned{}}
	}
}

type owned struct {
	h   policy.Handle
	gen uint32
}

type hintBlock struct {
	meta     policy.Meta
	pinUntil int64
	gen      uint32
	cold     bool // on the cold queue, not in inner
	shared   bool
}

// hinted wraps an inner policy with the harness's hints: a FIFO cold queue
// of blocks known to be dead (ephemeral tails, ended sessions) is evicted
// first; soft-pinned blocks are skipped while their pin lasts; shared
// prefixes live in a higher priority class of the inner policy.
type hinted struct {
	cfg      HintConfig
	inner    policy.Policy
	blocks   []hintBlock
	coldQ    []owned // FIFO from coldHead
	coldHead int
	nCold    int
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
		b := &p.blocks[o.h]
		if b.gen != o.gen || b.cold || b.shared {
			continue
		}
		p.inner.Remove(o.h)
		p.toCold(o.h)
	}
	delete(p.sessions, r.Session)
}

func (p *hinted) toCold(h policy.Handle) {
	b := &p.blocks[h]
	b.cold = true
	b.pinUntil = 0
	p.nCold++
	p.coldQ = append(p.coldQ, owned{h: h, gen: b.gen})
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
	for int(h) >= len(p.blocks) {
		p.blocks = append(p.blocks, hintBlock{})
	}
	b := &p.blocks[h]
	gen := b.gen + 1
	*b = hintBlock{meta: m, gen: gen}
	i := p.position(m.Hash)
	if i >= p.ephFrom {
		p.toCold(h)
		return
	}
	if i >= 0 && i < p.shared {
		b.shared = true
		b.meta.Priority = max(b.meta.Priority, p.cfg.SharedClass)
	}
	if i >= 0 && !b.shared && p.r.Session != "" {
		p.sessions[p.r.Session] = append(p.sessions[p.r.Session], owned{h: h, gen: gen})
	}
	b.pinUntil = p.pinTo
	p.inner.Insert(h, b.meta)
}

func (p *hinted) Touch(h policy.Handle) {
	b := &p.blocks[h]
	if b.cold {
		// A dead block came back (a hint was wrong): it lives again.
		b.cold = false
		p.nCold--
		b.gen++ // drops its cold-queue entry
		p.inner.Insert(h, b.meta)
	} else {
		p.inner.Touch(h)
	}
	if i := p.position(b.meta.Hash); i >= 0 && i < p.ephFrom {
		b.pinUntil = max(b.pinUntil, p.pinTo)
	}
}

func (p *hinted) Remove(h policy.Handle) {
	b := &p.blocks[h]
	if b.cold {
		b.cold = false
		p.nCold--
	} else {
		p.inner.Remove(h)
	}
	b.gen++
}

func (p *hinted) Victim(evictable func(policy.Handle) bool) (policy.Handle, bool) {
	ok := func(h policy.Handle) bool { return evictable == nil || evictable(h) }
	// Stale entries (revived or removed blocks) are dropped from the front;
	// the queue is compacted when half of it is consumed.
	for len(p.coldQ) > p.coldHead {
		o := p.coldQ[p.coldHead]
		if b := &p.blocks[o.h]; b.gen == o.gen && b.cold {
			break
		}
		p.coldHead++
	}
	if p.coldHead > len(p.coldQ)/2 {
		p.coldQ = append(p.coldQ[:0], p.coldQ[p.coldHead:]...)
		p.coldHead = 0
	}
	for _, o := range p.coldQ[p.coldHead:] {
		if b := &p.blocks[o.h]; b.gen == o.gen && b.cold && ok(o.h) {
			return o.h, true
		}
	}
	if p.cfg.SoftPin {
		if h, found := p.inner.Victim(func(h policy.Handle) bool { return p.blocks[h].pinUntil <= p.now && ok(h) }); found {
			return h, true
		}
	}
	return p.inner.Victim(evictable)
}

func (p *hinted) Len() int { return p.inner.Len() + p.nCold }
