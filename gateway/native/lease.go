package native

import (
	"fmt"
	"sync"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
	"github.com/ctxtier/ctxtier/internal/listener"
)

// leaseTable holds one connection's DESCRIBE leases. A lease ends at the
// first of: RELEASE, its TTL (a timer), the connection closing. Ending it
// runs the tier's release function exactly once.
type leaseTable struct {
	mu     sync.Mutex
	next   uint64
	m      map[uint64]*lease
	closed bool
}

type lease struct {
	release func()
	timer   *time.Timer
}

// add registers release under a new id that ends by itself after ttl. It
// fails when the connection already holds max leases or has closed.
func (t *leaseTable) add(release func(), ttl time.Duration, max int) (uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return 0, fmt.Errorf("%w: connection closing", block.ErrClosed)
	}
	if len(t.m) >= max {
		return 0, fmt.Errorf("%w: this connection holds %d leases, the maximum; release some", block.ErrUnavailable, len(t.m))
	}
	if t.m == nil {
		t.m = make(map[uint64]*lease)
	}
	t.next++
	id := t.next
	l := &lease{release: release}
	l.timer = time.AfterFunc(ttl, func() { t.end(id) })
	t.m[id] = l
	return id, nil
}

// end ends lease id; false when it is not held (released, expired, unknown).
func (t *leaseTable) end(id uint64) bool {
	t.mu.Lock()
	l, ok := t.m[id]
	delete(t.m, id)
	t.mu.Unlock()
	if !ok {
		return false
	}
	l.timer.Stop()
	l.release()
	return true
}

// closeAll ends every lease; later adds fail.
func (t *leaseTable) closeAll() {
	t.mu.Lock()
	m := t.m
	t.m, t.closed = nil, true
	t.mu.Unlock()
	for _, l := range m {
		l.timer.Stop()
		l.release()
	}
}

func (t *leaseTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// describe leases each key's descriptor and appends one status (and, when
// OK, a descriptor item) per key. DRAM version words go only to a client
// that asked for them (wire.DescribeFlagVersion); the others get the
// original item. With wire.DescribeFlagPromote a block below DRAM is read
// into DRAM first.
func (c *conn) describe(req *wire.Request, b []byte) []byte {
	versions := req.DescribeFlags&wire.DescribeFlagVersion != 0
	promote := req.DescribeFlags&wire.DescribeFlagPromote != 0
	s := c.s
	op := req.Op.String()
	room := int64(s.limits.MaxResponseSize) - wire.HeaderSize
	used := int64(0)
	for i, k := range req.Keys {
		err := keyErr(req, i)
		var l wire.Lease
		if err == nil {
			l, err = c.lease(k, promote)
		}
		if err == nil && !versions && l.Desc.VersionOffset != 0 {
			l.Desc.VersionOffset, l.Desc.Generation = 0, 0
		}
		if err == nil {
			need := int64(wire.StatusSize + wire.DescribeItemLen(l.Desc))
			if used+need > room-int64(len(req.Keys)-i-1)*(wire.StatusSize+wire.MaxMessageLen) {
				c.leases.end(l.ID)
				err = fmt.Errorf("%w: %s: the response would exceed the maximum response size; describe fewer blocks per request", block.ErrTooLarge, k)
			}
		}
		code := errcode.Of(err)
		s.met.Block(Proto, op, code)
		msg := errMsg(err)
		b = wire.AppendStatus(b, code, msg)
		used += int64(wire.StatusLen(code, msg))
		if code == errcode.OK {
			b = wire.AppendDescribeItem(b, l)
			used += int64(wire.DescribeItemLen(l.Desc))
		}
	}
	return b
}

// lease takes one descriptor lease from the store and registers it. With
// promote, a block described below DRAM is read once (the store's read
// promotes it, and concurrent readers of it share that read) and described
// again, in DRAM unless the promotion did not take it.
func (c *conn) lease(k block.Key, promote bool) (wire.Lease, error) {
	s := c.s
	d, release, err := s.store.Descriptor(s.base, k, ctxstore.ReadOptions{}) // a local read, as a frame without wire.FlagLinearizable is
	if err != nil {
		return wire.Lease{}, err
	}
	if promote && d.Tier != block.TierDRAM {
		release()
		if ref, rerr := s.store.Read(s.base, k, ctxstore.ReadOptions{}); rerr == nil {
			ref.Release()
		}
		if d, release, err = s.store.Descriptor(s.base, k, ctxstore.ReadOptions{}); err != nil {
			return wire.Lease{}, err
		}
	}
	if err := wire.CheckDescriptor(d); err != nil {
		release()
		return wire.Lease{}, fmt.Errorf("%w: %s: the tier described it badly: %v", block.ErrUnavailable, k, err)
	}
	ttl := s.cfg.LeaseTTL
	if !d.Expires.IsZero() {
		ttl = min(ttl, time.Until(d.Expires))
	}
	if ttl < time.Millisecond {
		release()
		return wire.Lease{}, fmt.Errorf("%w: %s: the tier's lease ends at once; read the block instead", block.ErrUnavailable, k)
	}
	id, err := c.leases.add(release, ttl, s.cfg.MaxLeases)
	if err != nil {
		release()
		return wire.Lease{}, err
	}
	return wire.Lease{ID: id, TTL: ttl, Desc: d}, nil
}

// release ends each lease id and appends a status per id: NotFound when the
// connection does not hold it (released already, expired, never granted).
func (c *conn) release(req *wire.Request, b []byte) []byte {
	op := req.Op.String()
	for _, id := range req.LeaseIDs {
		code, msg := errcode.OK, ""
		if !c.leases.end(id) {
			code, msg = errcode.NotFound, fmt.Sprintf("lease %d is not held by this connection (released, expired or never granted)", id)
		}
		c.s.met.Block(Proto, op, code)
		b = wire.AppendStatus(b, code, msg)
	}
	return b
}

// OpenLeases is how many DESCRIBE leases the server's connections hold.
func (s *Server) OpenLeases() int {
	n := 0
	s.conns.Each(func(c listener.Conn) { n += c.(*conn).leases.len() })
	return n
}
