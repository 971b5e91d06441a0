package policy

import (
	"errors"
	"fmt"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// ErrConfig reports an invalid policy configuration.
var ErrConfig = errors.New("policy: invalid config")

// SegmentedConfig selects the mechanisms of the Segmented policy. Each one
// can be switched off, which is how docs/policy.md measures its ablation.
type SegmentedConfig struct {
	// Ghost remembers, in a frequency sketch of past insertions, the blocks
	// that were resident before. A block inserted again after eviction has
	// proved it comes back, so it enters the protected segment directly
	// instead of probation (the ghost list of ARC / S3-FIFO, TinyLFU-sized).
	Ghost bool
	// ChainOrder places a block touched or inserted right after its parent
	// (when the parent was the previous operation) just behind the parent
	// in recency order instead of at the front, so within a request the
	// chain's tail is older than its head and is evicted first: a block
	// without its parent is useless for prefix reuse.
	ChainOrder bool
	// TailDemote moves the last block of a chain walk (the block operated on
	// just before an operation that does not continue its chain, if it has
	// no child) to the eviction end of probation: the tail of a request is
	// the block least likely to be extended by a later request.
	TailDemote bool
	// Adaptive tunes ProtectedFraction online by hill climbing on the
	// observed hit ratio (Touch versus Insert), as Caffeine tunes its window:
	// the policy drifts towards LRU where recency wins and towards a large
	// protected segment where frequency wins.
	Adaptive bool
	// ProtectedFraction is the share of tracked blocks the protected
	// segment may hold (the initial share when Adaptive), in [0, 1).
	ProtectedFraction float64
}

// DefaultSegmentedConfig enables every mechanism.
func DefaultSegmentedConfig() SegmentedConfig {
	return SegmentedConfig{Ghost: true, ChainOrder: true, TailDemote: true, Adaptive: true, ProtectedFraction: 0}
}

// Validate reports whether c is usable.
func (c SegmentedConfig) Validate() error {
	if !(c.ProtectedFraction >= 0 && c.ProtectedFraction < 1) {
		return fmt.Errorf("%w: ProtectedFraction %v not in [0, 1)", ErrConfig, c.ProtectedFraction)
	}
	return nil
}

// Factory returns a Factory building Segmented policies with c; c must be
// valid.
func (c SegmentedConfig) Factory() Factory {
	return func(expectedBlocks int) Policy { return newSegmented(c, expectedBlocks) }
}

// NewSegmented returns a Segmented policy with the default configuration.
func NewSegmented(expectedBlocks int) Policy {
	return newSegmented(DefaultSegmentedConfig(), expectedBlocks)
}

const (
	probation = segEntry
	protected = segMain
)

const (
	climbMinStep  = 0.01
	climbMaxFrac  = 0.95
	climbInitStep = 0.0625
	climbDecay    = 0.98
)

// Segmented is a segmented LRU (probation and protected) within each
// priority class, made for prefix caches; see SegmentedConfig for its
// mechanisms and docs/policy.md for their measured effect.
//
// Per block it keeps 18 bytes (two 32-bit links, 32-bit fingerprints of
// the block's and its parent's hash, the priority class and a flag byte), plus the ghost sketch's 8 bytes per
// expected block. Insert, Touch and Remove are O(1) amortized; Victim is
// O(skipped) for non-evictable blocks, like LRU's.
type Segmented struct {
	cfg SegmentedConfig
	segments
	n     int
	last  uint32 // handle of the previous Insert/Touch
	ghost *Sketch

	frac                  float64
	step                  float64
	hits, misses          int
	prevRatio             float64
	havePrev              bool
	periodOps, periodSize int
}

func newSegmented(cfg SegmentedConfig, expectedBlocks int) *Segmented {
	s := &Segmented{
		cfg:        cfg,
		segments:   newSegments(expectedBlocks),
		last:       nilHandle,
		frac:       cfg.ProtectedFraction,
		step:       climbInitStep,
		periodSize: max(expectedBlocks/4, 512),
	}
	if cfg.Ghost {
		s.ghost = NewSketch(expectedBlocks)
	}
	return s
}

// ProtectedFraction is the current protected share (it moves when Adaptive).
func (s *Segmented) ProtectedFraction() float64 { return s.frac }

// place links h (already unlinked, segment set) as the most recent block,
// applying chain order and tail demotion.
func (s *Segmented) place(h uint32) {
	last := s.last
	extends := s.extends(h, last)
	if s.cfg.TailDemote && last != nilHandle && last != h && !extends && s.flags[last]&(flagHasChild|flagMain) == 0 {
		s.unlink(last)
		s.link(last, nilHandle, true)
	}
	after := nilHandle
	if s.cfg.ChainOrder && extends && s.class[last] == s.class[h] && s.seg(last) == s.seg(h) {
		after = last
	}
	s.link(h, after, false)
	s.last = h
}

// balance demotes protected blocks, least recent first and lowest class
// first, until the protected segment is within its share.
func (s *Segmented) balance() {
	limit := int(s.frac * float64(s.n))
	for c := 0; s.perSeg[protected] > limit && c <= block.MaxPriority; {
		t := s.tail(c, protected)
		if t == nilHandle {
			c++
			continue
		}
		s.unlink(t)
		s.setSeg(t, probation)
		s.link(t, nilHandle, false)
	}
}

// climb is the hill climber: once per period it compares the period's hit
// ratio with the previous one and keeps moving the protected share in the
// same direction while the ratio improves, reversing when it worsens, with
// a step that decays towards climbMinStep.
func (s *Segmented) climb() {
	s.periodOps++
	if s.periodOps < s.periodSize {
		return
	}
	ratio := float64(s.hits) / float64(s.hits+s.misses)
	if s.havePrev && ratio < s.prevRatio {
		s.step = -s.step
	}
	s.havePrev, s.prevRatio = true, ratio
	s.frac = min(max(s.frac+s.step, 0), climbMaxFrac)
	if a := s.step * climbDecay; a > climbMinStep || a < -climbMinStep {
		s.step = a
	}
	s.hits, s.misses, s.periodOps = 0, 0, 0
	s.periodSize = max(s.n/4, 512)
}

// Insert implements Policy.
func (s *Segmented) Insert(h Handle, m Meta) {
	u := s.reset(h, m)
	if m.HasParent {
		if l := s.last; l != nilHandle && s.fp[l] == s.pfp[u] {
			s.flags[l] |= flagHasChild
		}
	}
	if s.ghost != nil {
		if s.ghost.Estimate(m.Hash) > 0 {
			s.setSeg(u, protected)
		}
		s.ghost.Record(m.Hash)
	}
	s.place(u)
	s.n++
	s.misses++
	if s.cfg.Adaptive {
		s.climb()
	}
	s.balance()
}

// Touch implements Policy.
func (s *Segmented) Touch(h Handle) {
	u := uint32(h)
	s.unlink(u)
	s.setSeg(u, protected)
	s.place(u)
	s.hits++
	if s.cfg.Adaptive {
		s.climb()
	}
	s.balance()
}

// Remove implements Policy.
func (s *Segmented) Remove(h Handle) {
	u := uint32(h)
	s.unlink(u)
	s.flags[u] = 0
	s.n--
	if s.last == u {
		s.last = nilHandle
	}
}

// Victim implements Policy: the least recent evictable block of probation,
// then of protected, in the lowest priority class that has one.
func (s *Segmented) Victim(evictable func(Handle) bool) (Handle, bool) {
	for c := range block.MaxPriority + 1 {
		for g := probation; g <= protected; g++ {
			if s.count(c, g) == 0 {
				continue
			}
			if h, ok := s.scan(c, g, evictable); ok {
				return h, true
			}
		}
	}
	return 0, false
}

// Len implements Policy.
func (s *Segmented) Len() int { return s.n }
