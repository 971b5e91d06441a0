package clusterapi

import (
	"encoding/json"
	"strconv"

	"github.com/ctxtier/ctxtier/ctxstore/cluster"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
)

// Member is a member record on the wire: a row of Status.Members, and
// the body of a join request (control.PathJoin), whose wire type it is.
type Member = control.Member

// Status is the reply of GET /v1/cluster/status, as this node sees the
// cluster (no network hop: a follower may lag the leader slightly).
type Status struct {
	NodeID string `json:"node_id"`
	// State is this node's Raft state: leader, follower, candidate or shutdown.
	State string `json:"state"`
	// Leader is the leader's record (null while no leader is known).
	Leader *Member `json:"leader"`
	// Members are the servers of the Raft configuration and the member
	// records that are not in it (left or not yet added), sorted by id.
	Members []Member   `json:"members"`
	Raft    RaftStatus `json:"raft"`
	// Drains is the progress of every draining member: what this node's
	// index still places on it, and, when this node leads (Active), what
	// the drain moved and could not move.
	Drains []cluster.DrainStatus `json:"drains,omitempty"`
	// Extra is what ctxd's status function returned (data path, repair).
	Extra json.RawMessage `json:"extra,omitempty"`
}

// RaftStatus is this node's Raft progress.
type RaftStatus struct {
	Term              uint64 `json:"term"`
	CommitIndex       uint64 `json:"commit_index"`
	AppliedIndex      uint64 `json:"applied_index"`
	LastLogIndex      uint64 `json:"last_log_index"`
	LastLogTerm       uint64 `json:"last_log_term"`
	LastSnapshotIndex uint64 `json:"last_snapshot_index"`
	FSMPending        uint64 `json:"fsm_pending"`
	// LastContact is the time since the leader was last heard from: "0" on
	// the leader, "never", or a Go duration.
	LastContact string `json:"last_contact"`
	NumPeers    int    `json:"num_peers"`
	// Fault is the FSM's apply fault (a command this node's code does not
	// understand: upgrade it), empty when healthy.
	Fault string `json:"fault,omitempty"`
}

// raftStatus parses hashicorp/raft's Stats map.
func raftStatus(s map[string]string) RaftStatus {
	u := func(k string) uint64 { v, _ := strconv.ParseUint(s[k], 10, 64); return v }
	peers, _ := strconv.Atoi(s["num_peers"])
	return RaftStatus{
		Term: u("term"), CommitIndex: u("commit_index"), AppliedIndex: u("applied_index"),
		LastLogIndex: u("last_log_index"), LastLogTerm: u("last_log_term"), LastSnapshotIndex: u("last_snapshot_index"),
		FSMPending: u("fsm_pending"), LastContact: s["last_contact"], NumPeers: peers,
	}
}

// RemoveRequest is the body of POST /v1/cluster/remove. Without Force the
// leader refuses to remove a member its index still places shards on.
type RemoveRequest struct {
	ID    string `json:"id"`
	Force bool   `json:"force,omitempty"`
}

// DrainRequest is the body of POST /v1/cluster/drain: start draining
// member ID, or with Cancel make it alive again.
type DrainRequest struct {
	ID     string `json:"id"`
	Cancel bool   `json:"cancel,omitempty"`
}

// DrainResponse is its reply: the member's state after the request and,
// for a drain, what the member held when it started.
type DrainResponse struct {
	ID    string               `json:"id"`
	State string               `json:"state"`
	Drain *cluster.DrainStatus `json:"drain,omitempty"`
}

// RemoveResponse is its reply.
type RemoveResponse struct {
	Removed string `json:"removed"`
}

// TransferRequest is the body of POST /v1/cluster/transfer-leadership; an
// empty id (or an empty body) picks the most up-to-date follower.
type TransferRequest struct {
	ID string `json:"id,omitempty"`
}

// TransferResponse names the leader after the transfer ("" when the
// transfer succeeded but no new leader was known yet).
type TransferResponse struct {
	Previous string `json:"previous"`
	Leader   string `json:"leader"`
}

// RepairResponse is the reply of GET /v1/cluster/repair: the "repair"
// field of ctxd's status extra, as it is.
type RepairResponse struct {
	NodeID string          `json:"node_id"`
	Repair json.RawMessage `json:"repair"`
}
