package policy

import (
	"slices"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TestHintedReadRetainAndSessionRelease: a read's retain window (Retain)
// re-arms a block past an equally old one that was not read with one, and
// ReleaseSession sends a session's own blocks (never its shared ones, never
// another session's) to the first victims; removed and re-inserted handles
// leave their session's list.
func TestHintedReadRetainAndSessionRelease(t *testing.T) {
	const sec = int64(1e9)
	type step struct {
		at      int64
		retain  []Handle // re-armed by a read at `at` for 10 s
		release uint64   // session released at `at` (0: none)
		remove  []Handle
	}
	for _, tc := range []struct {
		name      string
		metas     []Meta // handles 0.. inserted at time 0, in order
		steps     []step
		now       int64
		wantN     int // blocks ReleaseSession reported, summed
		wantOrder []Handle
	}{
		{
			name: "a read re-arms past an equally old block",
			// Both put with a 5 s window; at 4 s handle 1 is read with a
			// 10 s window: at 8 s handle 0 is outside its window, 1 inside.
			metas:     []Meta{{Hash: 1, Retain: 5 * sec}, {Hash: 2, Retain: 5 * sec}},
			steps:     []step{{at: 4 * sec, retain: []Handle{1}}},
			now:       8 * sec,
			wantOrder: []Handle{0, 1},
		},
		{
			name:      "without the read re-arm LRU order stands",
			metas:     []Meta{{Hash: 1, Retain: 5 * sec}, {Hash: 2, Retain: 5 * sec}},
			now:       8 * sec,
			wantOrder: []Handle{0, 1},
		},
		{
			name: "a read re-arms an unhinted block too",
			// Unhinted 0 is LRU-oldest; re-armed at 4 s it outlives 1.
			metas:     []Meta{{Hash: 1}, {Hash: 2}},
			steps:     []step{{at: 4 * sec, retain: []Handle{0}}},
			now:       8 * sec,
			wantOrder: []Handle{1, 0},
		},
		{
			name: "session release: its blocks go first, shared ones stay",
			metas: []Meta{
				{Hash: 1}, // unhinted, oldest
				{Hash: 2, Session: 7, Reuse: block.ReuseSession, Retain: 60 * sec},
				{Hash: 3, Session: 7, Reuse: block.ReuseShared, Retain: 60 * sec},
				{Hash: 4, Session: 8, Reuse: block.ReuseSession, Retain: 60 * sec},
				{Hash: 5, Session: 7, Reuse: block.ReuseSession, Retain: 60 * sec},
			},
			steps:     []step{{at: sec, release: 7}},
			now:       2 * sec,
			wantN:     2,
			wantOrder: []Handle{1, 4, 0, 3, 2},
		},
		{
			name: "a removed block leaves its session",
			metas: []Meta{
				{Hash: 1},
				{Hash: 2, Session: 7, Retain: 60 * sec},
				{Hash: 3, Session: 7, Retain: 60 * sec},
				{Hash: 4, Session: 7, Retain: 60 * sec},
			},
			steps:     []step{{at: 0, remove: []Handle{2}}, {at: sec, release: 7}},
			now:       2 * sec,
			wantN:     2,
			wantOrder: []Handle{1, 3, 0},
		},
		{
			name:      "an unknown session releases nothing",
			metas:     []Meta{{Hash: 1}, {Hash: 2, Session: 7, Retain: 60 * sec}},
			steps:     []step{{at: sec, release: 9}, {at: sec, release: 0}},
			now:       2 * sec,
			wantOrder: []Handle{0, 1},
		},
		{
			name:      "a released session releases nothing twice",
			metas:     []Meta{{Hash: 1}, {Hash: 2, Session: 7, Retain: 60 * sec}},
			steps:     []step{{at: sec, release: 7}, {at: sec, release: 7}},
			now:       2 * sec,
			wantN:     1,
			wantOrder: []Handle{1, 0},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner, err := Lookup("lru")
			if err != nil {
				t.Fatal(err)
			}
			p := DefaultHintConfig().Factory(inner)(16).(*Hinted)
			p.SetNow(0)
			for i, m := range tc.metas {
				p.Insert(Handle(i), m)
			}
			n := 0
			for _, s := range tc.steps {
				p.SetNow(s.at)
				for _, h := range s.retain {
					p.Touch(h)
					p.Retain(h, s.at+10*sec)
				}
				for _, h := range s.remove {
					p.Remove(h)
				}
				if s.release != 0 || len(s.retain) == 0 && len(s.remove) == 0 {
					n += p.ReleaseSession(s.release)
				}
			}
			if n != tc.wantN {
				t.Errorf("ReleaseSession released %d blocks, want %d", n, tc.wantN)
			}
			p.SetNow(tc.now)
			if got := drain(p, nil); !slices.Equal(got, tc.wantOrder) {
				t.Errorf("victims %v, want %v", got, tc.wantOrder)
			}
			if len(p.sessions) != 0 {
				t.Errorf("%d session lists left after every block was removed", len(p.sessions))
			}
		})
	}
}
