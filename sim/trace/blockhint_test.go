package trace

import (
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

func TestBlockHint(t *testing.T) {
	r := Request{HashIDs: []uint64{1, 2, 3, 4, 5, 6}, Session: "s1",
		Hints: &Hints{SharedPrefixBlocks: 2, ResumeWithinMs: 5000, EphemeralTailBlocks: 2}}
	ended := r
	ended.Hints = &Hints{SharedPrefixBlocks: 2, ResumeWithinMs: 5000, SessionEnd: true}
	for _, tc := range []struct {
		name   string
		r      Request
		i      int
		speed  float64
		reuse  block.Reuse
		retain time.Duration
	}{
		{"shared prefix", r, 0, 1, block.ReuseShared, 15 * time.Second},
		{"session block", r, 3, 1, block.ReuseSession, 15 * time.Second},
		{"ephemeral tail", r, 4, 1, block.ReuseNever, 0},
		{"last block", r, 5, 1, block.ReuseNever, 0},
		{"ten times faster", r, 2, 10, block.ReuseSession, 1500 * time.Millisecond},
		{"session end: own block never reused", ended, 3, 1, block.ReuseNever, 0},
		{"session end: shared block, no retain", ended, 1, 1, block.ReuseShared, 0},
		{"no hints", Request{HashIDs: []uint64{1}}, 0, 1, block.ReuseUnknown, 0},
		{"out of range", r, 6, 1, block.ReuseUnknown, 0},
	} {
		reuse, retain := tc.r.BlockHint(tc.i, 10*time.Second, tc.speed)
		if reuse != tc.reuse || retain != tc.retain {
			t.Errorf("%s: %v %v, want %v %v", tc.name, reuse, retain, tc.reuse, tc.retain)
		}
		o := block.PutOptions{Reuse: reuse, Retain: retain}
		if err := o.ValidateHints(); err != nil {
			t.Errorf("%s: the hint is not valid on the wire: %v", tc.name, err)
		}
	}
}

func TestReadRetain(t *testing.T) {
	for _, tc := range []struct {
		name  string
		h     *Hints
		speed float64
		want  time.Duration
	}{
		{"resume window plus grace", &Hints{ResumeWithinMs: 5000}, 1, 15 * time.Second},
		{"five times faster", &Hints{ResumeWithinMs: 5000}, 5, 3 * time.Second},
		{"session end", &Hints{ResumeWithinMs: 5000, SessionEnd: true}, 1, 0},
		{"no resume window", &Hints{SharedPrefixBlocks: 3}, 1, 0},
		{"no hints", nil, 1, 0},
	} {
		r := Request{HashIDs: []uint64{1, 2}, Session: "s", Hints: tc.h}
		got := r.ReadRetain(10*time.Second, tc.speed)
		if got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		if got > 0 && block.ValidateRetain(got) != nil {
			t.Errorf("%s: %v is not a valid read hint", tc.name, got)
		}
	}
}
