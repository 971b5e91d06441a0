package partition

import (
	"fmt"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/placement"
	"github.com/ctxtier/ctxtier/raft"
)

// Sentinels.
var (
	// ErrUnknownPartition: a partition number outside 0..P-1, or one this
	// host does not hold a replica of.
	ErrUnknownPartition = fmt.Errorf("%w: partition: unknown partition", block.ErrInvalidArgument)
	// ErrNoLeader: no replica of the partition was its leader within
	// Config.LeaderTimeout (an election is running or a quorum is lost).
	ErrNoLeader = fmt.Errorf("%w: partition: no leader", block.ErrUnavailable)
)

// groupNamespace is the namespace of the keys partitions are placed by. It
// is not a valid namespace name (block.ValidNamespaceName allows no '_'), so
// a partition's key never equals a block's.
const groupNamespace = "_partition"

// Config configures a partitioned index.
type Config struct {
	// Partitions is P, the number of Raft groups the index is split into.
	Partitions int
	// Replicas is the number of voters of each partition's group.
	Replicas int
	// Group is the template of every group's Raft configuration (timeouts,
	// group commit); NodeID, RaftAddr, Bootstrap, InitialPeers and Self are
	// set per group by OpenHost.
	Group raft.Config
	// LeaderTimeout bounds how long a Router waits for a partition's
	// leader (for example during an election) before ErrNoLeader.
	LeaderTimeout time.Duration
}

// DefaultConfig returns 4,096 partitions of three voters each, with the
// Raft timeouts and group commit of raft.DefaultConfig.
func DefaultConfig() Config {
	return Config{Partitions: 4096, Replicas: 3, Group: raft.DefaultConfig(), LeaderTimeout: 5 * time.Second}
}

// maxPartitions bounds P (a partition number travels as an int here, and a
// layout holds P voter lists).
const maxPartitions = 1 << 20

// Validate checks the configuration and the group template.
func (c Config) Validate() error {
	switch {
	case c.Partitions < 1 || c.Partitions > maxPartitions:
		return fmt.Errorf("%w: partition config: Partitions %d, want 1..%d", block.ErrInvalidArgument, c.Partitions, maxPartitions)
	case c.Replicas < 1 || c.Replicas > 7:
		return fmt.Errorf("%w: partition config: Replicas %d, want 1..7", block.ErrInvalidArgument, c.Replicas)
	case c.LeaderTimeout <= 0:
		return fmt.Errorf("%w: partition config: LeaderTimeout must be positive", block.ErrInvalidArgument)
	}
	g := c.Group
	g.NodeID, g.RaftAddr, g.AdvertiseAddr, g.InitialPeers = "template", "template:1", "", nil
	if err := g.Validate(); err != nil {
		return fmt.Errorf("partition config: Group: %w", err)
	}
	return nil
}

// Of returns key's partition: placement.KeyHash of the whole block (its
// namespace, hash and part; not its shard) mod P.
func (c Config) Of(key block.Key) int {
	return int(placement.KeyHash(key) % uint64(c.Partitions))
}

// groupKey is the key partition p is placed by.
func groupKey(p int) block.Key { return block.NewKey(groupNamespace, uint64(p)) }

// Voters returns the members that vote in partition p, best first:
// placement.Pick of the partition's own key over members (rendezvous, zones
// spread first). It fails with ErrUnknownPartition for p outside 0..P-1 and
// with block.ErrUnavailable when there are fewer members than Replicas.
func (c Config) Voters(p int, members []placement.Node) ([]placement.Node, error) {
	if p < 0 || p >= c.Partitions {
		return nil, fmt.Errorf("%w: %d (there are %d)", ErrUnknownPartition, p, c.Partitions)
	}
	return placement.Pick(groupKey(p), members, c.Replicas)
}

// Layout is where every partition's voters are: what each node computes
// from the member list.
type Layout struct {
	// Voters lists each partition's voters (member ids), best first.
	Voters [][]string
	// Hosted lists, per member id, the partitions it votes in, ascending.
	Hosted map[string][]int
}

// Layout places every partition over members.
func (c Config) Layout(members []placement.Node) (Layout, error) {
	l := Layout{Voters: make([][]string, c.Partitions), Hosted: make(map[string][]int, len(members))}
	for _, m := range members {
		if _, dup := l.Hosted[m.ID]; dup {
			return Layout{}, fmt.Errorf("%w: partition: member %q listed twice", block.ErrInvalidArgument, m.ID)
		}
		l.Hosted[m.ID] = nil
	}
	for p := range c.Partitions {
		vs, err := c.Voters(p, members)
		if err != nil {
			return Layout{}, err
		}
		ids := make([]string, len(vs))
		for i, v := range vs {
			ids[i] = v.ID
			l.Hosted[v.ID] = append(l.Hosted[v.ID], p)
		}
		l.Voters[p] = ids
	}
	return l, nil
}
