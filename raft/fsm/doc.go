// Package fsm is the replicated state machine of a ctxtier cluster: the block
// index (key → size, checksum, shard placement, tier hints, pin expiry,
// generation), the members, the namespaces and the credentials.
//
// It knows nothing of the network. Commands are a compact binary encoding
// written here (see docs/raft.md): a type byte whose top bit asks an older
// FSM to skip a type it does not know, a version byte, then the body. Many
// index mutations travel in one command, so one Raft log entry commits a
// whole batch. Applying a command is deterministic and idempotent: the same
// command applied twice leaves the same state, and generations come from the
// Raft log index, never from a clock.
//
// The state is an immutable value swapped atomically on every apply, so reads
// take no lock and a snapshot is a pointer copy that streams typed records
// while applies go on.
package fsm
