package policy

import (
	"fmt"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/internal/chunked"
)

// HintConfig selects the mechanisms of Hinted, the hint-aware wrapper; each
// can be switched off to measure its effect (docs/policy.md).
type HintConfig struct {
	// SoftPin keeps a block with a retain window out of the victim choice
	// until the window ends, unless nothing else is evictable.
	SoftPin bool
	// Ephemeral puts blocks hinted block.ReuseNever on the cold queue, the
	// first victims, instead of in the inner policy.
	Ephemeral bool
	// SharedClass is the lowest priority class of blocks hinted
	// block.ReuseShared inside the inner policy (0: they are ordinary
	// blocks); a higher class is evicted only when the lower ones have no
	// evictable block.
	SharedClass uint8
	// RearmOnTouch restarts a block's retain window at each hit: the
	// harness comes back to a session's context turn after turn.
	RearmOnTouch bool
	// DefaultRetain is the retain window, in clock units, of a block
	// hinted session reuse without a window of its own (0: such blocks are
	// retained only when the put gives a window). A shared block without a
	// window has its class only.
	DefaultRetain int64
}

// DefaultHintConfig enables every mechanism, with a 30 s default retain
// window in nanoseconds (the DRAM tier's clock; the longest tool wait of
// Dynamo's agentic examples).
func DefaultHintConfig() HintConfig {
	return HintConfig{SoftPin: true, Ephemeral: true, SharedClass: 1, RearmOnTouch: true, DefaultRetain: 30e9}
}

// Validate reports whether c is usable.
func (c HintConfig) Validate() error {
	switch {
	case c.SharedClass > block.MaxPriority:
		return fmt.Errorf("%w: SharedClass %d > %d", ErrConfig, c.SharedClass, block.MaxPriority)
	case c.DefaultRetain < 0:
		return fmt.Errorf("%w: DefaultRetain %d < 0", ErrConfig, c.DefaultRetain)
	}
	return nil
}

// Factory returns a Factory wrapping the policies inner builds in Hinted
// with c; c must be valid.
func (c HintConfig) Factory(inner Factory) Factory {
	return func(expectedBlocks int) Policy { return c.Wrap(inner(expectedBlocks)) }
}

// Wrap returns inner wrapped in a Hinted with c; c must be valid.
func (c HintConfig) Wrap(inner Policy) *Hinted {
	return &Hinted{cfg: c, inner: inner}
}

type coldRef struct {
	h   Handle
	gen uint32
}

type hintState struct {
	meta     Meta  // as given to inner (hints stripped, class raised)
	retain   int64 // the block's retain window
	pinUntil int64 // soft pin: 0 for none
	gen      uint32
	cold     bool // on the cold queue, not in inner
	shared   bool
	// session, when not 0, links the block into its session's list
	// (prev, next; noHandle ends it) for ReleaseSession.
	session    uint64
	prev, next Handle
}

// noHandle ends a session list.
const noHandle = ^Handle(0)

// Hinted wraps an inner policy with the agent hints of each block
// (Meta.Reuse, Meta.Retain): a FIFO cold queue of blocks that will not be
// read again (block.ReuseNever, or released by Release) is evicted first; a
// block inside its retain window is skipped while any block outside one is
// evictable; blocks hinted shared reuse live in a higher priority class of
// the inner policy. The inner policy sees no hints. A block put without
// hints goes to the inner policy unchanged, so while no block carries a
// hint Hinted makes exactly the inner policy's choices.
//
// Per block it keeps about 72 bytes beside the inner policy's state. Not
// locked, like every Policy.
type Hinted struct {
	cfg      HintConfig
	inner    Policy
	blocks   chunked.Array[hintState]
	coldQ    []coldRef // FIFO from coldHead
	coldHead int
	nCold    int
	nPinned  int // blocks with a soft pin (expired or not)
	now      int64
	// sessions maps a session to the list of its blocks that are neither
	// cold nor shared: one entry per session with such a block, so
	// bounded by the tracked blocks.
	sessions map[uint64]sessionList
}

// Inner is the wrapped policy.
func (p *Hinted) Inner() Policy { return p.inner }

// SetNow implements Clocked.
func (p *Hinted) SetNow(now int64) { p.now = now }

// Cold reports whether h is on the cold queue.
func (p *Hinted) Cold(h Handle) bool { return int(h) < p.blocks.Len() && p.blocks.At(uint32(h)).cold }

// Insert implements Policy.
func (p *Hinted) Insert(h Handle, m Meta) {
	p.blocks.Grow(uint32(h))
	p.unlink(h)
	b := p.blocks.At(uint32(h))
	gen := b.gen + 1
	reuse, retain, session := m.Reuse, m.Retain, m.Session
	m.Reuse, m.Retain, m.Session = block.ReuseUnknown, 0, 0
	*b = hintState{meta: m, gen: gen}
	if reuse == block.ReuseNever && p.cfg.Ephemeral {
		p.toCold(h)
		return
	}
	if reuse == block.ReuseShared && p.cfg.SharedClass > 0 {
		b.shared = true
		b.meta.Priority = max(b.meta.Priority, p.cfg.SharedClass)
	}
	if retain == 0 && reuse == block.ReuseSession {
		retain = p.cfg.DefaultRetain
	}
	if p.cfg.SoftPin && retain > 0 {
		b.retain = retain
		p.pin(b, p.now+retain)
	}
	if session != 0 && !b.shared {
		p.link(h, session)
	}
	p.inner.Insert(h, b.meta)
}

