package client

// This file is the cluster-aware client: native-protocol clients of every
// member, with each block of a batch sent to the member that placement
// ranks first for it (its owner, the holder of its first shard), so the
// member that answers writes that shard into its own tiers instead of
// forwarding it to a peer. Any member accepts any block (it forwards what
// it does not own), so a stale member list costs a hop, never a block.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/placement"
)

// ClusterNode is one member's client-facing addresses.
type ClusterNode struct {
	// Native is its native-protocol listener (ctxd --listen).
	Native string
	// HTTP is its HTTP API ("host:port" or a URL), where the client reads
	// GET /v1/cluster/status: the member's ID and the member list.
	HTTP string
}

// ClusterConfig configures a Cluster.
type ClusterConfig struct {
	// Nodes are the members the client connects to. A member of the
	// cluster missing here gets its blocks through another member, which
	// forwards them (one hop more, nothing lost).
	Nodes []ClusterNode
	// Native configures each member's native client (connections per
	// member, credentials, TLS).
	Native Options
	// HTTP configures the status reads (credentials, TLS); BaseURL is
	// replaced by each node's HTTP address. Without credentials of its own
	// it signs with Native's (a node with --auth required answers status
	// to any access key).
	HTTP HTTPConfig
	// Refresh is how old the member list may get while calls run before
	// it is read again, in the background (a request that fails on a
	// member's connection also starts a read).
	Refresh time.Duration
}

// ClusterDefaultConfig returns the defaults: no nodes, DefaultOptions,
// HTTPDefaultConfig with 4 pooled connections, a 5 s refresh.
func ClusterDefaultConfig() ClusterConfig {
	h := HTTPDefaultConfig()
	h.MaxIdleConnsPerHost = 4
	return ClusterConfig{Native: DefaultOptions(), HTTP: h, Refresh: 5 * time.Second}
}

// Validate checks the configuration; errors wrap block.ErrInvalidArgument.
func (c ClusterConfig) Validate() error {
	switch {
	case len(c.Nodes) == 0:
		return fmt.Errorf("%w: cluster client: no nodes", block.ErrInvalidArgument)
	case c.Refresh <= 0:
		return fmt.Errorf("%w: cluster client: Refresh %v must be positive", block.ErrInvalidArgument, c.Refresh)
	}
	for i, n := range c.Nodes {
		if n.Native == "" || n.HTTP == "" {
			return fmt.Errorf("%w: cluster client: node %d needs both a native and an HTTP address", block.ErrInvalidArgument, i)
		}
	}
	return nil
}

// Cluster is a client of a whole cluster: a native Client per configured
// member, and the member list that tells it which member owns a block.
// It is safe for concurrent use.
type Cluster struct {
	cfg        ClusterConfig
	nodes      []clusterMember
	view       atomic.Pointer[clusterView]
	refreshing atomic.Bool
	next       atomic.Uint64 // round robin over nodes for unowned keys
}

type clusterMember struct {
	addr ClusterNode
	// native is nil while the member could not be dialed: its blocks go
	// through another member until a Refresh dials it.
	native atomic.Pointer[Client]
	status *HTTPClient
	id     atomic.Pointer[string] // its member ID, once a status said it
}

// clusterView is one reading of the member list.
type clusterView struct {
	at      time.Time
	members []placement.Node // alive members, the placement candidates
	node    map[string]int   // member ID -> index in Cluster.nodes
}

// clusterStatus is the part of GET /v1/cluster/status the client reads.
type clusterStatus struct {
	NodeID  string `json:"node_id"`
	Members []struct {
		ID       string `json:"id"`
		Zone     string `json:"zone"`
		Capacity int64  `json:"capacity"`
		State    string `json:"state"`
	} `json:"members"`
}

// DialCluster connects to every node of cfg and reads the member list. A
// node that cannot be reached (block.ErrUnavailable: it is restarting) is
// left without a client, its blocks sent through the others, and dialed
// again by each Refresh; DialCluster fails when no node can be dialed, on
// any other dial error (credentials, protocol version), or when no node
// answers its status.
func DialCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, nodes: make([]clusterMember, len(cfg.Nodes))}
	for i, n := range cfg.Nodes {
		m := &c.nodes[i]
		m.addr = n
		hc := cfg.HTTP
		hc.BaseURL = n.HTTP
		if hc.AccessKeyID == "" {
			// The status read signs with the native key: a cluster with
			// --auth required lets any access key read it.
			hc.AccessKeyID, hc.Secret = cfg.Native.AccessKeyID, cfg.Native.Secret
		}
		if !strings.Contains(hc.BaseURL, "://") {
			hc.BaseURL = "http://" + hc.BaseURL
		}
		var err error
		if m.status, err = NewHTTP(hc); err != nil {
			c.Close()
			return nil, fmt.Errorf("cluster client: node %s: %w", n.HTTP, err)
		}
	}
	if err := c.dialMissing(ctx); err != nil {
		c.Close()
		return nil, err
	}
	if len(c.usable()) == 0 {
		c.Close()
		return nil, fmt.Errorf("%w: cluster client: no node could be dialed", block.ErrUnavailable)
	}
	if err := c.readMembers(ctx); err != nil { // the nodes were just dialed
		c.Close()
		return nil, err
	}
	return c, nil
}

