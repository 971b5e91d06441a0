package fsm

import (
	"fmt"
	"strings"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Shard says that shard number Index of a block lives on node NodeID. A block
// encoded with k data and m parity shards has k+m of them; k=1, m=0 is one
// copy, k=1, m=2 three replicas (every shard a full copy).
type Shard struct {
	NodeID string
	Index  uint16
}

// TierHints is a bit set of the tiers a block is expected to be found in. It
// is advice for readers and for the tier manager, never a promise.
type TierHints uint8

// Tier hint bits.
const (
	HintDRAM TierHints = 1 << iota
	HintNVMe
	HintS3
)

// Entry is the index record of one block. Block bytes are never here.
type Entry struct {
	Size      int64
	Sum       uint32 // CRC-32C of the whole block (block.Checksum)
	Placement []Shard
	TierHints TierHints
	// PinUntil protects the block from eviction until then; zero when not pinned.
	PinUntil time.Time
	// Generation is the Raft log index of the command that created the entry:
	// a delete and a re-put of the same key yield a new generation, so a shard
	// written for an older generation is recognisably stale.
	Generation uint64
	// Created is the proposer's clock at put time (carried in the command, so
	// every replica stores the same value); namespace TTLs count from it.
	Created time.Time
}

// MemberState is a node's health as the cluster agrees on it.
type MemberState uint8

// Member states.
const (
	MemberAlive MemberState = iota + 1
	MemberSuspect
	MemberDead
	MemberLeft
	// MemberDraining: an operator asked for the member's shards to be moved
	// off it before it is removed. It takes no new shards and its shards no
	// longer count towards a block's redundancy, but it is still read from
	// while it answers. A re-join or re-registration (an upsert saying
	// alive) keeps it draining; only a state change ends a drain.
	MemberDraining
)

// String names the state.
func (s MemberState) String() string {
	switch s {
	case MemberAlive:
		return "alive"
	case MemberSuspect:
		return "suspect"
	case MemberDead:
		return "dead"
	case MemberLeft:
		return "left"
	case MemberDraining:
		return "draining"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

func (s MemberState) valid() bool { return s >= MemberAlive && s <= MemberDraining }

// Member is one node of the cluster.
type Member struct {
	ID       string
	RaftAddr string // Raft transport address
	DataAddr string // native block protocol / node-to-node shard traffic
	HTTPAddr string // HTTP API (leader forwarding goes here)
	Zone     string
	Capacity int64 // bytes this node offers to the tier stack
	State    MemberState
	// Incarnation identifies the node's current start (CmdIncarnation; 0
	// before its first). A member upsert or state change keeps it.
	Incarnation uint64
	// Restoring: this incarnation has not yet checked that it holds every
	// shard the index places on it (a node that restarted with an empty
	// DRAM tier or a lost NVMe directory rebuilds them from the other
	// holders first). Its shards count as pending repair meanwhile.
	Restoring bool
}

// Validate checks a member record.
func (m Member) Validate() error {
	switch {
	case m.ID == "" || len(m.ID) > 128:
		return fmt.Errorf("%w: member id must be 1..128 bytes", block.ErrInvalidArgument)
	case m.RaftAddr == "":
		return fmt.Errorf("%w: member %q has no raft address", block.ErrInvalidArgument, m.ID)
	case m.Capacity < 0:
		return fmt.Errorf("%w: member %q capacity is negative", block.ErrInvalidArgument, m.ID)
	case !m.State.valid():
		return fmt.Errorf("%w: member %q state %d", block.ErrInvalidArgument, m.ID, m.State)
	}
	return nil
}

// Permission bits of a credential scope.
type Permission uint8

// Permissions.
const (
	PermRead Permission = 1 << iota
	PermWrite
	PermAdmin
)

// Scope grants permissions on one namespace ("*" for all).
type Scope struct {
	Namespace string
	Perms     Permission
}

// SecretKind says what a credential's Secret bytes are. There is no kind for
// plaintext: the FSM refuses to store a secret that is not hashed or sealed.
type SecretKind uint8

// Secret kinds.
const (
	// SecretHashed is a salted PBKDF2-SHA256 hash (see HashSecret): enough to
	// check a bearer secret, not to sign.
	SecretHashed SecretKind = iota + 1
	// SecretSealed is AES-256-GCM ciphertext under a cluster key that is not
	// in Raft (see SealSecret): needed where the server must compute an HMAC
	// with the secret, as S3 SigV4 does.
	SecretSealed
)

// Credential is an access key: its id, its protected secret, and its scopes.
type Credential struct {
	AccessKeyID string
	Kind        SecretKind
	Secret      []byte
	Scopes      []Scope
	Disabled    bool
}

// Validate checks a credential record.
func (c Credential) Validate() error {
	switch {
	case c.AccessKeyID == "" || len(c.AccessKeyID) > 128:
		return fmt.Errorf("%w: access key id must be 1..128 bytes", block.ErrInvalidArgument)
	case c.Kind != SecretHashed && c.Kind != SecretSealed:
		return fmt.Errorf("%w: credential %q: secret must be hashed or sealed, kind %d", block.ErrInvalidArgument, c.AccessKeyID, c.Kind)
	case len(c.Secret) < 16:
		return fmt.Errorf("%w: credential %q: secret blob too short", block.ErrInvalidArgument, c.AccessKeyID)
	}
	for _, s := range c.Scopes {
		name, prefix := strings.CutSuffix(s.Namespace, "*")
		switch {
		case s.Namespace == "*":
			continue
		case prefix && name == "":
			return fmt.Errorf("%w: credential %q: scope %q", block.ErrInvalidArgument, c.AccessKeyID, s.Namespace)
		case prefix:
			name += "x" // a prefix scope ("team-a-*") is the start of a valid name
		}
		if err := block.ValidNamespaceName(name); err != nil {
			return err
		}
	}
	return nil
}

// Allows reports whether the credential grants all of perm on namespace ns.
func (c Credential) Allows(ns string, perm Permission) bool {
	if c.Disabled {
		return false
	}
	for _, s := range c.Scopes {
		if (s.Namespace == ns || s.Namespace == "*") && s.Perms&perm == perm {
			return true
		}
	}
	return false
}

// Status is the outcome of one index operation.
type Status uint8

// Statuses.
const (
	StatusCreated Status = iota + 1
	// StatusExisted: a put of a key that exists with the same checksum; nothing changed.
	StatusExisted
	// StatusConflict: a put with another checksum, or a conditional delete of
	// another generation; nothing changed.
	StatusConflict
	StatusNotFound
	StatusDeleted
	StatusPinned
	StatusUpdated
	StatusUnknownNamespace
	StatusInvalid
	// StatusSkipped: an operation of an unknown kind flagged ignore-unknown.
	StatusSkipped
	// StatusStaleHolder: a put some of whose shards went to members that
	// restarted while it ran (see freshPlacement), leaving fewer than the
	// namespace's data shards; nothing changed, the writer may retry.
	StatusStaleHolder
)

var statusNames = [...]string{"", "created", "existed", "conflict", "not-found", "deleted", "pinned", "updated", "unknown-namespace", "invalid", "skipped", "stale-holder"}

// String names the status.
func (s Status) String() string {
	if int(s) < len(statusNames) && s != 0 {
		return statusNames[s]
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// OpResult is what one operation of an index batch did.
type OpResult struct {
	Status Status
	// Generation of the entry after the operation (or the existing entry's,
	// for existed/conflict); 0 when there is none.
	Generation uint64
}

// Err maps the status to a block sentinel: nil for the successes.
func (r OpResult) Err() error {
	switch r.Status {
	case StatusCreated, StatusExisted, StatusDeleted, StatusPinned, StatusUpdated, StatusSkipped:
		return nil
	case StatusConflict:
		return block.ErrConflict
	case StatusNotFound:
		return block.ErrNotFound
	case StatusUnknownNamespace:
		return block.ErrUnknownNamespace
	case StatusStaleHolder:
		return block.ErrUnavailable
	default:
		return block.ErrInvalidArgument
	}
}