// sessionList is a session's blocks, oldest first.
type sessionList struct{ head, tail Handle }

// link appends h to session's list.
func (p *Hinted) link(h Handle, session uint64) {
	if p.sessions == nil {
		p.sessions = map[uint64]sessionList{}
	}
	b := p.blocks.At(uint32(h))
	b.session, b.prev, b.next = session, noHandle, noHandle
	l, ok := p.sessions[session]
	if ok {
		b.prev = l.tail
		p.blocks.At(uint32(l.tail)).next = h
		l.tail = h
	} else {
		l = sessionList{head: h, tail: h}
	}
	p.sessions[session] = l
}

// unlink takes h out of its session's list, if it is in one.
func (p *Hinted) unlink(h Handle) {
	b := p.blocks.At(uint32(h))
	if b.session == 0 {
		return
	}
	l := p.sessions[b.session]
	if b.prev != noHandle {
		p.blocks.At(uint32(b.prev)).next = b.next
	} else {
		l.head = b.next
	}
	if b.next != noHandle {
		p.blocks.At(uint32(b.next)).prev = b.prev
	} else {
		l.tail = b.prev
	}
	if l.head == noHandle {
		delete(p.sessions, b.session)
	} else {
		p.sessions[b.session] = l
	}
	b.session, b.prev, b.next = 0, noHandle, noHandle
}

// ReleaseSession moves every block of session (Meta.Session) that is not
// shared or cold already to the cold queue, oldest first, as Release
// does: the session ended. It walks only that session's blocks and returns how many it
// released.
func (p *Hinted) ReleaseSession(session uint64) int {
	l, ok := p.sessions[session]
	if session == 0 || !ok {
		return 0
	}
	n, h := 0, l.head
	for h != noHandle {
		next := p.blocks.At(uint32(h)).next
		p.Release(h)
		n++
		h = next
	}
	return n
}

func (p *Hinted) pin(b *hintState, until int64) {
	if b.pinUntil == 0 {
		p.nPinned++
	}
	b.pinUntil = max(b.pinUntil, until)
}

func (p *Hinted) unpin(b *hintState) {
	if b.pinUntil != 0 {
		p.nPinned--
		b.pinUntil = 0
	}
}

func (p *Hinted) toCold(h Handle) {
	b := p.blocks.At(uint32(h))
	b.cold = true
	p.unpin(b)
	p.nCold++
	p.coldQ = append(p.coldQ, coldRef{h: h, gen: b.gen})
}

// Touch implements Policy. A cold block that is hit lives again (its hint
// was wrong) in the inner policy.
func (p *Hinted) Touch(h Handle) {
	b := p.blocks.At(uint32(h))
	if b.cold {
		b.cold = false
		p.nCold--
		b.gen++ // drops its cold-queue entry
		p.inner.Insert(h, b.meta)
	} else {
		p.inner.Touch(h)
	}
	if p.cfg.RearmOnTouch && b.retain > 0 {
		p.pin(b, p.now+b.retain)
	}
}

// Retain extends h's soft pin to until (if SoftPin and h is not cold).
func (p *Hinted) Retain(h Handle, until int64) {
	if b := p.blocks.At(uint32(h)); p.cfg.SoftPin && !b.cold && until > 0 {
		p.pin(b, until)
	}
}

// Release moves h to the cold queue, as if it had been put with
// block.ReuseNever, unless it is cold already or shared: its session ended.
func (p *Hinted) Release(h Handle) {
	b := p.blocks.At(uint32(h))
	if b.cold || b.shared {
		return
	}
	p.unlink(h)
	p.inner.Remove(h)
	p.toCold(h)
}

// Remove implements Policy.
func (p *Hinted) Remove(h Handle) {
	b := p.blocks.At(uint32(h))
	if b.cold {
		b.cold = false
		p.nCold--
	} else {
		p.inner.Remove(h)
	}
	p.unpin(b)
	p.unlink(h)
	b.gen++
}

// Victim implements Policy: the oldest evictable cold block, else the inner
// policy's victim among blocks outside their retain window, else the inner
// policy's victim.
func (p *Hinted) Victim(evictable func(Handle) bool) (Handle, bool) {
	ok := func(h Handle) bool { return evictable == nil || evictable(h) }
	if p.nCold > 0 || len(p.coldQ) > 0 {
		// Stale entries (revived or removed blocks) are dropped from the
		// front; the queue is compacted when half of it is consumed.
		for len(p.coldQ) > p.coldHead {
			o := p.coldQ[p.coldHead]
			if b := p.blocks.At(uint32(o.h)); b.gen == o.gen && b.cold {
				break
			}
			p.coldHead++
		}
		if p.coldHead > len(p.coldQ)/2 {
			p.coldQ = append(p.coldQ[:0], p.coldQ[p.coldHead:]...)
			p.coldHead = 0
		}
		for _, o := range p.coldQ[p.coldHead:] {
			if b := p.blocks.At(uint32(o.h)); b.gen == o.gen && b.cold && ok(o.h) {
				return o.h, true
			}
		}
	}
	if p.nPinned > 0 {
		if h, found := p.inner.Victim(func(h Handle) bool { return p.blocks.At(uint32(h)).pinUntil <= p.now && ok(h) }); found {
			return h, true
		}
	}
	return p.inner.Victim(evictable)
}

// Len implements Policy.
func (p *Hinted) Len() int { return p.inner.Len() + p.nCold }
