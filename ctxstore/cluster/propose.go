package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// resultsVersion is the first byte of an encoded forwarded answer.
const resultsVersion = 1

// EncodeResults encodes index-operation results for the forwarding reply:
// version byte, uvarint count, then per result a status byte and a uvarint
// generation.
func EncodeResults(res []fsm.OpResult) []byte {
	b := make([]byte, 0, 2+len(res)*4)
	b = append(b, resultsVersion)
	b = binary.AppendUvarint(b, uint64(len(res)))
	for _, r := range res {
		b = append(b, byte(r.Status))
		b = binary.AppendUvarint(b, r.Generation)
	}
	return b
}

// DecodeResults decodes EncodeResults' output, expecting want results.
func DecodeResults(b []byte, want int) ([]fsm.OpResult, error) {
	bad := func(what string) error {
		return fmt.Errorf("%w: forwarded results: %s", block.ErrUnavailable, what)
	}
	if len(b) < 1 || b[0] != resultsVersion {
		return nil, bad("unknown version")
	}
	b = b[1:]
	n, k := shortestUvarint(b)
	if k <= 0 || n != uint64(want) {
		return nil, bad(fmt.Sprintf("count %d, want %d", n, want))
	}
	b = b[k:]
	out := make([]fsm.OpResult, want)
	for i := range out {
		if len(b) < 2 {
			return nil, bad("truncated")
		}
		out[i].Status = fsm.Status(b[0])
		g, k := shortestUvarint(b[1:])
		if k <= 0 {
			return nil, bad("bad generation")
		}
		out[i].Generation = g
		b = b[1+k:]
	}
	if len(b) != 0 {
		return nil, bad("trailing bytes")
	}
	return out, nil
}

// shortestUvarint is binary.Uvarint that also refuses (k = 0) a value not
// written in its shortest form, as EncodeResults writes it: one answer has
// one encoding.
func shortestUvarint(b []byte) (uint64, int) {
	v, k := binary.Uvarint(b)
	if k > 0 {
		var min [binary.MaxVarintLen64]byte
		if k != binary.PutUvarint(min[:], v) {
			return 0, 0
		}
	}
	return v, k
}

// HandleForwarded runs on the leader: req is an index command (fsm.EncodeIndex)
// forwarded by a follower; the answer is its results (EncodeResults). A
// member upsert of an alive member (a node registering its own record) and
// an incarnation (a node recording its start) and a namespace change
// (LeaderCatalog) are also accepted, answered with zero results. Anything
// else is refused: membership and credential changes have their own
// endpoints.
func (b *Backend) HandleForwarded(ctx context.Context, req []byte) ([]byte, error) {
	cmd, err := fsm.DecodeCommand(req)
	if err != nil {
		return nil, fmt.Errorf("%w: forwarded proposal: %v", block.ErrInvalidArgument, err)
	}
	if cmd.Type == fsm.CmdMember && cmd.Member.Action == fsm.MemberUpsert && cmd.Member.Member.State == fsm.MemberAlive {
		// A node registering its own record (see Config.Self).
		if err := b.node.SetMember(ctx, cmd.Member.Member); err != nil {
			return nil, err
		}
		return EncodeResults(nil), nil
	}
	if cmd.Type == fsm.CmdIncarnation {
		// A node recording its start (restore.go).
		if err := b.node.SetIncarnation(ctx, cmd.Incarnation.ID, cmd.Incarnation.Incarnation, cmd.Incarnation.Restoring); err != nil {
			return nil, err
		}
		return EncodeResults(nil), nil
	}
	if cmd.Type == fsm.CmdNamespace {
		// A namespace change a follower was asked for (LeaderCatalog).
		if err := b.applyNamespace(ctx, req); err != nil {
			return nil, err
		}
		return EncodeResults(nil), nil
	}
	if cmd.Type != fsm.CmdIndex || len(cmd.Ops) == 0 {
		return nil, fmt.Errorf("%w: forwarded proposal must be a non-empty index batch or a member registration", block.ErrInvalidArgument)
	}
	for _, o := range cmd.Ops {
		if o.Kind == 0 {
			return nil, fmt.Errorf("%w: forwarded proposal holds an operation this node does not know", block.ErrInvalidArgument)
		}
	}
	res, err := b.node.Propose(ctx, cmd.Ops...)
	if err != nil {
		return nil, err
	}
	return EncodeResults(res), nil
}