// Close closes every member's client.
func (c *Cluster) Close() error {
	var errs []error
	for i := range c.nodes {
		if nc := c.nodes[i].native.Load(); nc != nil {
			errs = append(errs, nc.Close())
		}
		if m := &c.nodes[i]; m.status != nil {
			errs = append(errs, m.status.Close())
		}
	}
	return errors.Join(errs...)
}

// dialMissing dials the nodes without a client; one that cannot be
// reached stays without, any other error is returned.
func (c *Cluster) dialMissing(ctx context.Context) error {
	for i := range c.nodes {
		m := &c.nodes[i]
		if m.native.Load() != nil {
			continue
		}
		nc, err := Dial(ctx, m.addr.Native, c.cfg.Native)
		switch {
		case err == nil:
			if !m.native.CompareAndSwap(nil, nc) {
				nc.Close()
			}
		case !errors.Is(err, block.ErrUnavailable):
			return fmt.Errorf("cluster client: node %s: %w", m.addr.Native, err)
		}
	}
	return nil
}

// usable lists the nodes with a client.
func (c *Cluster) usable() []int {
	var out []int
	for i := range c.nodes {
		if c.nodes[i].native.Load() != nil {
			out = append(out, i)
		}
	}
	return out
}

// spare returns a node with a client, in turn, other than not when there
// is one (-1 when none has a client).
func (c *Cluster) spare(not int) int {
	us := c.usable()
	if len(us) == 0 {
		return -1
	}
	n := int(c.next.Add(1) % uint64(len(us)))
	if us[n] == not && len(us) > 1 {
		n = (n + 1) % len(us)
	}
	return us[n]
}

// Refresh reads the member list now: every node whose member ID is not
// known yet is asked (in parallel), else one node in turn; the first
// answer's member list is kept. Nodes without a client are dialed again.
func (c *Cluster) Refresh(ctx context.Context) error {
	if err := c.dialMissing(ctx); err != nil {
		return err
	}
	return c.readMembers(ctx)
}

// readMembers is Refresh's read of the member list.
func (c *Cluster) readMembers(ctx context.Context) error {
	ask := make([]int, 0, len(c.nodes))
	for i := range c.nodes {
		if c.nodes[i].id.Load() == nil {
			ask = append(ask, i)
		}
	}
	if len(ask) == 0 {
		ask = append(ask, int(c.next.Add(1)%uint64(len(c.nodes))))
	}
	sts := make([]clusterStatus, len(ask))
	errs := make([]error, len(ask))
	var wg sync.WaitGroup
	for j, i := range ask {
		wg.Go(func() {
			errs[j] = c.nodes[i].status.getJSON(ctx, c.nodes[i].status.base+"/v1/cluster/status", &sts[j])
			if errs[j] == nil && sts[j].NodeID != "" {
				id := sts[j].NodeID
				c.nodes[i].id.Store(&id)
			}
		})
	}
	wg.Wait()
	for j := range ask {
		if errs[j] == nil {
			c.view.Store(c.newView(sts[j]))
			return nil
		}
	}
	if len(ask) < len(c.nodes) && c.view.Load() != nil {
		return fmt.Errorf("cluster client: member list from %s: %w", c.nodes[ask[0]].addr.HTTP, errs[0])
	}
	return fmt.Errorf("cluster client: no node answered its status: %w", errors.Join(errs...))
}

func (c *Cluster) newView(st clusterStatus) *clusterView {
	v := &clusterView{at: time.Now(), node: make(map[string]int, len(c.nodes))}
	for _, m := range st.Members {
		if m.State == "alive" {
			v.members = append(v.members, placement.Node{ID: m.ID, Zone: m.Zone, Weight: placement.CapacityWeight(m.Capacity)})
		}
	}
	for i := range c.nodes {
		if id := c.nodes[i].id.Load(); id != nil {
			v.node[*id] = i
		}
	}
	return v
}

// maybeRefresh starts a background Refresh when the member list is older
// than cfg.Refresh (or stale is set) and none runs.
func (c *Cluster) maybeRefresh(stale bool) {
	v := c.view.Load()
	if !stale && v != nil && time.Since(v.at) < c.cfg.Refresh {
		return
	}
	if !c.refreshing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer c.refreshing.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Refresh(ctx) // a failed read keeps the last list
	}()
}

// Owner returns the member ID placement ranks first for key in the
// client's member list, and whether the client is connected to it.
func (c *Cluster) Owner(key block.Key) (string, bool) {
	var s placement.Scratch
	i, id := c.owner(c.view.Load(), key, &s)
	return id, i >= 0
}

// owner is Owner with the index of the member's client (-1: none).
func (c *Cluster) owner(v *clusterView, key block.Key, s *placement.Scratch) (int, string) {
	if v == nil || len(v.members) == 0 {
		return -1, ""
	}
	picked, err := placement.PickReusing(key, v.members, 1, s)
	if err != nil || len(picked) == 0 {
		return -1, ""
	}
	i, ok := v.node[picked[0].ID]
	if !ok || c.nodes[i].native.Load() == nil {
		return -1, picked[0].ID
	}
	return i, picked[0].ID
}

