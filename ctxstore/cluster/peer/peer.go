// Package peer is the node-to-node shard transport of a cluster: Peers
// implements cluster.Peers by speaking the native block protocol (the codec
// in gateway/native/wire) to each member's peer listener, over its own
// small pipelined connections, with the node identity (the cluster secret)
// and, under --tls, node-to-node TLS. The serving side is the native
// protocol server (gateway/native) over the member's LOCAL store, on a
// separate listener that cmd/ctxd starts.
package peer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
)

// Options configure the client side.
type Options struct {
	// Conns is the number of pipelined connections per member.
	Conns int
	// DialTimeout bounds dialing a member and the handshake.
	DialTimeout time.Duration
	// WriteTimeout bounds writing one request frame (0: none).
	WriteTimeout time.Duration
	// AccessKeyID and Secret are the node identity the peer listeners
	// require (clustersecret.NodeAccessKeyID and the cluster secret);
	// empty: anonymous (tests).
	AccessKeyID, Secret string
	// TLS, when set, wraps every connection in TLS (ctxd passes
	// raft.TLS.ClientConfig); an empty ServerName becomes the host of the
	// member's data address. nil: plain TCP.
	TLS *tls.Config
}

// DefaultOptions: 2 connections per member, 2 s to dial, 30 s to write a
// frame.
func DefaultOptions() Options {
	return Options{Conns: 2, DialTimeout: 2 * time.Second, WriteTimeout: 30 * time.Second}
}

// Validate checks the options; errors wrap block.ErrInvalidArgument.
func (o Options) Validate() error {
	switch {
	case o.Conns < 1 || o.Conns > 64:
		return fmt.Errorf("%w: peer: Conns %d out of range 1..64", block.ErrInvalidArgument, o.Conns)
	case o.DialTimeout <= 0 || o.WriteTimeout < 0:
		return fmt.Errorf("%w: peer: DialTimeout must be positive and WriteTimeout not negative", block.ErrInvalidArgument)
	case (o.AccessKeyID == "") != (o.Secret == ""):
		return fmt.Errorf("%w: peer: AccessKeyID and Secret go together", block.ErrInvalidArgument)
	}
	if err := wire.ValidAccessKeyID(o.AccessKeyID); err != nil {
		return fmt.Errorf("peer: %w", err)
	}
	return nil
}

// Peers is the client side: it implements cluster.Peers.
type Peers struct {
	opts Options
	mu   sync.Mutex
	pool map[string]*link // by member id and data address
}

var _ cluster.Peers = (*Peers)(nil)

// link is the connections to one member, dialed together and never
// redialed: a broken one fails its calls with block.ErrUnavailable and the
// caller drops the whole link, so that every new connection passes the
// identity check (a restarted member's old port may belong to another
// node by then).
type link struct {
	addr  string
	conns []*conn
	next  atomic.Uint32
}

// conn picks the next connection round robin.
func (l *link) conn() (*conn, error) {
	c := l.conns[l.next.Add(1)%uint32(len(l.conns))]
	if err := c.broken(); err != nil {
		return nil, fmt.Errorf("%w: connection to %s lost (not redialed): %v", block.ErrUnavailable, l.addr, err)
	}
	return c, nil
}

func (l *link) close() {
	for _, c := range l.conns {
		c.close(block.ErrClosed)
	}
}

// New returns a client side with no connection yet (each member's link is
// dialed on first use and kept).
func New(opts Options) (*Peers, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Peers{opts: opts, pool: map[string]*link{}}, nil
}

// Close closes every pooled connection.
func (p *Peers) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, l := range p.pool {
		l.close()
		delete(p.pool, k)
	}
	return nil
}

