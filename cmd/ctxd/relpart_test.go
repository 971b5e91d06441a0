package main

import (
	"testing"
)

// relPartition returns the reliability fault group that cuts a node off
// through network namespaces (internal/netns): the leader (cutLeader) or a
// follower. It runs partitionScenario on a fresh cluster of three ctxd
// processes in a three-replica namespace and adds its row: every
// acknowledged block is read back and compared through every node after
// the heal, and the row keeps the worst node's counts.
func relPartition(cutLeader bool) func(t *testing.T, mode relMode, table *relTable) {
	return func(t *testing.T, mode relMode, table *relTable) {
		perNode := 4
		if mode.name == relFull.name {
			perNode = mode.blocks / 3
		}
		res := partitionScenario(t, cutLeader, perNode)
		fault := "follower partition (netns), healed, k=1 m=2"
		if cutLeader {
			fault = "leader partition (netns), healed, k=1 m=2"
		}
		if res.lost != 0 || res.wrong != 0 {
			t.Errorf("%s: %d acknowledged blocks lost, %d read back wrong (target 0 and 0)", fault, res.lost, res.wrong)
		}
		table.add(relRow{Fault: fault, Acked: res.acked, Lost: res.lost, Wrong: res.wrong, Faults: 1,
			NewLeader: res.newLeader, Resume: res.resume, FailedPuts: res.failed})
	}
}
