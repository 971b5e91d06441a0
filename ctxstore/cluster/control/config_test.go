package control

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// TestBuiltClientKeepsConnections: the client build makes keeps a
// connection per request in flight to one address, so rounds of concurrent
// requests (a follower's forwards to the leader) reuse them instead of
// dialing again; net/http's default transport keeps two.
func TestBuiltClientKeepsConnections(t *testing.T) {
	const inFlight, rounds = 32, 4
	tests := []struct {
		name     string
		client   func() *http.Client
		minConns int64
		maxConns int64
	}{
		{"built", func() *http.Client { return build(nil).Client }, inFlight, inFlight + 4},
		// The default transport, for contrast: most requests of each
		// round after the first dial again (which shows the test can tell).
		{"default transport", func() *http.Client { return &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()} }, 2 * inFlight, rounds * inFlight},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var conns atomic.Int64
			release := make(chan struct{})
			var arrived sync.WaitGroup
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				arrived.Done()
				<-release // every request of a round is in flight at once
				w.WriteHeader(http.StatusNoContent)
			}))
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					conns.Add(1)
				}
			}
			srv.Start()
			defer srv.Close()
			hc := tc.client()
			defer hc.CloseIdleConnections()
			for range rounds {
				release = make(chan struct{})
				arrived.Add(inFlight)
				var done sync.WaitGroup
				for range inFlight {
					done.Go(func() {
						resp, err := hc.Get(srv.URL)
						if err != nil {
							t.Error(err)
							return
						}
						resp.Body.Close()
					})
				}
				arrived.Wait()
				close(release)
				done.Wait()
			}
			got := conns.Load()
			if got > tc.maxConns || got < tc.minConns {
				t.Fatalf("%d connections for %d rounds of %d requests in flight, want %d..%d", got, rounds, inFlight, tc.minConns, tc.maxConns)
			}
			t.Logf("%d connections for %d rounds of %d requests in flight", got, rounds, inFlight)
		})
	}
}
