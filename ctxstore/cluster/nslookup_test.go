package cluster

import (
	"bytes"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/catalogtest"
)

// A clustered Get looks its namespace up once on the node asked: the
// Store, in the catalog, and hands it down, so the backend takes the
// erasure code from it without a lookup of its own in the FSM. Every node
// reads a replicated block (from its own replica or a remote one) and an
// erasure-coded one. The serving peer's side (its own native server and
// Store, one lookup per frame) is gateway/native's
// TestFrameLooksNamespaceUpOnce; this harness's peers read the member's
// tier stack directly.
func TestGetLooksNamespaceUpOnce(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	ctx := withTimeout(t, 30*time.Second)
	local, remote := 0, 0
	for _, code := range []struct {
		name string
		k, m int
	}{{"once-one-copy", 1, 0}, {"once-two-copies", 1, 1}, {"once-coded", 2, 1}} {
		tc.createNS(code.name, code.k, code.m)
		key := block.NewKey(code.name, 7)
		data := payload(7, 100_000)
		if err := tc.nodes[0].store.Put(ctx, key, data, block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		tc.waitEntry(key)
		for _, n := range tc.nodes {
			t.Run(code.name+"/"+n.id, func(t *testing.T) {
				cat := catalogtest.NewCounting(n.node.Catalog())
				s, err := ctxstore.New(ctxstore.DefaultConfig(), cat, n.backend, testLog())
				if err != nil {
					t.Fatal(err)
				}
				before := n.backend.nsLookups.Load()
				ref, err := s.Get(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				same := bytes.Equal(ref.Data, data)
				tier := ref.Tier
				ref.Release()
				if !same {
					t.Fatal("wrong bytes")
				}
				if code.k == 1 {
					if tier == TierPeer {
						remote++
					} else {
						local++
					}
				}
				if got, backend := cat.Lookups(), n.backend.nsLookups.Load()-before; got != 1 || backend != 0 {
					t.Fatalf("namespace lookups: %d in the catalog, %d in the backend; want 1 and 0", got, backend)
				}
			})
		}
	}
	if local == 0 || remote == 0 {
		t.Fatalf("replicated reads: %d local, %d remote; the test needs both", local, remote)
	}
}

// A clustered Put looks its namespace up once on the node asked too: the
// Store resolves it (PutOptions.Namespace), and the backend takes the
// erasure code from it instead of looking it up in the FSM.
func TestPutLooksNamespaceUpOnce(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	ctx := withTimeout(t, 30*time.Second)
	for _, code := range []struct {
		name string
		k, m int
	}{{"put-once-one-copy", 1, 0}, {"put-once-two-copies", 1, 1}, {"put-once-coded", 2, 1}} {
		tc.createNS(code.name, code.k, code.m)
		for i, n := range tc.nodes {
			t.Run(code.name+"/"+n.id, func(t *testing.T) {
				cat := catalogtest.NewCounting(n.node.Catalog())
				s, err := ctxstore.New(ctxstore.DefaultConfig(), cat, n.backend, testLog())
				if err != nil {
					t.Fatal(err)
				}
				key := block.NewKey(code.name, uint64(100+i))
				data := payload(100+i, 100_000)
				before := n.backend.nsLookups.Load()
				if err := s.Put(ctx, key, data, block.PutOptions{}); err != nil {
					t.Fatal(err)
				}
				if got, backend := cat.Lookups(), n.backend.nsLookups.Load()-before; got != 1 || backend != 0 {
					t.Fatalf("namespace lookups: %d in the catalog, %d in the backend; want 1 and 0", got, backend)
				}
				mustGet(t, n.store, key, data)
			})
		}
	}
}
