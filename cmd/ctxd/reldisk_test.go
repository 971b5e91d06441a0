package main

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// relDiskFull is the reliability fault group of a disk filling up: one
// node's NVMe tier lies on a 64 MiB tmpfs with a 16 GiB --nvme-capacity
// (the case), the others on ordinary directories. Under the steady
// load, large puts fill it; then a file fills the rest of the filesystem
// and more puts follow. Every put must be acknowledged or answer NoSpace
// (507), never Unavailable or another error; no node may exit. The full
// node is then SIGKILLed and restarted on the still-full disk, must become
// ready and serve every acknowledged block; then the filler is deleted and
// every acknowledged block is read back through every node.
func relDiskFull(t *testing.T, mode relMode, table *relTable) {
	small := mountTmpfs(t, "64m")
	victimID := "n2"
	rc := newRelCluster(t, mode, func(id string) []string {
		dir, capacity := filepath.Join(t.TempDir(), "nvme"), "512MiB"
		if id == victimID {
			dir, capacity = filepath.Join(small, "nvme"), "16GiB"
		}
		return []string{"--dram-capacity", "4MiB", "--max-block-size", "1MiB", "--nvme-dir", dir, "--nvme-capacity", capacity, "--nvme-segment-size", "8MiB"}
	})
	var victim *testNode
	for _, nd := range rc.nodes {
		if nd.id == victimID {
			victim = nd
		}
	}
	if victim == nil {
		t.Fatalf("no node %s", victimID)
	}
	rc.load.fill(mode.blocks)
	rc.load.start()

	// Large puts through every node: each one places a replica (k=1 m=2)
	// or a half-size shard (RS(2,1)) on the small disk.
	const big = 256 << 10
	bigPuts := 3 * (64 << 20) / big / 2 // 1.5 times the tmpfs in k=1 m=2 replicas, half that in RS(2,1) shards
	if mode.name == relFull.name {
		bigPuts *= 3
	}
	r := rand.New(rand.NewPCG(7, 7))
	var acked, noSpace, other int
	putBig := func(n int, phase string) {
		t.Helper()
		for i := range n {
			err := rc.load.putErr(r, rc.nss[i%len(rc.nss)], big)
			switch {
			case err == nil:
				acked++
			case errors.Is(err, block.ErrNoSpace):
				noSpace++
			default:
				other++
				if other <= 3 {
					t.Errorf("%s: put answered %v, want success or NoSpace (507)", phase, err)
				}
			}
		}
	}
	t0 := time.Now()
	putBig(bigPuts/2, "filling the disk")

	// Something else takes the rest of the filesystem.
	fillFS(t, small)
	free := fsFreeBytes(t, small)
	putBig(bigPuts/2, "disk full")
	t.Logf("disk filling: %d large puts acknowledged, %d answered NoSpace, %d other errors; %d bytes free on the 64 MiB tmpfs after the filler", acked, noSpace, other, free)
	for _, nd := range rc.nodes {
		select {
		case <-nd.p.exited:
			t.Fatalf("%s exited while its disk filled: %v", nd.id, nd.p.exitErr)
		default:
		}
	}

	// A restart on the full disk: it must come back and serve every
	// acknowledged block (what it no longer holds through the others).
	rc.kill(victim)
	rc.restart(victim)
	for _, ns := range rc.nss {
		if _, lost, wrong := rc.load.verify(ns, []*testNode{victim}); lost != 0 || wrong != 0 {
			t.Errorf("%s restarted on a full disk: %s: %d acknowledged blocks not served, %d wrong", victim.id, nsLabel(ns), lost, wrong)
		}
	}
	if err := os.Remove(filepath.Join(small, "filler")); err != nil {
		t.Fatal(err)
	}
	res, failed := rc.load.since(t0)
	rc.load.halt()
	// The full node cannot hold its share of a namespace that places a
	// copy or shard on every node, so repair cannot finish and the check
	// with each node down in turn would measure its capacity, not loss:
	// every acknowledged block is read back through every node, all up.
	rc.rows(table, "disk fills (64 MiB tmpfs), restarted", rc.verifyThroughEach(), 1, 0, res, failed)
}

// verifyThroughEach reads every acknowledged block through each node in
// turn, all of them up, and returns per namespace the acked count and the
// worst node's lost and wrong counts.
func (rc *relCluster) verifyThroughEach() map[string][3]int {
	out := map[string][3]int{}
	for _, nd := range rc.nodes {
		for _, ns := range rc.nss {
			a, lost, wrong := rc.load.verify(ns, []*testNode{nd})
			cur := out[ns]
			out[ns] = [3]int{a, max(cur[1], lost), max(cur[2], wrong)}
		}
	}
	return out
}