// For returns the native client of key's owner (another member's when the
// client has none for it), for any operation on one block.
func (c *Cluster) For(key block.Key) *Client {
	c.maybeRefresh(false)
	var s placement.Scratch
	i, _ := c.owner(c.view.Load(), key, &s)
	if i < 0 {
		i = c.spare(-1)
	}
	return c.nodes[i].native.Load()
}

// group is the items of one call that go to one member.
type group struct {
	node int
	idx  []int
}

// split groups n keys by the member to send each to, in first-seen order.
func (c *Cluster) split(n int, key func(i int) block.Key) []group {
	c.maybeRefresh(false)
	v := c.view.Load()
	var s placement.Scratch
	spare := c.spare(-1)
	var groups []group
	at := make([]int, len(c.nodes)) // node -> 1 + its group's index
	for i := range n {
		node, _ := c.owner(v, key(i), &s)
		if node < 0 {
			node = spare
		}
		if at[node] == 0 {
			groups = append(groups, group{node: node})
			at[node] = len(groups)
		}
		g := &groups[at[node]-1]
		g.idx = append(g.idx, i)
	}
	return groups
}

// run sends every group with send (the last one on this goroutine). A
// group whose request fails as a whole with block.ErrUnavailable (a broken
// connection, a member going away) is sent once more through the next member, which forwards
// its blocks; the member list is read again.
func (c *Cluster) run(ctx context.Context, groups []group, send func(node int, g group) error) []error {
	errs := make([]error, len(groups))
	one := func(j int) {
		g := groups[j]
		errs[j] = send(g.node, g)
		if errors.Is(errs[j], block.ErrUnavailable) && ctx.Err() == nil {
			if other := c.spare(g.node); other != g.node {
				c.maybeRefresh(true)
				errs[j] = send(other, g)
			}
		}
	}
	var wg sync.WaitGroup
	for j := range len(groups) - 1 {
		wg.Go(func() { one(j) })
	}
	if len(groups) > 0 {
		one(len(groups) - 1)
	}
	wg.Wait()
	return errs
}

// PutBatch puts items, each through its owner, the owners' parts in
// parallel. errs[i] is item i's outcome; a part whose request failed as a
// whole on its owner and on the member tried next gives each of its items
// that error. err is set only when no item was put (the first part's
// request error, or the context's).
func (c *Cluster) PutBatch(ctx context.Context, items []PutItem) (errs []error, err error) {
	errs = make([]error, len(items))
	groups := c.split(len(items), func(i int) block.Key { return items[i].Key })
	perr := c.run(ctx, groups, func(node int, g group) error {
		sub := items
		if len(g.idx) != len(items) {
			sub = make([]PutItem, len(g.idx))
			for k, i := range g.idx {
				sub[k] = items[i]
			}
		}
		e, err := c.nodes[node].native.Load().PutBatch(ctx, sub)
		if err != nil {
			return err
		}
		for k, i := range g.idx {
			errs[i] = e[k]
		}
		return nil
	})
	return errs, c.spread(groups, perr, errs)
}

// GetBatchInto reads keys into bufs (as Client.GetBatchInto), each from its
// owner, the owners' parts in parallel; errors as PutBatch's.
func (c *Cluster) GetBatchInto(ctx context.Context, keys []block.Key, bufs [][]byte) (sizes []int, errs []error, err error) {
	if len(bufs) != len(keys) {
		return nil, nil, fmt.Errorf("%w: %d keys, %d buffers", block.ErrInvalidArgument, len(keys), len(bufs))
	}
	sizes, errs = make([]int, len(keys)), make([]error, len(keys))
	groups := c.split(len(keys), func(i int) block.Key { return keys[i] })
	perr := c.run(ctx, groups, func(node int, g group) error {
		sk, sb := keys, bufs
		if len(g.idx) != len(keys) {
			sk, sb = make([]block.Key, len(g.idx)), make([][]byte, len(g.idx))
			for k, i := range g.idx {
				sk[k], sb[k] = keys[i], bufs[i]
			}
		}
		n, e, err := c.nodes[node].native.Load().GetBatchInto(ctx, sk, sb)
		if err != nil {
			return err
		}
		for k, i := range g.idx {
			sizes[i], errs[i] = n[k], e[k]
		}
		return nil
	})
	return sizes, errs, c.spread(groups, perr, errs)
}

// spread copies each failed part's request error to its items and returns
// the call's error: the context's when it ended, else the first part's
// error when every part failed, else nil.
func (c *Cluster) spread(groups []group, perr []error, errs []error) error {
	failed := 0
	var first error
	for j, g := range groups {
		if perr[j] == nil {
			continue
		}
		failed++
		if first == nil {
			first = perr[j]
		}
		for _, i := range g.idx {
			errs[i] = perr[j]
		}
	}
	if failed > 0 && failed == len(groups) {
		return first
	}
	return nil
}