func (p *Peers) link(ctx context.Context, m cluster.Member) (*link, error) {
	if m.DataAddr == "" {
		return nil, fmt.Errorf("%w: member %q has no data address", block.ErrUnavailable, m.ID)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	pk := m.ID + "@" + m.DataAddr
	p.mu.Lock()
	l := p.pool[pk]
	p.mu.Unlock()
	if l != nil {
		return l, nil
	}
	// Dial outside the lock: a dead member must not stall calls to others.
	l = &link{addr: m.DataAddr}
	for range p.opts.Conns {
		c, err := dial(ctx, m.DataAddr, p.opts)
		if err != nil {
			l.close()
			return nil, fmt.Errorf("%w: peer %s at %s: %v", block.ErrUnavailable, m.ID, m.DataAddr, err)
		}
		l.conns = append(l.conns, c)
	}
	if err := checkIdentity(ctx, l, m); err != nil {
		l.close()
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if old := p.pool[pk]; old != nil {
		l.close()
		return old, nil
	}
	p.pool[pk] = l
	return l, nil
}

// done returns err, first dropping m's link when the failure may be its
// connection's: the next call dials again and checks the identity.
func (p *Peers) done(m cluster.Member, l *link, err error) error {
	if err != nil && (errors.Is(err, block.ErrUnavailable) || errors.Is(err, block.ErrClosed)) {
		pk := m.ID + "@" + m.DataAddr
		p.mu.Lock()
		if p.pool[pk] == l {
			delete(p.pool, pk)
			l.close()
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
func checkIdentity(ctx context.Context, l *link, m cluster.Member) error {
	d, _, err := getVerified(ctx, l, cluster.IdentityKey, 0)
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

// call runs op on m's link: the link's failures are returned as they are,
// op's through done.
func (p *Peers) call(ctx context.Context, m cluster.Member, op func(*link) error) error {
	l, err := p.link(ctx, m)
	if err != nil {
		return err
	}
	return p.done(m, l, op(l))
}

// PutShard stores a shard on m.
func (p *Peers) PutShard(ctx context.Context, m cluster.Member, key block.Key, data []byte, sum uint32, opts block.PutOptions) error {
	return p.call(ctx, m, func(l *link) error {
		errs := make([]error, 1)
		_ = putShards(ctx, l, []cluster.ShardPut{{Key: key, Data: data, Sum: sum, Opts: opts}}, errs)
		return errs[0] // the frame's error when it got no answer
	})
}

// PutShards stores shards on m in pipelined batch put frames (one per
// namespace run, as many as the member's limits ask) instead of a frame
// and a round trip per shard. errs[i] is shard i's own outcome; a frame
// that got no answer (a broken connection) fails its shards and drops the
// link, as PutShard's failure would.
func (p *Peers) PutShards(ctx context.Context, m cluster.Member, shards []cluster.ShardPut) []error {
	errs := make([]error, len(shards))
	l, err := p.link(ctx, m)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	_ = p.done(m, l, putShards(ctx, l, shards, errs)) // drops a broken link; errs carries the error per shard
	return errs
}

// GetShard reads a shard from m and returns it with its CRC-32C: the
// bytes were checked against that checksum, the one m stored with them, as
// they arrived. retain > 0 is the read's retain window, sent as a read
// hint to a member that reads them.
func (p *Peers) GetShard(ctx context.Context, m cluster.Member, key block.Key, retain time.Duration) (data []byte, sum uint32, err error) {
	err = p.call(ctx, m, func(l *link) error {
		data, sum, err = getVerified(ctx, l, key, retain)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	return data, sum, nil
}

// DeleteShard removes a shard from m.
func (p *Peers) DeleteShard(ctx context.Context, m cluster.Member, key block.Key) error {
	return p.call(ctx, m, func(l *link) error { return keyOp(ctx, l, wire.OpDelete, key, 0) })
}

// DeleteShardIf removes a shard from m only while m holds the bytes whose
// CRC-32C is sum (DELETE_IF). A member running a version older than
// DELETE_IF answers MalformedFrame: the shard is then deleted by key, as
// such a member's own cleanups do.
func (p *Peers) DeleteShardIf(ctx context.Context, m cluster.Member, key block.Key, sum uint32) error {
	return p.call(ctx, m, func(l *link) error {
		err := deleteIf(ctx, l, key, sum)
		if errors.Is(err, errcode.ErrMalformedFrame) {
			err = keyOp(ctx, l, wire.OpDelete, key, 0)
		}
		return err
	})
}

// PinShard pins a shard on m until the given time.
func (p *Peers) PinShard(ctx context.Context, m cluster.Member, key block.Key, until time.Time) error {
	ttl := time.Until(until)
	if ttl <= 0 {
		return nil
	}
	return p.call(ctx, m, func(l *link) error { return keyOp(ctx, l, wire.OpPin, key, ttl) })
}

// Healthy pings m.
func (p *Peers) Healthy(ctx context.Context, m cluster.Member) error {
	return p.call(ctx, m, func(l *link) error {
		c, err := l.conn()
		if err != nil {
			return err
		}
		_, err = c.do(ctx, wire.OpPing, 0, 0, net.Buffers{make([]byte, wire.HeaderSize)})
		return err
	})
}