// propose commits ops: on the leader directly, elsewhere through the
// Forwarder. It retries through leader changes and unknown outcomes (every
// index operation is idempotent) until cfg.ProposeTimeout.
func (b *Backend) propose(ctx context.Context, ops ...fsm.Op) ([]fsm.OpResult, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.ProposeTimeout)
	defer cancel()
	backoff := 10 * time.Millisecond
	for {
		res, err := b.proposeOnce(ctx, ops)
		if err == nil {
			return res, nil
		}
		if errors.Is(err, block.ErrInvalidArgument) || errors.Is(err, block.ErrClosed) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: committing the index change: %v (last error: %v)", block.ErrUnavailable, ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 200*time.Millisecond)
	}
}

func (b *Backend) proposeOnce(ctx context.Context, ops []fsm.Op) ([]fsm.OpResult, error) {
	if b.node.IsLeader() {
		return b.node.Propose(ctx, ops...)
	}
	leader, ok := b.node.LeaderMember()
	if !ok || leader.ID == b.cfg.NodeID {
		return nil, raft.ErrNotLeader
	}
	if b.fwd == nil {
		return nil, fmt.Errorf("%w: not the leader and no forwarder configured", raft.ErrNotLeader)
	}
	return b.fwdq.do(ctx, ops)
}

// registerLoop keeps this node's member record (Config.Self) in the index:
// a node that was bootstrapped statically, or whose addresses changed,
// records itself through the leader.
func (b *Backend) registerLoop() {
	defer b.wg.Done()
	self := b.cfg.Self
	self.ID, self.State = b.cfg.NodeID, fsm.MemberAlive
	backoff := 20 * time.Millisecond
	for {
		wait := 5 * time.Second
		if !b.SelfRegistered() {
			ctx, cancel := context.WithTimeout(context.Background(), b.cfg.ProposeTimeout)
			err := b.register(ctx, self)
			cancel()
			if err != nil {
				// Readiness waits for the record (SelfRegistered): retry
				// soon, the first tries often find no leader known yet.
				b.log.Debug("registering this node's member record", "err", err)
				wait, backoff = backoff, min(backoff*2, 200*time.Millisecond)
			} else {
				b.log.Info("member record registered", "data", self.DataAddr, "http", self.HTTPAddr)
				continue
			}
		}
		select {
		case <-b.stop:
			return
		case <-time.After(wait):
		}
	}
}

// SelfRegistered reports whether the index's record of this node carries
// this start's addresses, zone and capacity (Config.Self; a Backend without
// one only needs a record). Until it does, other members send this node's
// shards to the addresses of its previous start: a node that restarted on
// another port would refuse every shard write meant for it, and puts would
// be acknowledged without its shard. Restore, and so readiness, waits for
// it.
func (b *Backend) SelfRegistered() bool {
	cur, ok := b.node.FSM().Member(b.cfg.NodeID)
	if !ok {
		return false
	}
	self := b.cfg.Self
	if self.RaftAddr == "" {
		return true
	}
	return cur.RaftAddr == self.RaftAddr && cur.DataAddr == self.DataAddr && cur.HTTPAddr == self.HTTPAddr && cur.Zone == self.Zone && cur.Capacity == self.Capacity
}

func (b *Backend) register(ctx context.Context, self fsm.Member) error {
	if b.node.IsLeader() {
		return b.node.SetMember(ctx, self)
	}
	leader, ok := b.node.LeaderMember()
	if !ok || b.fwd == nil {
		return raft.ErrNotLeader
	}
	out, err := b.fwd.Forward(ctx, leader, fsm.EncodeMember(fsm.MemberCommand{Action: fsm.MemberUpsert, Member: self}))
	if err != nil {
		return err
	}
	_, err = DecodeResults(out, 0)
	return err
}
