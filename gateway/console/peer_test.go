package console

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/ctxtier/ctxtier/gateway/clusterapi"
)

// TestPeerOverTLS: a member whose HTTP port serves TLS only (ctxd
// --tls-clients) is reached over https with Deps.PeerTLS; without it the
// request fails as Unavailable instead of reading a TLS alert as a reply.
func TestPeerOverTLS(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	peer, err := New(DefaultConfig(), Deps{NodeID: "n2", Cluster: &fakeCluster{status: clusterapi.Status{NodeID: "n2"}},
		Gatherer: tierRegistry(t)}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	peerTS := httptest.NewTLSServer(peer.Handler())
	t.Cleanup(peerTS.Close)
	u, _ := url.Parse(peerTS.URL)
	roots := x509.NewCertPool()
	roots.AddCert(peerTS.Certificate())

	status := clusterapi.Status{NodeID: "n1", Members: []clusterapi.Member{{ID: "n1", State: "alive"}, {ID: "n2", State: "alive", HTTPAddr: u.Host}}}
	tests := []struct {
		name   string
		tls    *tls.Config
		status int
		nodeID string
	}{
		{"https with the members' roots", &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}, http.StatusOK, "n2"},
		{"plain http to a TLS port", nil, http.StatusServiceUnavailable, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(DefaultConfig(), Deps{NodeID: "n1", Cluster: &fakeCluster{status: status}, Gatherer: tierRegistry(t), PeerTLS: tc.tls}, quiet)
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewServer(c.Handler())
			t.Cleanup(ts.Close)
			for _, path := range []string{"/ui/api/node?id=n2", "/ui/api/series?id=n2"} {
				resp, err := http.Get(ts.URL + path)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.status {
					t.Fatalf("GET %s: %d %s, want %d", path, resp.StatusCode, b, tc.status)
				}
				if tc.status != http.StatusOK {
					continue
				}
				var v struct {
					NodeID string `json:"node_id"`
				}
				if err := json.Unmarshal(b, &v); err != nil || v.NodeID != tc.nodeID {
					t.Fatalf("GET %s: node %q (%v), want %q: %s", path, v.NodeID, err, tc.nodeID, b)
				}
			}
		})
	}
}
