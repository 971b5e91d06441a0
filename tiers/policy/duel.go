package policy

import (
	"fmt"
	"math"

	"github.com/ctxtier/ctxtier/internal/chunked"
)

// DuelConfig configures Duel, which runs the better of two policies online.
type DuelConfig struct {
	// A and B are the two candidate policies.
	A, B Factory
	// StartA makes A the leader before either shadow has shown a lead
	// (else B).
	StartA bool
	// Margin is the smallest lead that moves the leadership, a fraction of
	// the capacity in blocks: the follower takes the lead when its shadow
	// has had Margin x capacity more prefix hits than the leader's since
	// the last switch. A switch reorders what the real cache keeps, so a
	// lead smaller than a fraction of the capacity is not worth one.
	Margin float64
	// Z, when positive, also requires that lead to exceed Z standard
	// deviations of a fair coin walk over the accesses on which the two
	// shadows disagreed since the last switch, so a long run of near-ties
	// does not switch on noise. With Z 0 the counter saturates at the
	// margin instead (set dueling's PSEL): only recent accesses count.
	Z float64
}

// DefaultDuelConfig duels Window (A) against LRU (B), starting from LRU:
// LRU until Window's shadow has shown a lead of 0.5% of the capacity in
// prefix hits that is 5 standard deviations above a coin walk.
func DefaultDuelConfig() DuelConfig {
	return DuelConfig{A: NewWindow, B: NewLRU, Margin: 0.005, Z: 5}
}

// Validate reports whether c is usable.
func (c DuelConfig) Validate() error {
	switch {
	case c.A == nil || c.B == nil:
		return fmt.Errorf("%w: Duel needs two policies", ErrConfig)
	case !(c.Margin > 0 && c.Margin <= 1):
		return fmt.Errorf("%w: Duel Margin %v not in (0, 1]", ErrConfig, c.Margin)
	case !(c.Z >= 0 && c.Z <= 100):
		return fmt.Errorf("%w: Duel Z %v not in [0, 100]", ErrConfig, c.Z)
	}
	return nil
}

// Factory returns a Factory building Duel policies with c; c must be
// valid.
func (c DuelConfig) Factory() Factory {
	return func(expectedBlocks int) Policy { return newDuel(c, expectedBlocks) }
}

// NewDuel returns a Duel with the default configuration.
func NewDuel(expectedBlocks int) Policy { return newDuel(DefaultDuelConfig(), expectedBlocks) }

type duelMeta struct {
	hash, parent uint64
	class        uint8
	hasParent    bool
}

// Duel follows whichever of two policies is doing better on the current
// workload (adaptation by shadow measurement, as set dueling does with
// leader sets). Both policies track the tier's resident blocks, so the
// victim can come from either; two shadow caches of the same capacity
// (metadata only) replay the access stream under each policy alone and
// count the prefix hits each would have had, and the victim comes from the
// policy whose shadow leads (DuelConfig says when the lead changes hands).
// On a switch the new leader takes its shadow's adaptive state (Window's
// window target): its real copy adapted to evictions the other policy
// chose; without this the conversation trace at 10M tokens measured 1.3
// points of the bound lower.
//
// State: both policies' per-block state, both shadows' (each its policy's
// state plus about 40 bytes of map and hash per block of capacity) and 24
// bytes per block of the block's identity: with Window and LRU about 130
// bytes per block of capacity, 5x Window alone. Every operation is O(1)
// amortised besides Victim's skipping of non-evictable blocks, as in the
// two policies; each access costs both policies' update and two shadow
// accesses (a map lookup each).
type Duel struct {
	cfg      DuelConfig
	a, b     Policy
	sa, sb   *shadow
	meta     chunked.Array[duelMeta]
	n        int
	capacity int
	fitted   bool // capacity is the tier's, measured at an eviction
	refit    bool

	leaderA  bool
	lead     float64 // the follower's shadow's lead in prefix hits (see observe)
	disagree float64 // accesses on which the shadows disagreed since the last switch
	switches int
}

