// Package peer is the node-to-node shard transport of a cluster. The server
// side is the native block protocol (gateway/native) serving the node's
// LOCAL store (its own tier stack, not the clustered one) on a separate
// listener; the client side implements cluster.Peers with one pooled
// gateway/client connection set per member data address.
package peer

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster"
	"github.com/ctxtier/ctxtier/gateway/client"
	"github.com/ctxtier/ctxtier/gateway/metrics"
	"github.com/ctxtier/ctxtier/gateway/native"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// NewServer returns the peer listener's server: the native protocol over
// local, a Store built on this node's own tier stack (tiers.Manager) and the
// cluster's namespace catalog. cfg.Addr is the peer listen address. ctxd
// passes native.WithAuth with the node identity alone (the cluster
// secret), so only members may use the listener.
func NewServer(cfg native.Config, local *ctxstore.Store, met *metrics.Metrics, log *slog.Logger, opts ...native.Option) (*native.Server, error) {
	return native.New(cfg, local, met, log, opts...)
}

// Options configure the client side.
type Options struct {
	// Client configures each member's connection pool.
	Client client.Options
}

// DefaultOptions: 2 connections per member, 2 s to dial, and shard reads
// verified at rest by the serving node's tier (client.Options.TierVerify):
// a shard is node-to-node traffic feeding repair, reconstruction and
// replication, which keep the tier's own check.
func DefaultOptions() Options {
	o := client.DefaultOptions()
	o.DialTimeout = 2 * time.Second
	o.TierVerify = true
	return Options{Client: o}
}

// Validate checks the options.
func (o Options) Validate() error { return o.Client.Validate() }

// Peers is the client side: it implements cluster.Peers.
type Peers struct {
	opts Options
	mu   sync.Mutex
	pool map[string]*client.Client // by data address
}

var _ cluster.Peers = (*Peers)(nil)

// New returns a client side with no connection yet (each member's pool is
// dialed on first use and kept).
func New(opts Options) (*Peers, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Peers{opts: opts, pool: map[string]*client.Client{}}, nil
}

// Close closes every pooled connection.
func (p *Peers) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for a, c := range p.pool {
		c.Close()
		delete(p.pool, a)
	}
	return nil
}

func (p *Peers) client(ctx context.Context, m fsm.Member) (*client.Client, error) {
	if m.DataAddr == "" {
		return nil, fmt.Errorf("%w: member %q has no data address", block.ErrUnavailable, m.ID)
	}
	p.mu.Lock()
	c := p.pool[m.DataAddr]
	p.mu.Unlock()
	if c != nil {
		return c, nil
	}
	// Dial outside the lock: a dead member must not stall calls to others.
	c, err := client.Dial(ctx, m.DataAddr, p.opts.Client)
	if err != nil {
		return nil, fmt.Errorf("%w: peer %s at %s: %v", block.ErrUnavailable, m.ID, m.DataAddr, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if old := p.pool[m.DataAddr]; old != nil {
		c.Close()
		return old, nil
	}
	p.pool[m.DataAddr] = c
	return c, nil
}

// PutShard stores a shard on m.
func (p *Peers) PutShard(ctx context.Context, m fsm.Member, key block.Key, data []byte, sum uint32, opts block.PutOptions) error {
	c, err := p.client(ctx, m)
	if err != nil {
		return err
	}
	opts.Sum, opts.HasSum = sum, true
	return c.PutWithOptions(ctx, key, data, opts)
}

// GetShard reads a shard from m; the client verifies the bytes against the
// checksum m stored with them.
func (p *Peers) GetShard(ctx context.Context, m fsm.Member, key block.Key) ([]byte, error) {
	c, err := p.client(ctx, m)
	if err != nil {
		return nil, err
	}
	return c.Get(ctx, key)
}

// DeleteShard removes a shard from m.
func (p *Peers) DeleteShard(ctx context.Context, m fsm.Member, key block.Key) error {
	c, err := p.client(ctx, m)
	if err != nil {
		return err
	}
	return c.Delete(ctx, key)
}

// PinShard pins a shard on m until the given time.
func (p *Peers) PinShard(ctx context.Context, m fsm.Member, key block.Key, until time.Time) error {
	ttl := time.Until(until)
	if ttl <= 0 {
		return nil
	}
	c, err := p.client(ctx, m)
	if err != nil {
		return err
	}
	return c.Pin(ctx, key, ttl)
}

// Healthy pings m.
func (p *Peers) Healthy(ctx context.Context, m fsm.Member) error {
	c, err := p.client(ctx, m)
	if err != nil {
		return err
	}
	return c.Ping(ctx)
}
