package cluster

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	pending     prometheus.Gauge
	repaired    prometheus.Counter
	repairBytes prometheus.Counter
	reads       *prometheus.CounterVec
	// readLocal, readRemote and readDecoded are reads' series, resolved
	// once: a label lookup per read cost ~3% of a small GET's CPU.
	readLocal, readRemote, readDecoded prometheus.Counter

	// readBytes counts the bytes of those reads, by the same path: the
	// share served from this node's own tiers (the local series) is what
	// routing a client's GETs to a block's holder raises.
	readBytes                                         *prometheus.CounterVec
	readLocalBytes, readRemoteBytes, readDecodedBytes prometheus.Counter

	shardErrors                  prometheus.Counter
	reconstructions              prometheus.Counter
	shardsWritten                prometheus.Counter
	shardBatches                 prometheus.Counter
	drops                        prometheus.Counter
	memberChanges                *prometheus.CounterVec
	ownWriteWaits                prometheus.Counter
	restored                     prometheus.Counter
	restoreLost                  prometheus.Counter
	restoring                    prometheus.Gauge
	spareWrites                  prometheus.Counter
	lastScan, scanSeconds        prometheus.Gauge
	rebalPending, rebalDeferred  prometheus.Gauge
	rebalMoved, rebalBytes       prometheus.Counter
	rebalInflight, rebalLastScan prometheus.Gauge
	relookups                    prometheus.Counter
	cleanupByKey                 prometheus.Counter
	// forwards and forwardedOps count a follower's forwards of index
	// proposals to the leader and the operations they carried (forward.go).
	forwards, forwardedOps prometheus.Counter
	// putPhase times a put's (or a batch put's) two halves; putShards and
	// putCommit are its two series.
	putPhase             *prometheus.HistogramVec
	putShards, putCommit prometheus.Observer

	reg  prometheus.Registerer
	list []prometheus.Collector
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ctxtier_repair_shards_pending",
			Help: "Shards on dead, removed, draining or missing members waiting to be rebuilt or moved, and shards on members still restoring after a restart (last scan, leader only)."}),
		repaired: prometheus.NewCounter(prometheus.CounterOpts{Name: "ctxtier_repair_shards_repaired_total",
			Help: "Shards rebuilt on a new member and committed to the index."}),
		repairBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "ctxtier_repair_bytes_total",
			Help: "Shard bytes written by repair."}),
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ctxtier_cluster_reads_total",
			Help: "Blocks served, by path: local replica, remote replica, or decoded from erasure shards."}, []string{"path"}),
		readBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ctxtier_cluster_read_bytes_total",
			Help: "Bytes of the blocks served, by path: local replica, remote replica, or decoded from erasure shards."}, []string{"path"}),
		shardErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "ctxtier_cluster_shard_read_errors_total",
			Help: "Shard reads that failed or returned bytes that did not verify."}),
		reconstructions: prometheus.NewCounter(prometheus.CounterOpts{Name: "ctxtier_cluster_reconstructions_total",
			Help: "Reads that needed parity because a data shard was missing or bad."}),
		shardsWritten: prometheus.NewCounter(prometheus.CounterOpts{Name: "ctxtier_cluster_shards_written_total",
			Help: "Shards written by puts."}),
		shardBatches: prometheus.NewCounter(prometheus.CounterOpts{Name: "ctxtier_cluster_shard_batches_total",
			Help: "Requests that carried several of a put's (or a batch put's) shards to one member at once."}),
		drops: prometheus.NewCounter(prometheus.CounterOpts{Name: "ctxtier_cluster_drop_updates_total",
			Help: "Index updates proposed because this node's tiers dropped a shard under capacity pressure."}),
		memberChanges: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ctxtier_cluster_member_state_changes_total",
			Help: "Member state changes committed by the failure detector, by new state."}, []string{"state"}),
		ownWriteWaits: prometheus.NewCounter(prometheus.CounterOpts{Name: "ctxtier_cluster_own_write_waits_total",
			Help: "Reads that missed and found the block after waiting for this node to apply its own forwarded writes (read-your-writes through one node)."}),
		restored: prometheus.NewCounter(prometheus.CounterOpts{Name: "ctxtier_restore_shards_total",
			Help: "Shards this node found missing after a start and rebuilt from the other holders."}),
		restoreLost: prometheus.NewCounter(prometheus.CounterOpts{Name: "ctxtier_restore_shards_lost_total",
			Help: "Shards this node found missing after a start that no other holder had; it left their placement."}),
		restoring: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ctxtier_restore_pending",
			Help: "1 while this node's start is still restoring the shards the index places on it, else 0."}),
		spareWrites: prometheus.NewCounter(prometheus.CounterOpts{Name: "ctxtier_cluster_spare_shard_writes_total",
			Help: "Shards a put wrote to a spare member because the member placement picked did not take them."}),
		lastScan: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ctxtier_repair_last_scan_timestamp_seconds",
			Help: "When the leader's last repair scan began (Unix seconds): ctxtier_repair_shards_pending counts every entry committed before then."}),
		scanSeconds: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ctxtier_repair_scan_seconds",
			Help: "How long the leader's last repair scan of the whole index took (the scan alone, not the repairs it found). Periodic scans are spaced so that they take at most a tenth of the leader's time."}),
		rebalPending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ctxtier_rebalance_shards_pending",
			Help: "Shards on a member that placement no longer picks for their block, waiting to move (last scan, leader only)."}),
		rebalDeferred: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ctxtier_rebalance_blocks_deferred",
			Help: "Blocks of the last rebalancing scan left to repair first (a holder not alive, or fewer shards than the code)."}),
		rebalMoved: prometheus.NewCounter(prometheus.CounterOpts{Name: "ctxtier_rebalance_shards_moved_total",
			Help: "Shards rebalancing copied to the member placement picks now and committed to the index."}),
		rebalBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "ctxtier_rebalance_bytes_total",
			Help: "Shard bytes rebalancing moved."}),
		rebalInflight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ctxtier_rebalance_copies_in_flight",
			Help: "Shard copies rebalancing is writing now."}),
		rebalLastScan: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ctxtier_rebalance_last_scan_timestamp_seconds",
			Help: "When the leader's last rebalancing scan began (Unix seconds)."}),
		relookups: prometheus.NewCounter(prometheus.CounterOpts{Name: "ctxtier_cluster_read_relookups_total",
			Help: "Reads that failed on the placement they looked up and were retried on the block's newer index entry (a shard moved meanwhile)."}),
		forwards: prometheus.NewCounter(prometheus.CounterOpts{Name: "ctxtier_cluster_forwards_total",
			Help: "Forwards of index proposals this node (a follower) sent to the leader; concurrent proposals share one."}),
		forwardedOps: prometheus.NewCounter(prometheus.CounterOpts{Name: "ctxtier_cluster_forwarded_ops_total",
			Help: "Index operations carried by this node's forwards to the leader."}),
		cleanupByKey: prometheus.NewCounter(prometheus.CounterOpts{Name: "ctxtier_cluster_shard_cleanup_by_key_total",
			Help: "Shard deletes after an index change sent by key, not conditioned on the version's checksum (an erasure shard whose block could not be read)."}),
		putPhase: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ctxtier_cluster_put_phase_seconds",
			Help:    "Wall-clock seconds of the two halves of a put or batch put this node coordinated: writing the shards (phase=shards) and committing the index entries through Raft, forwarding included (phase=commit).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"phase"}),
		reg: reg,
	}
	m.putShards, m.putCommit = m.putPhase.WithLabelValues("shards"), m.putPhase.WithLabelValues("commit")
	m.readLocal, m.readRemote, m.readDecoded = m.reads.WithLabelValues("local"), m.reads.WithLabelValues("remote"), m.reads.WithLabelValues("decoded")
	m.readLocalBytes, m.readRemoteBytes, m.readDecodedBytes = m.readBytes.WithLabelValues("local"), m.readBytes.WithLabelValues("remote"), m.readBytes.WithLabelValues("decoded")
	m.list = []prometheus.Collector{m.pending, m.repaired, m.repairBytes, m.reads, m.readBytes, m.shardErrors, m.reconstructions, m.shardsWritten, m.shardBatches, m.drops, m.memberChanges, m.ownWriteWaits, m.restored, m.restoreLost, m.restoring, m.spareWrites, m.lastScan, m.scanSeconds,
		m.rebalPending, m.rebalDeferred, m.rebalMoved, m.rebalBytes, m.rebalInflight, m.rebalLastScan, m.relookups, m.cleanupByKey, m.forwards, m.forwardedOps, m.putPhase}
	if reg == nil {
		return m, nil
	}
	for i, c := range m.list {
		if err := reg.Register(c); err != nil {
			for _, r := range m.list[:i] {
				reg.Unregister(r)
			}
			return nil, fmt.Errorf("cluster metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range m.list {
		m.reg.Unregister(c)
	}
}
