package policy

import (
	"fmt"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// WindowConfig selects the mechanisms of the Window policy. Each one can be
// switched off, which is how docs/policy.md measures its ablation.
type WindowConfig struct {
	// Ghost remembers recently evicted blocks (Bloom-filter generations, 2
	// bytes per remembered block). A block inserted again soon after its
	// eviction has proved that it comes back, so it enters the main segment
	// directly instead of the window (the ghost list of ARC and S3-FIFO).
	Ghost bool
	// ChainOrder places a block touched or inserted right after its parent
	// (when the parent was the previous operation) just behind the parent
	// in recency order, so the tail of a chain is evicted before its head:
	// a block without its parent is useless for prefix reuse.
	ChainOrder bool
	// TailDemote moves the last block of a chain walk (the block operated on
	// just before an operation that does not continue its chain, if it was
	// never hit, has no child and has a parent) to the eviction end of the
	// window: the last block of a request is the one least likely to be
	// extended. A block inserted without a parent is demoted only while
	// most inserts carry one (the stream is chain walks, and the block is a
	// one-block walk); a client that never sends parents would otherwise
	// see every block demoted by the next put, so its puts were evicted
	// newest first.
	TailDemote bool
	// Adaptive sizes the window from marginal ghost hits, as ARC sizes its
	// recency list: a block that comes back shortly after its eviction from
	// the window (within the last GhostMargin x capacity window evictions)
	// is a hit that a slightly larger window would have had, and likewise
	// for main; each such return moves the window target one step towards
	// the segment that would have caught it.
	Adaptive bool
	// WindowFraction is the share of capacity the window may hold (the
	// initial share when Adaptive), in (0, 1].
	WindowFraction float64
	// GhostSpan is how many evictions, in multiples of the capacity, the
	// admission ghost remembers (between half of it and all of it).
	GhostSpan float64
	// GhostMargin is the depth of the marginal ghosts, a fraction of the
	// capacity: the extra room whose value the adaptation estimates.
	GhostMargin float64
	// Step is the adaptation step, a fraction of the capacity.
	Step float64
}

// DefaultWindowConfig enables every mechanism.
func DefaultWindowConfig() WindowConfig {
	return WindowConfig{
		Ghost: true, ChainOrder: true, TailDemote: true, Adaptive: true,
		WindowFraction: 0.1, GhostSpan: 3, GhostMargin: 0.05, Step: 0.0005,
	}
}

// Validate reports whether c is usable.
func (c WindowConfig) Validate() error {
	switch {
	case !(c.WindowFraction > 0 && c.WindowFraction <= 1):
		return fmt.Errorf("%w: WindowFraction %v not in (0, 1]", ErrConfig, c.WindowFraction)
	case c.Ghost && !(c.GhostSpan > 0 && c.GhostSpan <= 64):
		return fmt.Errorf("%w: GhostSpan %v not in (0, 64]", ErrConfig, c.GhostSpan)
	case c.Adaptive && !(c.GhostMargin > 0 && c.GhostMargin <= 1):
		return fmt.Errorf("%w: GhostMargin %v not in (0, 1]", ErrConfig, c.GhostMargin)
	case c.Adaptive && !(c.Step > 0 && c.Step <= 1):
		return fmt.Errorf("%w: Step %v not in (0, 1]", ErrConfig, c.Step)
	}
	return nil
}

// Factory returns a Factory building Window policies with c; c must be
// valid.
func (c WindowConfig) Factory() Factory {
	return func(expectedBlocks int) Policy { return newWindow(c, expectedBlocks) }
}

// NewWindow returns a Window policy with the default configuration.
func NewWindow(expectedBlocks int) Policy { return newWindow(DefaultWindowConfig(), expectedBlocks) }

// segWindow is the window segment of a class (segMain is the main one).
const segWindow = segEntry

// Window is a two-segment policy for prefix caches, per priority class: new
// blocks enter a small LRU window; blocks that are hit, or that come back
// after an eviction the ghost remembers, live in a main LRU. Victims come
// from the window while it is above its target share, else from main. See
// WindowConfig for the mechanisms and docs/policy.md for their measured
// effect.
//
// Per block it keeps 18 bytes (two 32-bit links, 32-bit fingerprints of the
// block's and its parent's hash, the class and a flag byte); the ghosts add
// about 6.4 bytes per block of capacity with the default configuration
// (GhostSpan 3: 6 bytes; two marginal ghosts: 0.4). Insert, Touch and Remove
// are O(1); Victim is O(skipped) for non-evictable blocks, like LRU's.
type Window struct {
	cfg WindowConfig
	segments
	n    int
	last uint32 // handle of the previous Insert/Touch

	capacity int     // blocks: the hint, then the size at which eviction starts
	target   float64 // window target in blocks
	ghostCap int     // the capacity the ghosts were sized for
	inserts  int     // Inserts so far
	chained  int     // of which with a parent
	refit    bool    // an Insert since the last Victim
	ghost    *ghostSet
	margin   [2]*ghostSet // recently evicted from window / from main
}

func newWindow(cfg WindowConfig, expectedBlocks int) *Window {
	w := &Window{
		cfg:      cfg,
		segments: newSegments(expectedBlocks),
		last:     nilHandle,
		capacity: max(expectedBlocks, 1),
	}
	w.target = cfg.WindowFraction * float64(w.capacity)
	w.sizeGhosts()
	return w
}

// sizeGhosts (re)builds the ghosts for the current capacity, forgetting
// what they remembered.
func (w *Window) sizeGhosts() {
	w.ghostCap = w.capacity
	if w.cfg.Ghost {
		w.ghost = newGhostSet(int(w.cfg.GhostSpan * float64(w.capacity)))
	}
	if w.cfg.Adaptive {
		for g := range w.margin {
			w.margin[g] = newGhostSet(int(2 * w.cfg.GhostMargin * float64(w.capacity)))
		}
	}
}

// fit sets the capacity to n blocks, the number resident when the tier
// first needs a victim after an insert: the expectedBlocks hint is only a
// guess from bytes (the DRAM tier sizes it for 256 KiB blocks), and every
// share of capacity (the window target, the adaptation step, the ghosts'
// span) must be in real blocks. With larger blocks a target sized from the
// hint would exceed the whole tier, so victims would come from main first,
// inverting the policy. The target keeps its share; the ghosts are rebuilt
// only when the capacity moved by more than a factor of 2 from the one
// they were sized for, so mixed block sizes do not keep clearing them. In
// the simulator the hint is exact and fit changes nothing.
func (w *Window) fit(n int) {
	if n <= 0 || n == w.capacity {
		return
	}
	w.target = min(w.target*float64(n)/float64(w.capacity), float64(n))
	w.capacity = n
	if n > 2*w.ghostCap || 2*n < w.ghostCap {
		w.sizeGhosts()
	}
}

// WindowTarget is the current window target in blocks (it moves when
// Adaptive).
func (w *Window) WindowTarget() float64 { return w.target }

// place links h (unlinked, segment set) as the most recent block of its
// segment, applying tail demotion and chain order.
func (w *Window) place(h uint32, ext bool) {
	l := w.last
	if w.cfg.TailDemote && !ext && l != nilHandle && l != h &&
		w.flags[l]&(flagHasChild|flagHit|flagMain) == 0 &&
		(w.flags[l]&flagHasParent != 0 || 2*w.chained > w.inserts) {
		w.unlink(l)
		w.link(l, nilHandle, true)
	}
	after := nilHandle
	if w.cfg.ChainOrder && ext && w.class[l] == w.class[h] && w.seg(l) == w.seg(h) {
		after = l
	}
	w.link(h, after, false)
	w.last = h
}

// Insert implements Policy.
func (w *Window) Insert(h Handle, m Meta) {
	u := w.reset(h, m)
	w.inserts++
	if m.HasParent {
		w.chained++
	}
	ext := w.extends(u, w.last)
	if ext {
		w.flags[w.last] |= flagHasChild
	}
	f := w.fp[u]
	if w.ghost != nil && w.ghost.contains(f) {
		w.flags[u] |= flagMain
	}
	if w.cfg.Adaptive {
		step := max(1, w.cfg.Step*float64(w.capacity))
		if w.margin[segWindow].contains(f) {
			w.target = min(w.target+step, float64(w.capacity))
		}
		if w.margin[segMain].contains(f) {
			w.target = max(w.target-step, 0)
		}
	}
	w.place(u, ext)
	w.n++
	w.refit = true
}

// Touch implements Policy: a hit promotes a window block to main.
func (w *Window) Touch(h Handle) {
	u := uint32(h)
	ext := w.extends(u, w.last)
	w.unlink(u)
	w.flags[u] |= flagMain | flagHit
	w.place(u, ext)
}

// Remove implements Policy. The tier calls it for evictions and for deletes
// alike; both are remembered by the ghosts (a deleted block that is written
// again is rare, and remembering it costs one entry).
func (w *Window) Remove(h Handle) {
	u := uint32(h)
	g := w.seg(u)
	w.unlink(u)
	if w.ghost != nil {
		w.ghost.add(w.fp[u])
	}
	if w.cfg.Adaptive {
		w.margin[g].add(w.fp[u])
	}
	w.flags[u] = 0
	w.n--
	if w.last == u {
		w.last = nilHandle
	}
}

// Victim implements Policy: within the lowest priority class that has an
// evictable block, the least recent evictable block of the window while the
// window is above its target (or main is empty), else of main.
func (w *Window) Victim(evictable func(Handle) bool) (Handle, bool) {
	if w.refit {
		w.refit = false
		w.fit(w.n)
	}
	for c := range block.MaxPriority + 1 {
		order := [2]int{segMain, segWindow}
		if float64(w.perSeg[segWindow]) > w.target || w.count(c, segMain) == 0 {
			order = [2]int{segWindow, segMain}
		}
		for _, g := range order {
			if w.count(c, g) == 0 {
				continue
			}
			if h, ok := w.scan(c, g, evictable); ok {
				return h, true
			}
		}
	}
	return 0, false
}

// Len implements Policy.
func (w *Window) Len() int { return w.n }

// syncFrom takes src's window target as a share of capacity (Duel).
func (w *Window) syncFrom(src Policy) {
	if o, ok := src.(*Window); ok {
		w.target = o.target * float64(w.capacity) / float64(o.capacity)
	}
}
