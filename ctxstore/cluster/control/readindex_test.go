package control_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control/controltest"
	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

func TestReadIndex(t *testing.T) {
	c := controltest.New(t, 3, control.WithToken("s3cret"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	leader := c.WaitLeader()
	f := c.Follower()
	lm, ok := f.Raft.LeaderMember()
	if !ok {
		t.Fatal("follower knows no leader")
	}
	fw := control.NewForwarder(nil, control.WithToken("s3cret"))
	for i := range 10 {
		key := block.NewKey(block.DefaultNamespace, uint64(i+1))
		res, err := leader.Raft.Propose(ctx, fsm.PutOp(key, fsm.Entry{Size: 1, Sum: 1, Placement: []fsm.Shard{{NodeID: leader.ID}}}))
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
		if err := f.Raft.WaitApplied(ctx, idx); err != nil {
			t.Fatal(err)
		}
		if _, ok := f.Raft.FSM().Lookup(key); !ok {
			t.Fatalf("put %d missing on the follower at the read index", i)
		}
	}
	cases := []struct {
		name   string
		fw     *control.Forwarder
		target fsm.Member
		want   []error
	}{
		{"no token", control.NewForwarder(nil), lm, []error{block.ErrUnauthenticated}},
		{"wrong token", control.NewForwarder(nil, control.WithToken("nope")), lm, []error{block.ErrUnauthenticated}},
		{"a follower names the leader", fw, f.Member(), []error{raft.ErrNotLeader, block.ErrUnavailable}},
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
	var hint *control.LeaderHintError
	if _, err := fw.ReadIndex(ctx, f.Member()); !errors.As(err, &hint) || hint.LeaderID != leader.ID || hint.LeaderHTTPAddr != leader.Addr() {
		t.Errorf("follower reply: %v", err)
	}
}
