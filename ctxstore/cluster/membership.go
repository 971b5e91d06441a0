package cluster

import (
	"context"

	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// Membership is the cluster's membership as the layers above the domain
// see it: who this node is, who leads, the Raft configuration and the
// committed member records, and the membership changes a leader makes.
// *raft.Node implements it; the subpackage control and gateway/clusterapi
// depend on it and on the names below, never on the raft packages.
type Membership interface {
	// ID is this node's id.
	ID() string
	// IsLeader reports whether this node leads now.
	IsLeader() bool
	// Leader returns the leader's id and Raft address ("" when none is known).
	Leader() (id, addr string)
	// LeaderMember returns the leader's committed member record.
	LeaderMember() (Member, bool)
	// Servers lists the Raft configuration.
	Servers() []Server
	// Stats are the Raft counters (state, term, indices).
	Stats() map[string]string
	// Member returns one committed member record.
	Member(id string) (Member, bool)
	// Members lists the committed member records, sorted by id.
	Members() []Member
	// Fault is the replicated state machine's first hard apply error.
	Fault() error
	// Join adds m as a voter and records it (leader only: ErrNotLeader).
	Join(ctx context.Context, m Member) error
	// Remove takes a member out of the configuration and the records.
	Remove(ctx context.Context, id string) error
	// TransferLeadership hands leadership to id ("": any other voter).
	TransferLeadership(ctx context.Context, id string) error
	// ReadIndex is the leader's commit index once a barrier confirmed its
	// leadership, for a follower's linearizable read.
	ReadIndex(ctx context.Context) (uint64, error)
}

var _ Membership = (*raft.Node)(nil)

// The membership vocabulary, under the names the gateway uses. These are
// aliases: the values are the raft packages' own, so errors.Is and type
// switches match either name.
type (
	// Member is one member's record (addresses, zone, capacity, state).
	Member = fsm.Member
	// Server is one entry of the Raft configuration.
	Server = raft.Server
	// NotLeaderError is ErrNotLeader with the leader, when one is known.
	NotLeaderError = raft.NotLeaderError
)

// Member states.
const (
	MemberAlive    = fsm.MemberAlive
	MemberDraining = fsm.MemberDraining
	MemberDead     = fsm.MemberDead
	MemberLeft     = fsm.MemberLeft
)

// ErrNotLeader is the error of a change only the leader can make, made on
// another node (raft.ErrNotLeader itself; it wraps block.ErrUnavailable).
var ErrNotLeader = raft.ErrNotLeader
