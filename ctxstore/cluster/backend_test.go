package cluster

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

func TestPutGetAcrossCodes(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	codes := []struct{ k, m int }{{1, 0}, {1, 2}, {2, 1}}
	for _, code := range codes {
		name := fmt.Sprintf("k%dm%d", code.k, code.m)
		t.Run(name, func(t *testing.T) {
			tc.createNS(name, code.k, code.m)
			ctx := withTimeout(t, 10*time.Second)
			for i := range 6 {
				key := block.NewKey(name, uint64(1000+i))
				data := payload(i, 100_000+i*7)
				w := tc.nodes[i%3] // followers forward their commits
				if err := w.store.Put(ctx, key, data, block.PutOptions{}); err != nil {
					t.Fatalf("put via %s: %v", w.id, err)
				}
				tc.waitEntry(key)
				e, _ := tc.nodes[0].node.FSM().Lookup(key)
				nodes := map[string]bool{}
				for _, s := range e.Placement {
					nodes[s.NodeID] = true
					sk := key
					if code.k > 1 {
						sk = key.WithShard(int(s.Index))
					}
					if !tc.byID(s.NodeID).tiers.Contains(sk) {
						t.Fatalf("placement says %v on %s, its tiers do not hold it", sk, s.NodeID)
					}
				}
				if len(e.Placement) != code.k+code.m || len(nodes) != code.k+code.m {
					t.Fatalf("placement %+v for k=%d m=%d", e.Placement, code.k, code.m)
				}
				for _, r := range tc.nodes {
					mustGet(t, r.store, key, data)
				}
				// Idempotent with the same bytes; a conflict with others.
				if err := tc.nodes[(i+1)%3].store.Put(ctx, key, data, block.PutOptions{}); err != nil {
					t.Fatalf("same bytes again: %v", err)
				}
				if err := tc.nodes[(i+2)%3].store.Put(ctx, key, payload(99, 5000), block.PutOptions{}); !errors.Is(err, block.ErrConflict) {
					t.Fatalf("other bytes: %v, want ErrConflict", err)
				}
				mustGet(t, tc.nodes[2].store, key, data)
			}
			if tc.fwd.n == 0 {
				t.Fatal("no proposal was forwarded")
			}
		})
	}
}

