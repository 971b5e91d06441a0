package clusterapi

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TestTraffic serves a node's traffic counters on PathTraffic only to
// callers with the cluster token, and never on a node without one.
func TestTraffic(t *testing.T) {
	counts := []ctxstore.TrafficCount{
		{Namespace: "a", Gets: 10, Hits: 7, Misses: 3, ReadBytes: 7 << 10},
		{Namespace: "b", Puts: 4, WrittenBytes: 4 << 20},
	}
	src := func() []ctxstore.TrafficCount { return counts }
	for _, tc := range []struct {
		name    string
		server  []Option // the node's handler
		client  []Option
		want    []ctxstore.TrafficCount
		wantErr error
	}{
		{name: "token", server: []Option{WithToken("s3cret"), WithTraffic(src)}, client: []Option{WithToken("s3cret")}, want: counts},
		{name: "no token sent", server: []Option{WithToken("s3cret"), WithTraffic(src)}, wantErr: block.ErrUnauthenticated},
		{name: "wrong token", server: []Option{WithToken("s3cret"), WithTraffic(src)}, client: []Option{WithToken("guess")}, wantErr: block.ErrUnauthenticated},
		{name: "node without a secret", server: []Option{WithTraffic(src)}, wantErr: block.ErrUnauthenticated},
		{name: "node without counters", server: []Option{WithToken("s3cret")}, client: []Option{WithToken("s3cret")}, wantErr: block.ErrNotFound},
		{name: "no traffic yet", server: []Option{WithToken("s3cret"), WithTraffic(func() []ctxstore.TrafficCount { return nil })},
			client: []Option{WithToken("s3cret")}, want: []ctxstore.TrafficCount{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 1, tc.server...)
			n := c.nodes[0]
			got, err := NewClient(n.addr(), tc.client...).Traffic(context.Background())
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.NodeID != n.id || !reflect.DeepEqual(got.Namespaces, tc.want) {
				t.Fatalf("reply %+v, want node %s with %+v", got, n.id, tc.want)
			}
		})
	}
}
