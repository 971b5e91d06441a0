package raft

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/internal/freeport"
	"github.com/ctxtier/ctxtier/raft/fsm"
	"github.com/ctxtier/ctxtier/raft/tlstest"
)

// BenchmarkIndexCommit measures index commit throughput (block entries per
// second) on a 3-node in-memory cluster with 64 concurrent proposers, each
// committing one put at a time: through the group-commit batcher, and as
// one log entry per put (Raft's own BatchApplyCh still batches disk and
// network work in that baseline). It reports both rates and their ratio.
//
//	go test -run '^$' -bench IndexCommit -benchtime 20000x ./raft/
func BenchmarkIndexCommit(b *testing.B) {
	// LAN timings: the short test timeouts lose leadership under this load.
	d := DefaultConfig()
	c := newCluster(b, 3, func(cfg *Config) {
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout, cfg.CommitTimeout = d.HeartbeatTimeout, d.ElectionTimeout, d.LeaderLeaseTimeout, d.CommitTimeout
	})
	leader := c.waitLeader()
	const workers = 64
	var next atomic.Uint64
	run := func(commit func(ctx context.Context, op fsm.Op) error) float64 {
		var wg sync.WaitGroup
		start := time.Now()
		per := b.N / workers
		if per == 0 {
			per = 1
		}
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				for i := 0; i < per; i++ {
					h := next.Add(1)
					if err := commit(ctx, putOp(h, uint32(h))); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		return float64(per*workers) / time.Since(start).Seconds()
	}
	b.ResetTimer()
	unbatched := run(func(ctx context.Context, op fsm.Op) error {
		_, err := leader.Apply(ctx, fsm.EncodeIndex([]fsm.Op{op}))
		return err
	})
	batched := run(func(ctx context.Context, op fsm.Op) error {
		_, err := leader.Propose(ctx, op)
		return err
	})
	b.StopTimer()
	b.ReportMetric(unbatched, "entries/s-unbatched")
	b.ReportMetric(batched, "entries/s-batched")
	b.ReportMetric(batched/unbatched, "batched/unbatched")
}

// BenchmarkIndexCommitBatch measures the Raft index alone (no block bytes)
// on a 3-node in-memory cluster with 64 concurrent proposers, each
// proposing batches of 64 puts (one Propose call, as a native batch put
// makes), against batches of 1 in the same run: block entries per second
// and their ratio. It is the single group's ceiling before any wire,
// shard or disk cost.
//
//	go test -run '^$' -bench 'IndexCommitBatch$' -benchtime 200000x ./raft/
func BenchmarkIndexCommitBatch(b *testing.B) {
	d := DefaultConfig()
	c := newCluster(b, 3, func(cfg *Config) {
		// Long timeouts: on this shared machine (load 40+) even LAN
		// timings lose leadership, and the measurement is of throughput.
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 5*time.Second, 5*time.Second, 5*time.Second
		cfg.CommitTimeout = d.CommitTimeout
	})
	benchBatches(b, c.waitLeader())
}

// BenchmarkIndexCommitBatchDisk is BenchmarkIndexCommitBatch on the parts
// ctxd runs: three nodes opened with Open, each with its raft-wal log
// (fsync per append) in its own directory and the authenticated TCP
// transport on 127.0.0.1, the real FSM. Still no block bytes: it is the
// index-only figure beside ctxbench's end-to-end one.
//
//	go test -run '^$' -bench IndexCommitBatchDisk -benchtime 200000x ./raft/
func BenchmarkIndexCommitBatchDisk(b *testing.B) {
	var peers []Peer
	for i := range 3 {
		peers = append(peers, Peer{ID: fmt.Sprintf("d%d", i+1), Addr: freeport.Addr(b)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := &cluster{t: b}
	for _, p := range peers {
		cfg := DefaultConfig()
		cfg.NodeID, cfg.RaftAddr, cfg.DataDir, cfg.Secret = p.ID, p.Addr, b.TempDir(), testSecret
		cfg.Bootstrap, cfg.InitialPeers = true, peers
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 5*time.Second, 5*time.Second, 5*time.Second
		n, err := Open(ctx, cfg, quietLog(), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { n.Close() })
		c.nodes = append(c.nodes, n)
	}
	benchBatches(b, c.waitLeader())
}

// benchBatches runs 64 proposers against leader: b.N/8 puts in batches of
// 1, then b.N in batches of 64, and reports both rates and their ratio.
// Every put must come back created.
func benchBatches(b *testing.B, leader *Node) {
	const workers = 64
	var next atomic.Uint64
	run := func(n, batch int) float64 {
		var wg sync.WaitGroup
		per := max(n/workers/batch, 1)
		start := time.Now()
		for range workers {
			wg.Go(func() {
				ctx := context.Background()
				ops := make([]fsm.Op, batch)
				for range per {
					for j := range ops {
						h := next.Add(1)
						ops[j] = putOp(h, uint32(h))
					}
					res, err := leader.Propose(ctx, ops...)
					if err != nil {
						b.Error(err)
						return
					}
					for _, r := range res {
						if r.Status != fsm.StatusCreated {
							b.Errorf("put: %s", r.Status)
							return
						}
					}
				}
			})
		}
		wg.Wait()
		return float64(per*workers*batch) / time.Since(start).Seconds()
	}
	b.ResetTimer()
	single := run(b.N/8, 1) // the slow path: an eighth of the entries
	batched := run(b.N, 64)
	b.StopTimer()
	b.ReportMetric(single, "entries/s-batch1")
	b.ReportMetric(batched, "entries/s-batch64")
	b.ReportMetric(batched/single, "batch64/batch1")
}

// BenchmarkRaftConnect measures what the cluster-secret handshake adds to
// opening a Raft connection: dial, handshakes, then a one-byte round trip,
// over loopback TCP. The baseline, in the same run, is the same dial and
// round trip without the handshake (plain TCP, and TLS 1.3 for the TLS
// rows). Raft pools its connections, so this is paid once per connection,
// not per RPC. It reports µs per connection for each and the ratios.
//
//	go test -run '^$' -bench RaftConnect -benchtime 4000x -count 3 ./raft/
func BenchmarkRaftConnect(b *testing.B) {
	ca := tlstest.NewCA(b)
	tlsc := &TLS{Certificate: ca.Issue(b, "node"), RootCAs: ca.Pool(), Mutual: true}
	auth, err := NewPeerAuth(testSecret, 0, quietLog())
	if err != nil {
		b.Fatal(err)
	}
	// serve answers one byte on every connection ln accepts.
	serve := func(ln net.Listener) {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var one [1]byte
				if _, err := io.ReadFull(c, one[:]); err == nil {
					c.Write(one[:])
				}
			}()
		}
	}
	roundTrip := func(c net.Conn) error {
		defer c.Close()
		if _, err := c.Write([]byte{1}); err != nil {
			return err
		}
		_, err := io.ReadFull(c, make([]byte, 1))
		return err
	}
	// dialer starts a server for one variant and returns its dial.
	dialer := func(withTLS, withAuth bool) func(ctx context.Context) (net.Conn, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { ln.Close() })
		var t *TLS
		if withTLS {
			t = tlsc
		}
		if withAuth {
			s := NewStreamLayer(ln, nil, t, auth)
			go serve(s)
			return func(ctx context.Context) (net.Conn, error) { return s.dial(ctx, ln.Addr().String()) }
		}
		srv := ln
		if t != nil {
			srv = tls.NewListener(ln, t.ServerConfig())
		}
		go serve(srv)
		return func(ctx context.Context) (net.Conn, error) { return t.dial(ctx, ln.Addr().String()) }
	}
	variants := []func(ctx context.Context) (net.Conn, error){dialer(false, false), dialer(false, true), dialer(true, false), dialer(true, true)}
	spent := make([]time.Duration, len(variants))
	// Interleaved rounds, so load on the machine falls on every variant.
	const rounds = 10
	per := max(b.N/len(variants)/rounds, 1)
	b.ResetTimer()
	for range rounds {
		for v, dial := range variants {
			start := time.Now()
			for range per {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				c, err := dial(ctx)
				cancel()
				if err == nil {
					err = roundTrip(c)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			spent[v] += time.Since(start)
		}
	}
	b.StopTimer()
	us := func(v int) float64 { return float64(spent[v].Microseconds()) / float64(per*rounds) }
	plain, plainAuth, tlsOnly, tlsAuth := us(0), us(1), us(2), us(3)
	b.ReportMetric(plain, "µs/conn-tcp")
	b.ReportMetric(plainAuth, "µs/conn-tcp+auth")
	b.ReportMetric(plainAuth/plain, "tcp+auth/tcp")
	b.ReportMetric(tlsOnly, "µs/conn-tls")
	b.ReportMetric(tlsAuth, "µs/conn-tls+auth")
	b.ReportMetric(tlsAuth/tlsOnly, "tls+auth/tls")
}
