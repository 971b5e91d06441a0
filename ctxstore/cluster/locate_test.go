package cluster

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// holdersOf is the placement of key in node tn's index, as node IDs with
// shard indexes, sorted. tn's own shard is InMemory: the test nodes' tiers
// are DRAM only, and a node knows no other member's tiers.
func holdersOf(tn *testNode, key block.Key) []ctxstore.Holder {
	e, _ := tn.node.FSM().Lookup(key)
	var out []ctxstore.Holder
	for _, s := range e.Placement {
		out = append(out, ctxstore.Holder{Node: s.NodeID, Shard: int(s.Index), State: "alive", InMemory: s.NodeID == tn.id})
	}
	slices.SortFunc(out, func(a, b ctxstore.Holder) int { return a.Shard - b.Shard })
	return out
}

// TestLocate: every node locates a block at the holders its index places
// it on (this node first when it is one), with the namespace's data-shard
// count and the block's size; a missing block is ErrNotFound; once a
// holder dies and repair moves its shard, no node names it any more.
func TestLocate(t *testing.T) {
	tc := newTestCluster(t, 4, nil)
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		k, m int
	}{
		{"replicated", 1, 2},
		{"coded", 2, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tc.t = t
			tc.createNS(tt.name, tt.k, tt.m)
			key := block.NewKey(tt.name, 7)
			data := payload(7, 50_000)
			if err := tc.nodes[0].store.Put(ctx, key, data, block.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			tc.waitSpread(key, tt.k+tt.m)
			for _, tn := range tc.nodes {
				loc, err := tn.store.Locate(ctx, key, ctxstore.ReadOptions{})
				if err != nil {
					t.Fatalf("%s: %v", tn.id, err)
				}
				if tn.store.LocalNode() != tn.id || loc.Size != int64(len(data)) || loc.DataShards != tt.k {
					t.Fatalf("%s: local %q, location %+v", tn.id, tn.store.LocalNode(), loc)
				}
				got := slices.Clone(loc.Holders)
				slices.SortFunc(got, func(a, b ctxstore.Holder) int { return a.Shard - b.Shard })
				if want := holdersOf(tn, key); !slices.Equal(got, want) {
					t.Fatalf("%s: holders %+v, want %+v", tn.id, got, want)
				}
				here := slices.ContainsFunc(loc.Holders, func(h ctxstore.Holder) bool { return h.Node == tn.id })
				if here && loc.Holders[0].Node != tn.id {
					t.Fatalf("%s holds a shard but is not listed first: %+v", tn.id, loc.Holders)
				}
			}
			// A holder whose shard left its DRAM (here: dropped from its
			// tiers) is still listed, but no longer InMemory.
			holder := tc.nodes[0]
			for _, tn := range tc.nodes {
				if loc, _ := tn.store.Locate(ctx, key, ctxstore.ReadOptions{}); loc.Holders[0].Node == tn.id {
					holder = tn
					break
				}
			}
			loc, err := holder.store.Locate(ctx, key, ctxstore.ReadOptions{})
			if err != nil || loc.Holders[0].Node != holder.id || !loc.Holders[0].InMemory {
				t.Fatalf("%s: %+v, %v: want its own shard listed first, in memory", holder.id, loc.Holders, err)
			}
			c, err := holder.backend.code(tt.name)
			if err != nil {
				t.Fatal(err)
			}
			if err := holder.tiers.Delete(ctx, shardKey(key, c, loc.Holders[0].Shard)); err != nil {
				t.Fatal(err)
			}
			if loc, err := holder.store.Locate(ctx, key, ctxstore.ReadOptions{}); err != nil || loc.Holders[0].Node != holder.id || loc.Holders[0].InMemory {
				t.Fatalf("%s after its shard left DRAM: %+v, %v: want it listed, not in memory", holder.id, loc.Holders, err)
			}
			if _, err := tc.nodes[1].store.Locate(ctx, block.NewKey(tt.name, 8), ctxstore.ReadOptions{}); !errors.Is(err, block.ErrNotFound) {
				t.Fatalf("missing block: %v, want ErrNotFound", err)
			}
			if _, err := tc.nodes[1].store.Locate(ctx, block.NewKey("nope", 7), ctxstore.ReadOptions{}); !errors.Is(err, block.ErrUnknownNamespace) {
				t.Fatalf("missing namespace: %v, want ErrUnknownNamespace", err)
			}
		})
	}
	tc.t = t
	key := block.NewKey("replicated", 7)
	leader := tc.leader()
	loc, err := leader.store.Locate(ctx, key, ctxstore.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var victim string
	for _, h := range loc.Holders {
		if h.Node != leader.id {
			victim = h.Node
			break
		}
	}
	tc.peers.setDown(victim, true)
	tc.eventually("the dead holder's state, then its replacement, in every node's answer", func() bool {
		for _, tn := range tc.nodes {
			if tn.id == victim {
				continue
			}
			loc, err := tn.store.Locate(ctx, key, ctxstore.ReadOptions{})
			if err != nil || len(loc.Holders) != 3 {
				return false
			}
			for _, h := range loc.Holders {
				if h.Node == victim || h.State != fsm.MemberAlive.String() {
					return false
				}
			}
		}
		return true
	})
}

// TestLocateUnclustered: a store over a plain tier stack says so.
func TestLocateUnclustered(t *testing.T) {
	tc := newTestCluster(t, 1, nil)
	s, err := ctxstore.New(ctxstore.DefaultConfig(), tc.nodes[0].node.Catalog(), tc.nodes[0].tiers, testLog())
	if err != nil {
		t.Fatal(err)
	}
	tc.createNS("one", 1, 0)
	if _, err := s.Locate(context.Background(), block.NewKey("one", 1), ctxstore.ReadOptions{}); !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("unclustered locate: %v, want ErrUnavailable", err)
	}
	if s.LocalNode() != "" {
		t.Fatalf("unclustered local node %q", s.LocalNode())
	}
}
