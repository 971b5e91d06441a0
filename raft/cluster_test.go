package raft

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

func quietLog() *slog.Logger {
	if os.Getenv("RAFT_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func inmemConfig(id string) Config {
	c := DefaultConfig()
	c.NodeID = id
	c.RaftAddr = id + ":1"
	// Timeouts of 500 ms rather than 100 ms: on a loaded 2-core machine
	// under -race a 100 ms stall is common, and a spurious election moves
	// the leader that a test captured once.
	c.HeartbeatTimeout = 500 * time.Millisecond
	c.ElectionTimeout = 500 * time.Millisecond
	c.LeaderLeaseTimeout = 500 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.ApplyTimeout = 2 * time.Second
	c.Self = fsm.Member{DataAddr: id + ":2", HTTPAddr: id + ":3", Zone: "z", Capacity: 1 << 30}
	return c
}

type cluster struct {
	t     testing.TB
	nodes []*Node
	trans []*hraft.InmemTransport
}

// newCluster starts n in-memory nodes: the first bootstraps alone, the
// others join it, so the single-node path and joining are both exercised.
func newCluster(t testing.TB, n int, tweak func(*Config)) *cluster {
	t.Helper()
	c := &cluster{t: t}
	for i := 0; i < n; i++ {
		cfg := inmemConfig(fmt.Sprintf("n%d", i+1))
		cfg.Bootstrap = i == 0
		if tweak != nil {
			tweak(&cfg)
		}
		_, tr := hraft.NewInmemTransport(hraft.ServerAddress(cfg.RaftAddr))
		for j, other := range c.trans {
			tr.Connect(other.LocalAddr(), other)
			other.Connect(tr.LocalAddr(), tr)
			_ = j
		}
		store := hraft.NewInmemStore()
		node, err := OpenWith(context.Background(), cfg, quietLog(), nil, Deps{Logs: store, Stable: store, Snapshots: hraft.NewInmemSnapshotStore(), Transport: tr})
		if err != nil {
			t.Fatal(err)
		}
		c.nodes = append(c.nodes, node)
		c.trans = append(c.trans, tr)
		t.Cleanup(func() { node.Close() })
		if i == 0 {
			c.waitLeader(node)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, node := range c.nodes[1:] {
		m := node.cfg.Self
		m.ID, m.RaftAddr = node.cfg.NodeID, node.cfg.RaftAddr
		if err := c.nodes[0].Join(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func (c *cluster) waitLeader(nodes ...*Node) *Node {
	c.t.Helper()
	if len(nodes) == 0 {
		nodes = c.nodes
	}
	// Generous: under -race beside other test binaries on 2 cores, an
	// election of two nodes took more than 10 s once (the 500 ms timeouts
	// fire late and votes split); a healthy run elects in about a second.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range nodes {
			if n.IsLeader() {
				return n
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.t.Fatal("no leader elected")
	return nil
}

// eventually polls cond for up to 30 s (generous, as waitLeader).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func putOp(h uint64, sum uint32) fsm.Op {
	return fsm.PutOp(block.NewKey(block.DefaultNamespace, h), fsm.Entry{Size: 64, Sum: sum, Placement: []fsm.Shard{{NodeID: "n1"}}, Created: time.Unix(1, 0)})
}
