package tiers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Chain is a Lower made of lower tiers in order, hottest first (NVMe, then
// S3). Puts go to the first; reads try each in turn and, with Promote, copy a
// hit from a colder tier into the first (so a block restored from S3 lives on
// NVMe again, as well as in DRAM through the manager's own promotion). A
// colder tier failing (S3 down) never hides what a hotter one holds.
type Chain struct {
	Tiers []Lower
	// Promote copies hits from colder tiers into Tiers[0].
	Promote bool
}

// NewChain returns a chain over tiers (at least one).
func NewChain(promote bool, tiers ...Lower) (*Chain, error) {
	if len(tiers) == 0 {
		return nil, fmt.Errorf("%w: tiers: a chain needs at least one tier", block.ErrInvalidArgument)
	}
	return &Chain{Tiers: tiers, Promote: promote}, nil
}

// IndexLoader is a tier that may still be loading its index after a start
// (the S3 tier rebuilds its index from the bucket when the local copy is
// lost): until IndexLoaded, Contains cannot tell a block it lacks from one
// it has not indexed yet.
type IndexLoader interface {
	IndexLoaded() bool
}

// IndexLoaded reports whether every tier of the chain that loads an index
// has finished.
func (c *Chain) IndexLoaded() bool {
	for _, t := range c.Tiers {
		if l, ok := t.(IndexLoader); ok && !l.IndexLoaded() {
			return false
		}
	}
	return true
}

// Put writes to the first tier.
func (c *Chain) Put(ctx context.Context, key block.Key, data []byte, sum uint32, opts block.PutOptions) error {
	return c.Tiers[0].Put(ctx, key, data, sum, opts)
}

// Get reads the tiers in order. The error, when every tier misses, is the
// most telling one: a colder tier's ErrUnavailable (S3 down) wins over
// ErrNotFound, so callers learn the block may exist but cannot be had now.
func (c *Chain) Get(ctx context.Context, key block.Key, opts block.GetOptions) (*block.Ref, error) {
	var first error
	for i, t := range c.Tiers {
		ref, err := t.Get(ctx, key, opts)
		if err == nil {
			if i > 0 && c.Promote {
				c.promote(ctx, key, ref)
			}
			return ref, nil
		}
		if first == nil || (errors.Is(first, block.ErrNotFound) && !errors.Is(err, block.ErrNotFound)) {
			first = err
		}
	}
	return nil, first
}

func (c *Chain) promote(ctx context.Context, key block.Key, ref *block.Ref) {
	opts := block.PutOptions{Sum: ref.Sum, HasSum: true}
	// A failed promotion only costs the next read a trip to the colder tier.
	_ = c.Tiers[0].Put(ctx, key, ref.Data, ref.Sum, opts)
}

// Stat returns the hottest copy's metadata.
func (c *Chain) Stat(ctx context.Context, key block.Key) (block.Info, error) {
	var first error
	for _, t := range c.Tiers {
		info, err := t.Stat(ctx, key)
		if err == nil {
			return info, nil
		}
		if first == nil {
			first = err
		}
	}
	return block.Info{}, first
}

// Contains reports presence in any tier.
func (c *Chain) Contains(key block.Key) bool {
	for _, t := range c.Tiers {
		if t.Contains(key) {
			return true
		}
	}
	return false
}

// Delete removes key from every tier; ErrNotFound only if none had it.
func (c *Chain) Delete(ctx context.Context, key block.Key) error {
	var notFound, other error
	found := false
	for _, t := range c.Tiers {
		err := t.Delete(ctx, key)
		switch {
		case err == nil:
			found = true
		case errors.Is(err, block.ErrNotFound):
			notFound = err
		case other == nil:
			other = err
		}
	}
	switch {
	case other != nil:
		return other
	case found:
		return nil
	default:
		return notFound
	}
}

// Pin pins the block wherever it is; it succeeds if any tier pinned it.
func (c *Chain) Pin(ctx context.Context, key block.Key, until time.Time) error {
	var first error
	ok := false
	for _, t := range c.Tiers {
		if err := t.Pin(ctx, key, until); err == nil {
			ok = true
		} else if first == nil {
			first = err
		}
	}
	if ok {
		return nil
	}
	return first
}

// List merges the tiers' listings in object-name order, each block once
// (reported from the hottest tier holding it).
func (c *Chain) List(ctx context.Context, ns, prefix, after string, limit int) ([]block.Info, error) {
	var out []block.Info
	for i, t := range c.Tiers {
		b, err := t.List(ctx, ns, prefix, after, limit)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			out = b
			continue
		}
		out = mergeInfos(out, b, limit)
	}
	return out, nil
}

// mergeInfos merges two name-ordered listings, preferring a's entry for a
// name in both, up to limit (0 for all).
func mergeInfos(a, b []block.Info, limit int) []block.Info {
	out := make([]block.Info, 0, len(a)+len(b))
	for i, j := 0, 0; i < len(a) || j < len(b); {
		if limit > 0 && len(out) == limit {
			break
		}
		switch {
		case j == len(b) || i < len(a) && a[i].Key.ObjectName() < b[j].Key.ObjectName():
			out = append(out, a[i])
			i++
		case i == len(a) || b[j].Key.ObjectName() < a[i].Key.ObjectName():
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i, j = i+1, j+1
		}
	}
	return out
}