func newDuel(cfg DuelConfig, expectedBlocks int) *Duel {
	capacity := max(expectedBlocks, 1)
	return &Duel{
		cfg: cfg,
		a:   cfg.A(expectedBlocks),
		b:   cfg.B(expectedBlocks),
		// The shadows hold every block until the tier's first eviction
		// tells the real capacity (the hint is a guess from bytes):
		// sized from the hint, they would compare the policies in a cache
		// of another size during the whole warm-up.
		sa:       newShadow(cfg.A, capacity, math.MaxInt),
		sb:       newShadow(cfg.B, capacity, math.MaxInt),
		capacity: capacity,
		leaderA:  cfg.StartA,
	}
}

// LeaderA reports whether policy A currently chooses the victims.
func (d *Duel) LeaderA() bool { return d.leaderA }

// Switches is how many times the lead has changed hands.
func (d *Duel) Switches() int { return d.switches }

func (d *Duel) margin() float64 { return max(1, d.cfg.Margin*float64(d.capacity)) }

// observe replays the access of block m in both shadows and moves the lead.
func (d *Duel) observe(m duelMeta) {
	pm := Meta{Hash: m.hash, Parent: m.parent, HasParent: m.hasParent, Priority: m.class}
	ha, hb := d.sa.access(pm), d.sb.access(pm)
	if ha == hb {
		return
	}
	// The follower's lead since the last switch, bounded below by the
	// threshold: the leader's credit saturates (set dueling's PSEL
	// counter), so a long run in its favour cannot delay the next switch
	// by more than one threshold's worth of the follower's hits.
	if ha != d.leaderA {
		d.lead++
	} else {
		d.lead--
	}
	d.disagree++
	need := d.margin()
	if d.cfg.Z > 0 {
		need = max(need, d.cfg.Z*math.Sqrt(d.disagree))
	}
	if d.lead < need {
		d.lead = max(d.lead, -need)
		return
	}
	d.leaderA = !d.leaderA
	d.switches++
	d.lead, d.disagree = 0, 0
	// The new leader starts from the adaptive state its shadow learned:
	// its real copy adapted to evictions the other policy chose.
	syncPolicy(d.a, d.sa.p)
	syncPolicy(d.b, d.sb.p)
}

// Insert implements Policy.
func (d *Duel) Insert(h Handle, m Meta) {
	d.meta.Grow(uint32(h))
	dm := duelMeta{hash: m.Hash, parent: m.Parent, class: m.Priority, hasParent: m.HasParent}
	*d.meta.At(uint32(h)) = dm
	d.observe(dm)
	d.a.Insert(h, m)
	d.b.Insert(h, m)
	d.n++
	d.refit = true
}

// Touch implements Policy.
func (d *Duel) Touch(h Handle) {
	d.observe(*d.meta.At(uint32(h)))
	d.a.Touch(h)
	d.b.Touch(h)
}

// Remove implements Policy.
func (d *Duel) Remove(h Handle) {
	d.a.Remove(h)
	d.b.Remove(h)
	d.n--
}

// Victim implements Policy: the leader's victim.
func (d *Duel) Victim(evictable func(Handle) bool) (Handle, bool) {
	if d.refit {
		// The capacity is the number of resident blocks at the first
		// eviction after an insert (the tier's hint is a guess from bytes).
		d.refit = false
		if d.n > 0 && (!d.fitted || d.n != d.capacity) {
			d.fitted = true
			d.capacity = d.n
			d.sa.resize(d.n)
			d.sb.resize(d.n)
		}
	}
	if d.leaderA {
		return d.a.Victim(evictable)
	}
	return d.b.Victim(evictable)
}

// Len implements Policy.
func (d *Duel) Len() int { return d.n }

// syncer is implemented by policies whose adaptive state can follow a
// shadow's: the follower copies it so that it leads from the state its
// shadow learned.
type syncer interface{ syncFrom(Policy) }

func syncPolicy(dst, src Policy) {
	if s, ok := dst.(syncer); ok {
		s.syncFrom(src)
	}
}

// Leading reports which policy chooses p's victims now, for a tier's
// metrics: window is true while they come from Window (p is Window, or a
// Duel whose leader is its A policy and A is Window, also inside Hinted),
// and switches counts a Duel's changes of lead (0 for any other policy).
func Leading(p Policy) (window bool, switches int) {
	if h, ok := p.(*Hinted); ok {
		p = h.Inner()
	}
	switch p := p.(type) {
	case *Window:
		return true, 0
	case *Duel:
		_, aWindow := p.a.(*Window)
		return p.leaderA == aWindow, p.switches
	}
	return false, 0
}
