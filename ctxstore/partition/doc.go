// Package partition splits the block index into P partitions, each its own
// Raft group (multi-Raft): a key's partition is its hash (placement.KeyHash)
// mod P, and a partition's voters are the members rendezvous placement picks
// for the partition's own key, so every node derives the same layout from
// the same member list. A Host runs the groups placed on one member, each a
// raft.Node with the index FSM (raft/fsm) and its group-commit batcher; a
// Router splits a batch of index operations by partition and proposes each
// part to its partition's leader. Moving partitions when membership changes
// and a transport shared by a node's groups are not built; see docs/scale.md.
package partition
