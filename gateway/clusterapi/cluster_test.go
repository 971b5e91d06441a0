package clusterapi

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control/controltest"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/raft"
)

// tcluster is a controltest cluster whose nodes serve, as ctxd's do, the
// operator endpoints (Handler) at /v1/cluster/ and the control endpoints
// (control.Server) at control.Patterns, on one mux.
type tcluster struct {
	*controltest.Cluster
	t *testing.T
	// ctl are the control options of every node and of the joins (token,
	// leader wait); opts the operator handler's.
	ctl  []control.Option
	opts []Option
	// drain, when set, gives every node's handler a Drainer.
	drain *drainState
	// keys, when set, gets each node's access-key store (WithKeys), made
	// over the node by newKeys.
	keys    map[string]*credential.Replicated
	newKeys func(*raft.Node) *credential.Replicated
}

// newCluster starts n nodes: n1 bootstraps alone and the others join
// through control.Join (controltest.Cluster.Start).
func newCluster(t *testing.T, n int, ctl ...control.Option) *tcluster {
	t.Helper()
	return startCluster(&tcluster{t: t, ctl: ctl}, n)
}

// newClusterWith is newCluster whose nodes drain through drain.
func newClusterWith(t *testing.T, n int, drain *drainState, ctl ...control.Option) *tcluster {
	t.Helper()
	return startCluster(&tcluster{t: t, ctl: ctl, drain: drain}, n)
}

// startCluster starts c's n nodes as newCluster does.
func startCluster(c *tcluster, n int) *tcluster {
	c.t.Helper()
	c.Cluster = &controltest.Cluster{T: c.t, Opts: c.ctl, Handler: c.handler}
	c.Start(n)
	return c
}

// handler is one node's mux: the operator endpoints and the control ones.
func (c *tcluster) handler(n *controltest.Node) http.Handler {
	ctl := control.NewServer(n.Raft, n.Proposals, controltest.Log(), c.ctl...)
	var drain Drainer
	if c.drain != nil {
		drain = &fakeDrainer{node: n.Raft, st: c.drain}
	}
	opts := c.opts
	if c.newKeys != nil {
		k := c.newKeys(n.Raft)
		c.keys[n.ID] = k
		opts = append(slices.Clone(opts), WithKeys(k))
	}
	extra := func() any {
		return map[string]any{"node": n.ID, "repair": map[string]any{"pending_blocks": 3, "rebuilt_blocks": 7}}
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/cluster/", Handler(ctl, drain, extra, controltest.Log(), opts...))
	for _, p := range control.Patterns() {
		mux.Handle(p, ctl)
	}
	return mux
}

func memberIDs(ms []Member) string {
	var ids []string
	for _, m := range ms {
		ids = append(ids, fmt.Sprintf("%s/%s/voter=%v", m.ID, m.State, m.Voter))
	}
	return strings.Join(ids, ",")
}
