// Package raft is ctxtier's consensus layer on hashicorp/raft: it opens a
// node (raft-wal log and stable store, file snapshots, a TCP transport with
// optional TLS/mTLS through its own stream layer, every connection of which
// first proves the cluster secret in a mutual handshake), bootstraps a one-voter
// cluster when started alone so one node and a cluster share one code path,
// and offers membership changes, leader information for write forwarding,
// group-committed index proposals, and local or linearizable reads of the
// replicated state in raft/fsm. Raft holds metadata only; block bytes never
// enter the log. See docs/raft.md.
package raft
