package cluster

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
)

func TestDescriptorOfLocalReplicas(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	for _, code := range []struct{ k, m int }{{1, 0}, {1, 2}, {2, 1}} {
		name := fmt.Sprintf("k%dm%d", code.k, code.m)
		t.Run(name, func(t *testing.T) {
			tc.createNS(name, code.k, code.m)
			ctx := withTimeout(t, 10*time.Second)
			key := block.NewKey(name, 7)
			data := payload(7, 50_000)
			if err := tc.nodes[0].store.Put(ctx, key, data, block.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			tc.waitEntry(key)
			described := 0
			for _, n := range tc.nodes {
				d, release, err := n.store.Descriptor(ctx, key, ctxstore.ReadOptions{})
				holds := code.k == 1 && n.tiers.Contains(key)
				switch {
				case holds && err == nil:
					described++
					if d.Tier != block.TierDRAM || d.Length != int64(len(data)) || d.Sum != block.Checksum(data) {
						t.Fatalf("%s: descriptor %+v", n.id, d)
					}
					release()
				case !holds && errors.Is(err, block.ErrUnavailable):
				default:
					t.Fatalf("%s (holds a replica: %v): %v", n.id, holds, err)
				}
				if _, _, err := n.store.Descriptor(ctx, block.NewKey(name, 8), ctxstore.ReadOptions{}); !errors.Is(err, block.ErrNotFound) {
					t.Fatalf("%s: missing block: %v", n.id, err)
				}
			}
			if want := map[bool]int{true: code.k + code.m, false: 0}[code.k == 1]; described != want {
				t.Fatalf("%d nodes described it, want %d", described, want)
			}
		})
	}
}
