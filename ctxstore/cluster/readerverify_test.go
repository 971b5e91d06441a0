package cluster

import (
	"bytes"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/tiers/tierstest"
)

// A read with ReaderVerifies gets a local replica as the tier holds it,
// with the CRC-32C recorded at put, for the reader to check; the backend's
// own shard reads (erasure-coded blocks) are verified by the tier whatever
// the reader declared, so a corrupt local shard is dropped and counted, and
// the block is decoded from good shards.
func TestReaderVerifyThroughBackend(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	for _, code := range []struct {
		name string
		k, m int
	}{{"replicas", 1, 2}, {"coded", 2, 1}} {
		t.Run(code.name, func(t *testing.T) {
			tc.createNS(code.name, code.k, code.m)
			ctx := withTimeout(t, 10*time.Second)
			key := block.NewKey(code.name, 31)
			data := payload(31, 200_000)
			if err := tc.nodes[0].store.Put(ctx, key, data, block.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			tc.waitEntry(key)
			e, _ := tc.nodes[0].node.FSM().Lookup(key)
			// The reader: a node holding a replica, or a data shard.
			var r *testNode
			sk := key
			for _, s := range e.Placement {
				if int(s.Index) < code.k {
					r = tc.byID(s.NodeID)
					if code.k > 1 {
						sk = key.WithShard(int(s.Index))
					}
					break
				}
			}
			tierstest.CorruptDRAM(t, r.tiers, sk, 1000)
			before := r.tiers.DRAM().Stats()
			ref, err := r.store.Read(ctx, key, ctxstore.ReadOptions{ReaderVerifies: true})
			if err != nil {
				t.Fatal(err)
			}
			got := bytes.Clone(ref.Data)
			sum := ref.Sum
			ref.Release()
			after := r.tiers.DRAM().Stats()
			if sum != block.Checksum(data) {
				t.Fatalf("Sum %08x, want the block's CRC-32C %08x", sum, block.Checksum(data))
			}
			if code.k == 1 {
				// Handed to the reader unchecked: its CRC-32C catches it.
				if block.Checksum(got) == sum || after.ReaderVerified != before.ReaderVerified+1 || after.Corruptions != before.Corruptions {
					t.Fatalf("local replica: reader check passes %v, stats before %+v after %+v", block.Checksum(got) == sum, before, after)
				}
				// The reader's re-read without ReaderVerifies: the tier drops the
				// replica and the backend serves another node's.
				mustGet(t, r.store, key, data)
			} else if !bytes.Equal(got, data) {
				t.Fatal("coded block: wrong bytes")
			}
			if s := r.tiers.DRAM().Stats(); s.Corruptions != before.Corruptions+1 || r.tiers.Contains(sk) {
				t.Fatalf("the corrupt local copy must be counted and dropped: before %+v now %+v, held %v", before, s, r.tiers.Contains(sk))
			}
		})
	}
}
