package tiers

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/blocktest"
)

// downLower is a cold tier whose reads fail as an unreachable S3 does.
type downLower struct{ *blocktest.Tier }

func (d downLower) Get(_ context.Context, k block.Key, _ block.GetOptions) (*block.Ref, error) {
	if d.Contains(k) {
		return nil, fmt.Errorf("%w: cold tier down", block.ErrUnavailable)
	}
	return nil, block.ErrNotFound
}

func TestChainReadsInOrderAndPromotes(t *testing.T) {
	ctx := context.Background()
	hot, cold := newMemLower(), newMemLower()
	c, err := NewChain(true, hot, cold)
	if err != nil {
		t.Fatal(err)
	}
	if err := cold.Put(ctx, k(1), data(1), block.Checksum(data(1)), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(ctx, k(2), data(2), block.Checksum(data(2)), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if !hot.Contains(k(2)) || cold.Contains(k(2)) {
		t.Fatal("put must go to the first tier only")
	}
	ref, err := c.Get(ctx, k(1), block.GetOptions{})
	if err != nil || string(ref.Data) != string(data(1)) {
		t.Fatalf("cold get: %v", err)
	}
	if !hot.Contains(k(1)) {
		t.Fatal("cold hit not promoted into the first tier")
	}
	if _, err := c.Get(ctx, k(3), block.GetOptions{}); !errors.Is(err, block.ErrNotFound) {
		t.Fatalf("miss: %v", err)
	}
	infos, err := c.List(ctx, "default", "", "", 0)
	if err != nil || len(infos) != 2 {
		t.Fatalf("list: %v %v", infos, err)
	}
	if err := c.Delete(ctx, k(1)); err != nil || c.Contains(k(1)) {
		t.Fatalf("delete: %v", err)
	}
	if err := c.Delete(ctx, k(1)); !errors.Is(err, block.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

func TestManagerOverChainWithColdTierDown(t *testing.T) {
	ctx := context.Background()
	hot, coldMem := newMemLower(), newMemLower()
	c, _ := NewChain(false, hot, downLower{coldMem})
	m := newManager(t, c, 4)
	// Hot tiers keep working while the cold tier is down.
	for i := 0; i < 12; i++ {
		if err := put(t, m, i, block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 12; i++ {
		ref, err := m.Get(ctx, k(i), block.GetOptions{})
		if err != nil {
			t.Fatalf("get %d: %v", i, err)
		}
		ref.Release()
	}
	// A block only the cold tier has fails with ErrUnavailable, not NotFound.
	if err := coldMem.Put(ctx, k(100), data(100), block.Checksum(data(100)), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get(ctx, k(100), block.GetOptions{}); !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("cold-only get: %v", err)
	}
}
