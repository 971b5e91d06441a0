package control_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control/controltest"
)

// releaseLog is a control.SessionReleaser that records what it was asked.
type releaseLog struct {
	mu    sync.Mutex
	calls []control.SessionEndRequest
	n     int
	err   error
}

func (l *releaseLog) release(_ context.Context, ns string, s uint64) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, control.SessionEndRequest{Namespace: ns, Session: s})
	return l.n, l.err
}

// TestSessionEndHandler: control.PathSessionEnd releases on this node through
// control.Config.Sessions, behind the token, and refuses session 0.
func TestSessionEndHandler(t *testing.T) {
	for _, tc := range []struct {
		name    string
		server  func(*releaseLog) []control.Option
		client  []control.Option
		session uint64
		err     error // what the releaser returns
		wantErr error
		want    int
	}{
		{name: "released", server: func(l *releaseLog) []control.Option {
			return []control.Option{control.WithToken("s3cret"), control.WithSessions(l.release)}
		},
			client: []control.Option{control.WithToken("s3cret")}, session: 7, want: 5},
		{name: "no token sent", server: func(l *releaseLog) []control.Option {
			return []control.Option{control.WithToken("s3cret"), control.WithSessions(l.release)}
		},
			session: 7, wantErr: block.ErrUnauthenticated},
		{name: "wrong token", server: func(l *releaseLog) []control.Option {
			return []control.Option{control.WithToken("s3cret"), control.WithSessions(l.release)}
		},
			client: []control.Option{control.WithToken("guess")}, session: 7, wantErr: block.ErrUnauthenticated},
		{name: "session 0", server: func(l *releaseLog) []control.Option {
			return []control.Option{control.WithToken("s3cret"), control.WithSessions(l.release)}
		},
			client: []control.Option{control.WithToken("s3cret")}, session: 0, wantErr: block.ErrInvalidArgument},
		{name: "unknown namespace", server: func(l *releaseLog) []control.Option {
			return []control.Option{control.WithToken("s3cret"), control.WithSessions(l.release)}
		},
			client: []control.Option{control.WithToken("s3cret")}, session: 7, err: fmt.Errorf("%w: no namespace", block.ErrNotFound), wantErr: block.ErrNotFound},
		{name: "node without a releaser", server: func(*releaseLog) []control.Option { return []control.Option{control.WithToken("s3cret")} },
			client: []control.Option{control.WithToken("s3cret")}, session: 7, wantErr: block.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &releaseLog{n: 5, err: tc.err}
			c := controltest.New(t, 1, tc.server(l)...)
			n := c.Nodes[0]
			got, err := control.NewClient(n.Addr(), tc.client...).EndSession(context.Background(), "ns1", tc.session)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error %v, want %v", err, tc.wantErr)
				}
				if tc.err == nil && len(l.calls) != 0 {
					t.Fatalf("a refused request released: %+v", l.calls)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.NodeID != n.ID || got.Released != tc.want {
				t.Fatalf("reply %+v, want node %s releasing %d", got, n.ID, tc.want)
			}
			if len(l.calls) != 1 || l.calls[0] != (control.SessionEndRequest{Namespace: "ns1", Session: tc.session}) {
				t.Fatalf("releaser calls %+v", l.calls)
			}
		})
	}
}