func TestGetSurvivesLostAndCorruptShards(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	for _, code := range []struct{ k, m int }{{1, 2}, {2, 1}} {
		name := fmt.Sprintf("k%dm%d", code.k, code.m)
		t.Run(name, func(t *testing.T) {
			tc.createNS(name, code.k, code.m)
			ctx := withTimeout(t, 10*time.Second)
			for i, damage := range []string{"lost", "corrupt"} {
				key := block.NewKey(name, uint64(7+i))
				data := payload(i+40, 65_537)
				if err := tc.nodes[0].store.Put(ctx, key, data, block.PutOptions{}); err != nil {
					t.Fatal(err)
				}
				tc.waitEntry(key)
				e, _ := tc.nodes[0].node.FSM().Lookup(key)
				victim := e.Placement[0] // a data shard (index 0)
				sk := key
				if code.k > 1 {
					sk = key.WithShard(int(victim.Index))
				}
				vt := tc.byID(victim.NodeID).tiers
				good, err := vt.Get(ctx, sk, block.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				bad := append([]byte(nil), good.Data...)
				good.Release()
				if err := vt.Delete(ctx, sk); err != nil {
					t.Fatal(err)
				}
				if damage == "corrupt" {
					bad[len(bad)/2] ^= 0xff // stored with its own (matching) checksum: only the block CRC can tell
					if err := vt.Put(ctx, sk, bad, block.Checksum(bad), block.PutOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				for _, r := range tc.nodes {
					mustGet(t, r.store, key, data)
				}
			}
		})
	}
}

func TestConcurrentPutsOfOneKeyAgree(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	tc.createNS("race", 1, 2)
	ctx := withTimeout(t, 20*time.Second)
	for round := range 3 {
		key := block.NewKey("race", uint64(round))
		a, b := payload(round, 30_000), payload(round+100, 30_000)
		var wg sync.WaitGroup
		errs := make([]error, 6)
		for w := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d := a
				if w%2 == 1 {
					d = b
				}
				errs[w] = tc.nodes[w%3].store.Put(ctx, key, d, block.PutOptions{})
			}()
		}
		wg.Wait()
		won := false
		for _, err := range errs {
			won = won || err == nil
		}
		if !won {
			// Both sides can lose (each blocked the other's shards): then
			// nothing may be indexed.
			if tc.nodes[0].backend.Contains(key) {
				t.Fatalf("round %d: every put failed (%v) yet the key is indexed", round, errs)
			}
			continue
		}
		tc.waitEntry(key)
		e, _ := tc.nodes[0].node.FSM().Lookup(key)
		winner := a
		if e.Sum == block.Checksum(b) {
			winner = b
		}
		for w, err := range errs {
			mine := a
			if w%2 == 1 {
				mine = b
			}
			same := string(mine) == string(winner)
			if same && err != nil && !errors.Is(err, block.ErrUnavailable) {
				t.Fatalf("round %d writer %d with the winning bytes: %v", round, w, err)
			}
			if !same && !errors.Is(err, block.ErrConflict) && !errors.Is(err, block.ErrUnavailable) {
				t.Fatalf("round %d writer %d with the losing bytes: %v, want a conflict", round, w, err)
			}
		}
		for _, r := range tc.nodes {
			mustGet(t, r.store, key, winner)
		}
	}
}

func TestRepairAfterMemberDies(t *testing.T) {
	tc := newTestCluster(t, 4, nil)
	tc.createNS("rep", 1, 2)
	tc.createNS("rs", 2, 1)
	ctx := withTimeout(t, 20*time.Second)
	type blk struct {
		key  block.Key
		data []byte
	}
	var blocks []blk
	for i := range 12 {
		ns := "rep"
		if i%2 == 1 {
			ns = "rs"
		}
		b := blk{block.NewKey(ns, uint64(i)), payload(i, 20_000+i)}
		if err := tc.nodes[i%4].store.Put(ctx, b.key, b.data, block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, b)
	}
	leader := tc.leader()
	var victim *testNode
	for _, tn := range tc.nodes {
		if tn != leader {
			victim = tn
			break
		}
	}
	held := 0
	for _, b := range blocks {
		e, _ := leader.node.FSM().Lookup(b.key)
		for _, s := range e.Placement {
			if s.NodeID == victim.id {
				held++
			}
		}
	}
	if held == 0 {
		t.Fatal("test needs the victim to hold shards")
	}
	tc.peers.setDown(victim.id, true)
	tc.eventually("victim marked dead", func() bool {
		m, _ := leader.node.FSM().Member(victim.id)
		return m.State == fsm.MemberDead
	})
	tc.eventually("full redundancy without the victim", func() bool {
		for _, b := range blocks {
			e, _ := leader.node.FSM().Lookup(b.key)
			nodes := map[string]bool{}
			for _, s := range e.Placement {
				if s.NodeID == victim.id {
					return false
				}
				nodes[s.NodeID] = true
			}
			if len(e.Placement) != 3 || len(nodes) != 3 {
				return false
			}
		}
		return true
	})
	// The counters move after the placement commits (repairPass counts a
	// task once repairOne returns), so the last one may lag the FSM.
	tc.eventually("the repair counters to count the last task", func() bool {
		return leader.backend.RepairStatus().RepairedShards >= uint64(held)
	})
	st := leader.backend.RepairStatus()
	if !st.Active || st.RepairedShards != uint64(held) || st.RepairedBytes == 0 {
		t.Fatalf("repair status %+v, want %d shards repaired", st, held)
	}
	for _, b := range blocks {
		for _, r := range tc.nodes {
			if r != victim {
				mustGet(t, r.store, b.key, b.data)
			}
		}
	}
	// The victim comes back: alive again.
	tc.peers.setDown(victim.id, false)
	tc.eventually("victim alive again", func() bool {
		m, _ := leader.node.FSM().Member(victim.id)
		return m.State == fsm.MemberAlive
	})
}

func TestCapacityDropsKeepTheIndexTruthful(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	tc.createNS("one", 1, 0)
	ctx := withTimeout(t, 20*time.Second)
	// 3 nodes x 8 MiB of DRAM, no lower tier; 48 blocks of 1 MiB must evict.
	var keys []block.Key
	for i := range 48 {
		key := block.NewKey("one", uint64(i))
		if err := tc.nodes[i%3].store.Put(ctx, key, payload(i, 1<<20), block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key)
	}
	drops := uint64(0)
	for _, tn := range tc.nodes {
		drops += tn.tiers.Stats().Drops
	}
	if drops == 0 {
		t.Fatal("no eviction happened: the test is not testing anything")
	}
	// Every node's index, not only the leader's: the reads below use nodes
	// 1 and 2, whose FSMs may apply the drops a moment later.
	tc.eventually("every node's index forgets every dropped block", func() bool {
		for _, tn := range tc.nodes {
			for _, k := range keys {
				e, ok := tn.node.FSM().Lookup(k)
				if ok && !tc.byID(e.Placement[0].NodeID).tiers.Contains(k) {
					return false
				}
			}
		}
		return true
	})
	present := 0
	for i, k := range keys {
		if ok, _ := tc.nodes[1].store.Exists(ctx, k, ctxstore.ReadOptions{}); ok {
			present++
			mustGet(t, tc.nodes[2].store, k, payload(i, 1<<20))
		}
	}
	if present == 0 || present == len(keys) {
		t.Fatalf("%d of %d blocks indexed after %d drops", present, len(keys), drops)
	}
}

func TestForwardedRequests(t *testing.T) {
	tc := newTestCluster(t, 1, nil)
	b := tc.nodes[0].backend
	ctx := withTimeout(t, 5*time.Second)
	if _, err := b.HandleForwarded(ctx, fsm.EncodeMember(fsm.MemberCommand{Action: fsm.MemberRemove, Member: fsm.Member{ID: "n1"}})); !errors.Is(err, block.ErrInvalidArgument) {
		t.Fatalf("member command forwarded: %v", err)
	}
	if _, err := b.HandleForwarded(ctx, []byte{1}); !errors.Is(err, block.ErrInvalidArgument) {
		t.Fatalf("garbage forwarded: %v", err)
	}
	key := block.NewKey(block.DefaultNamespace, 1)
	op := fsm.PutOp(key, fsm.Entry{Size: 10, Sum: 5, Placement: []fsm.Shard{{NodeID: "n1"}}})
	out, err := b.HandleForwarded(ctx, fsm.EncodeIndex([]fsm.Op{op, op}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := DecodeResults(out, 2)
	if err != nil || res[0].Status != fsm.StatusCreated || res[1].Status != fsm.StatusExisted {
		t.Fatalf("%+v %v", res, err)
	}
	for _, bad := range [][]byte{nil, {2}, out[:len(out)-1], append(out, 0)} {
		if _, err := DecodeResults(bad, 2); err == nil {
			t.Fatalf("decoded %x", bad)
		}
	}
}

// TestCodedGetHedgesAStalledShard: with RS(2,1), a data shard whose holder
// does not answer (a partition whose connection has not failed yet) costs
// the hedge delay, not the shard timeout: parity is asked for after
// hedgeDelay and the block is decoded from the two shards in hand.
func TestCodedGetHedgesAStalledShard(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	tc.createNS("rs21", 2, 1)
	ctx := withTimeout(t, 20*time.Second)
	key := block.NewKey("rs21", 99)
	data := payload(99, 100_003)
	if err := tc.nodes[0].store.Put(ctx, key, data, block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	tc.waitEntry(key)
	e, _ := tc.nodes[0].node.FSM().Lookup(key)
	var victim string
	for _, s := range e.Placement {
		if s.Index < 2 {
			victim = s.NodeID
			break
		}
	}
	// Read through a node that does not hold the stalled data shard, so the
	// slow read is a remote one.
	var reader *testNode
	for _, n := range tc.nodes {
		if n.id != victim {
			reader = n
			break
		}
	}
	tc.peers.setStalled(victim, true)
	defer tc.peers.setStalled(victim, false)
	start := time.Now()
	mustGet(t, reader.store, key, data)
	// Without the hedge the read waits for the stalled shard's timeout
	// (ShardTimeout, 2 s in this harness) before it asks for parity.
	d := time.Since(start)
	if d >= 1500*time.Millisecond {
		t.Fatalf("the read took %v with one stalled data shard; the hedge is %v, the shard timeout 2s", d, hedgeDelay)
	}
	t.Logf("read with a stalled data shard in %v", d)
}
