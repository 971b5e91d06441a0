package clusterapi

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

func TestReadIndex(t *testing.T) {
	c := newCluster(t, 3, WithToken("s3cret"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	leader := c.waitLeader()
	f := c.follower()
	lm, ok := f.node.LeaderMember()
	if !ok {
		t.Fatal("follower knows no leader")
	}
	fw := NewForwarder(nil, WithToken("s3cret"))
	for i := range 10 {
		key := block.NewKey(block.DefaultNamespace, uint64(i+1))
		res, err := leader.node.Propose(ctx, fsm.PutOp(key, fsm.Entry{Size: 1, Sum: 1, Placement: []fsm.Shard{{NodeID: leader.id}}}))
		if err != nil {
			t.Fatal(err)
		}
		idx, err := fw.ReadIndex(ctx, lm)
		if err != nil {
			t.Fatal(err)
		}
		if idx < res[0].Generation {
			t.Fatalf("read index %d below the acknowledged put's log index %d", idx, res[0].Generation)
		}
		if err := f.node.WaitApplied(ctx, idx); err != nil {
			t.Fatal(err)
		}
		if _, ok := f.node.FSM().Lookup(key); !ok {
			t.Fatalf("put %d missing on the follower at the read index", i)
		}
	}
	cases := []struct {
		name   string
		fw     *Forwarder
		target fsm.Member
		want   []error
	}{
		{"no token", NewForwarder(nil), lm, []error{block.ErrUnauthenticated}},
		{"wrong token", NewForwarder(nil, WithToken("nope")), lm, []error{block.ErrUnauthenticated}},
		{"a follower names the leader", fw, f.member(), []error{raft.ErrNotLeader, block.ErrUnavailable}},
		{"no leader address", fw, fsm.Member{ID: "x"}, []error{block.ErrUnavailable}},
		{"dead leader", fw, fsm.Member{ID: "x", HTTPAddr: "127.0.0.1:1"}, []error{block.ErrUnavailable}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.fw.ReadIndex(ctx, tc.target)
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("err %v, want %v", err, w)
				}
			}
		})
	}
	var hint *LeaderHintError
	if _, err := fw.ReadIndex(ctx, f.member()); !errors.As(err, &hint) || hint.LeaderID != leader.id || hint.LeaderHTTPAddr != leader.addr() {
		t.Errorf("follower reply: %v", err)
	}
}
