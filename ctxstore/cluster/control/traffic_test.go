package control_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control/controltest"
)

// TestTraffic serves a node's traffic counters on control.PathTraffic only to
// callers with the cluster token, and never on a node without one.
func TestTraffic(t *testing.T) {
	counts := []ctxstore.TrafficCount{
		{Namespace: "a", Gets: 10, Hits: 7, Misses: 3, ReadBytes: 7 << 10},
		{Namespace: "b", Puts: 4, WrittenBytes: 4 << 20},
	}
	src := func() []ctxstore.TrafficCount { return counts }
	for _, tc := range []struct {
		name    string
		server  []control.Option // the node's handler
		client  []control.Option
		want    []ctxstore.TrafficCount
		wantErr error
	}{
		{name: "token", server: []control.Option{control.WithToken("s3cret"), control.WithTraffic(src)}, client: []control.Option{control.WithToken("s3cret")}, want: counts},
		{name: "no token sent", server: []control.Option{control.WithToken("s3cret"), control.WithTraffic(src)}, wantErr: block.ErrUnauthenticated},
		{name: "wrong token", server: []control.Option{control.WithToken("s3cret"), control.WithTraffic(src)}, client: []control.Option{control.WithToken("guess")}, wantErr: block.ErrUnauthenticated},
		{name: "node without a secret", server: []control.Option{control.WithTraffic(src)}, wantErr: block.ErrUnauthenticated},
		{name: "node without counters", server: []control.Option{control.WithToken("s3cret")}, client: []control.Option{control.WithToken("s3cret")}, wantErr: block.ErrNotFound},
		{name: "no traffic yet", server: []control.Option{control.WithToken("s3cret"), control.WithTraffic(func() []ctxstore.TrafficCount { return nil })},
			client: []control.Option{control.WithToken("s3cret")}, want: []ctxstore.TrafficCount{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := controltest.New(t, 1, tc.server...)
			n := c.Nodes[0]
			got, err := control.NewClient(n.Addr(), tc.client...).Traffic(context.Background())
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.NodeID != n.ID || !reflect.DeepEqual(got.Namespaces, tc.want) {
				t.Fatalf("reply %+v, want node %s with %+v", got, n.ID, tc.want)
			}
		})
	}
}

// replyTransport answers every request with a 200 and body.
type replyTransport []byte

func (b replyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(b)), Request: r}, nil
}

// FuzzTrafficReply feeds arbitrary 200 replies to Client.Traffic, the
// decoder of a member's counters. The invariants: it returns exactly what
// a strict JSON reading of the body gives (the same node id and counts, in
// order), or, when the body is no such object, an error that is
// block.ErrUnavailable (a bad member, never a bad request) and no counts.
func FuzzTrafficReply(f *testing.F) {
	for _, seed := range []string{
		`{"node_id":"n2","namespaces":[{"namespace":"a","gets":3,"hits":2,"misses":1,"puts":4,"written_bytes":400,"read_bytes":200}]}`,
		`{"node_id":"n2","namespaces":[]}`, `{"node_id":"n2"}`, `{}`, `null`, `[]`, ``, `{"namespaces":[{"gets":-1}]}`,
		`{"namespaces":[{"gets":18446744073709551616}]}`, `{"namespaces":[{"gets":1.5}]}`, `{"node_id":7}`,
		`{"node_id":"n2","namespaces":[{"namespace":"a"},{"namespace":"a","gets":1}]}`, `{"node_id":"n2"} trailing`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		cl := control.NewClient("127.0.0.1:9", control.WithToken("s3cret"), control.WithHTTPClient(&http.Client{Transport: replyTransport(body)}))
		got, err := cl.Traffic(context.Background())
		var want control.TrafficResponse
		werr := json.Unmarshal(body, &want)
		if err != nil {
			if !errors.Is(err, block.ErrUnavailable) {
				t.Fatalf("body %q: error %v is not Unavailable", body, err)
			}
			if werr == nil {
				t.Fatalf("body %q: refused (%v), but it decodes to %+v", body, err, want)
			}
			return
		}
		if werr != nil {
			t.Fatalf("body %q: accepted as %+v, but it does not decode: %v", body, got, werr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("body %q: decoded %+v, want %+v", body, got, want)
		}
	})
}
