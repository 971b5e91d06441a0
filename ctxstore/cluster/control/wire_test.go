package control

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ctxtier/ctxtier/raft/fsm"
)

// TestFromMemberIncarnation: status rows carry the member's incarnation and
// restoring flag (the console's Incarnation column, ctxctl --json), and a
// member that never started (incarnation 0) leaves both out.
func TestFromMemberIncarnation(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   fsm.Member
		want string // substring of the JSON, or "" for neither field
	}{
		{"restoring", fsm.Member{ID: "n1", State: fsm.MemberAlive, Incarnation: 42, Restoring: true}, `"incarnation":42,"restoring":true`},
		{"restored", fsm.Member{ID: "n2", State: fsm.MemberAlive, Incarnation: 7}, `"incarnation":7}`},
		{"never started", fsm.Member{ID: "n3", State: fsm.MemberAlive}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := FromMember(tc.in)
			if m.Incarnation != tc.in.Incarnation || m.Restoring != tc.in.Restoring {
				t.Fatalf("FromMember(%+v) = %+v", tc.in, m)
			}
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if strings.Contains(string(b), "incarnation") || strings.Contains(string(b), "restoring") {
					t.Fatalf("%s: want neither field", b)
				}
			} else if !strings.Contains(string(b), tc.want) {
				t.Fatalf("%s: want %s", b, tc.want)
			}
		})
	}
}
