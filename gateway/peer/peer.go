// Package peer is the node-to-node shard transport of a cluster. The server
// side is the native block protocol (gateway/native) serving the node's
// LOCAL store (its own tier stack, not the clustered one) on a separate
// listener; the client side implements cluster.Peers with one pooled
// gateway/client connection set per member data address.
package peer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster"
	"github.com/ctxtier/ctxtier/gateway/client"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/metrics"
	"github.com/ctxtier/ctxtier/gateway/native"
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
	o.NoRedial = true // a new connection is a new Client, identity checked
	return Options{Client: o}
}

// Validate checks the options.
func (o Options) Validate() error { return o.Client.Validate() }

// Peers is the client side: it implements cluster.Peers.
type Peers struct {
	opts Options
	mu   sync.Mutex
	pool map[string]*client.Client // by member id and data address
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

func (p *Peers) client(ctx context.Context, m cluster.Member) (*client.Client, error) {
	if m.DataAddr == "" {
		return nil, fmt.Errorf("%w: member %q has no data address", block.ErrUnavailable, m.ID)
	}
	pk := m.ID + "@" + m.DataAddr
	p.mu.Lock()
	c := p.pool[pk]
	p.mu.Unlock()
	if c != nil {
		return c, nil
	}
	// Dial outside the lock: a dead member must not stall calls to others.
	c, err := client.Dial(ctx, m.DataAddr, p.opts.Client)
	if err != nil {
		return nil, fmt.Errorf("%w: peer %s at %s: %v", block.ErrUnavailable, m.ID, m.DataAddr, err)
	}
	if err := checkIdentity(ctx, c, m); err != nil {
		c.Close()
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if old := p.pool[pk]; old != nil {
		c.Close()
		return old, nil
	}
	p.pool[pk] = c
	return c, nil
}

// done returns err, first dropping m's pooled client when the failure may
// be its connection's: the next call dials again and checks the identity.
func (p *Peers) done(m cluster.Member, c *client.Client, err error) error {
	if err != nil && (errors.Is(err, block.ErrUnavailable) || errors.Is(err, block.ErrClosed)) {
		pk := m.ID + "@" + m.DataAddr
		p.mu.Lock()
		if p.pool[pk] == c {
			delete(p.pool, pk)
			c.Close()
		}
		p.mu.Unlock()
	}
	return err
}

// checkIdentity makes sure that the node answering at m's data address is
// m: a restarted member registers a new address a moment after it starts,
// and its old port may meanwhile belong to another member, which would
// take m's shards and answer NotFound for them. A node that has no
// identity block (an older version, or evicted) is taken at its word.
func checkIdentity(ctx context.Context, c *client.Client, m cluster.Member) error {
	d, err := c.Get(ctx, cluster.IdentityKey)
	switch {
	case err == nil && string(d) == m.ID:
		return nil
	case err == nil:
		return fmt.Errorf("%w: peer %s: %s answers as member %q (a stale address)", block.ErrUnavailable, m.ID, m.DataAddr, d)
	case errors.Is(err, block.ErrNotFound):
		return nil
	}
	return fmt.Errorf("%w: peer %s at %s: identity: %v", block.ErrUnavailable, m.ID, m.DataAddr, err)
}

// PutShard stores a shard on m.
func (p *Peers) PutShard(ctx context.Context, m cluster.Member, key block.Key, data []byte, sum uint32, opts block.PutOptions) error {
	c, err := p.client(ctx, m)
	if err != nil {
		return err
	}
	opts.Sum, opts.HasSum = sum, true
	return p.done(m, c, c.PutWithOptions(ctx, key, data, opts))
}

// PutShards stores shards on m with one client.PutBatch: one pipelined
// batch put frame per namespace run (as many as the server's limits ask),
// on one pooled connection, instead of a frame and a round trip per shard.
// errs[i] is shard i's own outcome; a frame that got no answer (a broken
// connection) fails its shards and drops the pooled client, as PutShard's
// failure would.
func (p *Peers) PutShards(ctx context.Context, m cluster.Member, shards []cluster.ShardPut) []error {
	errs := make([]error, len(shards))
	c, err := p.client(ctx, m)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	items := make([]client.PutItem, len(shards))
	for i, s := range shards {
		o := s.Opts
		o.Sum, o.HasSum = s.Sum, true
		items[i] = client.PutItem{Key: s.Key, Data: s.Data, Opts: o}
	}
	errs, err = c.PutBatch(ctx, items)
	_ = p.done(m, c, err) // drops a broken client; errs already carries err per shard
	return errs
}

// GetShard reads a shard from m and returns it with its CRC-32C; the client
// verified the bytes against that checksum, the one m stored with them, as
// they arrived.
func (p *Peers) GetShard(ctx context.Context, m cluster.Member, key block.Key) ([]byte, uint32, error) {
	c, err := p.client(ctx, m)
	if err != nil {
		return nil, 0, err
	}
	d, sum, err := c.GetSum(ctx, key)
	return d, sum, p.done(m, c, err)
}

// DeleteShard removes a shard from m.
func (p *Peers) DeleteShard(ctx context.Context, m cluster.Member, key block.Key) error {
	c, err := p.client(ctx, m)
	if err != nil {
		return err
	}
	return p.done(m, c, c.Delete(ctx, key))
}

// DeleteShardIf removes a shard from m only while m holds the bytes whose
// CRC-32C is sum (DELETE_IF). A member running a version older than
// DELETE_IF answers MalformedFrame: the shard is then deleted by key, as
// such a member's own cleanups do.
func (p *Peers) DeleteShardIf(ctx context.Context, m cluster.Member, key block.Key, sum uint32) error {
	c, err := p.client(ctx, m)
	if err != nil {
		return err
	}
	err = c.DeleteIf(ctx, key, sum)
	if errors.Is(err, errcode.ErrMalformedFrame) {
		err = c.Delete(ctx, key)
	}
	return p.done(m, c, err)
}

// PinShard pins a shard on m until the given time.
func (p *Peers) PinShard(ctx context.Context, m cluster.Member, key block.Key, until time.Time) error {
	ttl := time.Until(until)
	if ttl <= 0 {
		return nil
	}
	c, err := p.client(ctx, m)
	if err != nil {
		return err
	}
	return p.done(m, c, c.Pin(ctx, key, ttl))
}

// Healthy pings m.
func (p *Peers) Healthy(ctx context.Context, m cluster.Member) error {
	c, err := p.client(ctx, m)
	if err != nil {
		return err
	}
	return p.done(m, c, c.Ping(ctx))
}
