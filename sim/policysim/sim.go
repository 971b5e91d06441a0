// Package policysim replays a request trace against a tier of fixed capacity with
// prefix semantics, driving a replacement policy through the same
// policy.Policy interface the DRAM tier uses, and computes Belady's offline
// optimum at the same capacity, through the same replay loop, for comparison.
//
// Prefix semantics: a request's blocks hit until its first miss (an engine
// can only reuse a contiguous cached prefix). After the request every block
// of it is resident: blocks already resident are touched, missing ones are
// inserted (evicting as needed), as an engine stores the KV blocks it just
// computed. Touches and inserts happen in prefix order, head first, which is
// the order in which an engine reads and writes a prompt's blocks.
package policysim

import (
	"errors"
	"fmt"

	"github.com/ctxtier/ctxtier/sim/trace"
	"github.com/ctxtier/ctxtier/tiers/policy"
)

// ErrCapacity reports a capacity too small to simulate.
var ErrCapacity = errors.New("policysim: capacity must be at least one block")

// Result is the outcome of one replay.
type Result struct {
	Policy         string
	CapacityBlocks int
	Hits, Total    int64
}

// HitRatio is hits over all block accesses.
func (r Result) HitRatio() float64 {
	if r.Total == 0 {
		return 0
	}
	return float64(r.Hits) / float64(r.Total)
}

// Options tune the replay.
type Options struct {
	// ProtectRequest marks the blocks of the request being processed as not
	// evictable while it is processed (the engine holds them), so a policy
	// cannot evict a block the same request just stored.
	ProtectRequest bool
	// PrefixTouchOnly touches only a request's hit prefix: after its first
	// miss, blocks that are resident are left alone (not touched; the
	// missing ones are inserted as always). This is what a tier sees from
	// an engine that reads the prefix it found and puts the blocks it
	// computed, when a put of a block the tier already holds does not
	// reach its policy: ctxd's cluster index answers such a put itself
	// (ctxstore/cluster planPut), which is how `ctxbench replay` drives
	// ctxd. Belady and the partial oracles ignore it: a bound sees every
	// access.
	PrefixTouchOnly bool
}

// Run replays reqs through a tier of capacityBlocks blocks whose eviction
// order is decided by the policy that newPolicy builds.
func Run(reqs []trace.Request, capacityBlocks int, name string, newPolicy policy.Factory, opt Options) (Result, error) {
	if capacityBlocks < 1 {
		return Result{}, fmt.Errorf("%w: got %d", ErrCapacity, capacityBlocks)
	}
	return replay(reqs, capacityBlocks, name, newPolicy(capacityBlocks), nil, opt), nil
}

// Belady replays reqs with Belady's MIN: the victim is the resident block
// whose next use lies farthest in the future (never used again first; within
// one future request, the deeper block first).
func Belady(reqs []trace.Request, capacityBlocks int, opt Options) (Result, error) {
	if capacityBlocks < 1 {
		return Result{}, fmt.Errorf("%w: got %d", ErrCapacity, capacityBlocks)
	}
	b := newBelady(reqs, capacityBlocks)
	opt.PrefixTouchOnly = false // its next-use table needs every access
	return replay(reqs, capacityBlocks, "belady", b, b, opt), nil
}

// clock is told the global index of each access before the policy sees it;
// only the offline oracle needs it.
type clock interface{ at(access int) }

func replay(reqs []trace.Request, capacity int, name string, p policy.Policy, clk clock, opt Options) Result {
	res := Result{Policy: name, CapacityBlocks: capacity}
	slot := make(map[uint64]policy.Handle, capacity)
	hashOf := make([]uint64, 0, capacity) // handle -> block hash
	var free []policy.Handle
	busy := make([]bool, 0, capacity) // handle -> in the current request
	var held []policy.Handle
	var evictable func(policy.Handle) bool
	if opt.ProtectRequest {
		evictable = func(h policy.Handle) bool { return !busy[h] }
	}
	obs, _ := p.(RequestObserver)
	access := 0
	for ri := range reqs {
		r := &reqs[ri]
		if obs != nil {
			obs.BeginRequest(r)
		}
		res.Total += int64(len(r.HashIDs))
		miss := false
		var parent uint64
		for i, id := range r.HashIDs {
			if clk != nil {
				clk.at(access)
			}
			access++
			h, resident := slot[id]
			switch {
			case resident:
				switch {
				case !miss:
					res.Hits++
					p.Touch(h)
				case !opt.PrefixTouchOnly:
					p.Touch(h)
				}
			default:
				miss = true
				if len(slot) >= capacity {
					v, ok := p.Victim(evictable)
					if !ok {
						// Everything resident belongs to this request: it
						// is larger than the tier; its tail is not stored.
						continue
					}
					p.Remove(v)
					delete(slot, hashOf[v])
					free = append(free, v)
				}
				if n := len(free); n > 0 {
					h = free[n-1]
					free = free[:n-1]
				} else {
					h = policy.Handle(len(hashOf))
					hashOf = append(hashOf, 0)
					busy = append(busy, false)
				}
				hashOf[h] = id
				slot[id] = h
				m := policy.Meta{Hash: id, Size: trace.MooncakeBlockTokens}
				if i > 0 {
					m.Parent, m.HasParent = parent, true
				}
				p.Insert(h, m)
			}
			if opt.ProtectRequest {
				busy[h] = true
				held = append(held, h)
			}
			parent = id
		}
		for _, h := range held {
			busy[h] = false
		}
		held = held[:0]
		if obs != nil {
			obs.EndRequest(r)
		}
	}
	return res
}
