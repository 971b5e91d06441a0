package weights

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/client"
)

// Direct reads. A worker on the same machine as a node need not take that
// node's bytes through two loopback copies and the S3 stack: the node's
// DRAM tier lives in a memory file the worker can map (the native
// protocol's DESCRIBE leases a block there, docs/protocol.md). With
// Config.Direct naming the native address of each co-located endpoint's
// node, every routed piece that is a whole replicated block (k = 1) held
// by such a node is first DESCRIBEd there, with the promote flag: a block
// that is only on NVMe is read into the holder's DRAM first (the tier's
// promotion and single flight, so each byte still leaves the lower tiers
// once however many workers pull; an NVMe descriptor would have each
// worker read the segment file), and the DRAM copy is copied out of the
// memory file (checked by its version word: the chunk's digest against the
// manifest still follows, whatever path the bytes took), then the lease is
// released. A block described anywhere but in DRAM (the promotion did not
// take it), gone, or not whole on that node is read over S3 as before. A
// node that cannot be dialed, or whose memory file this process cannot
// open (not co-located after all), is not asked again; one whose DESCRIBE
// fails as a whole (the connection broke: the node died, say) is out of
// routing for downDuration like an endpoint whose GET failed, so its
// blocks go over S3 (failing over) without a DESCRIBE each meanwhile.

// direct holds the native clients of co-located nodes, one per endpoint,
// dialed on first use.
type direct struct {
	once  []sync.Once
	cl    []*client.Client
	off   []atomic.Bool // dial failed, or not co-located
	mu    sync.Mutex
	probs []error
}

func newDirect(n int) *direct {
	return &direct{once: make([]sync.Once, n), cl: make([]*client.Client, n), off: make([]atomic.Bool, n)}
}

// problem records why direct reads through an endpoint stopped.
func (d *direct) problem(ep int, err error) {
	if d.off[ep].Swap(true) {
		return
	}
	d.mu.Lock()
	d.probs = append(d.probs, err)
	d.mu.Unlock()
}

// DirectProblems lists why direct reads stopped for endpoints they were
// configured for (a node that could not be dialed, one that is not
// co-located); empty when none did.
func (c *Client) DirectProblems() []error {
	c.dr.mu.Lock()
	defer c.dr.mu.Unlock()
	return append([]error(nil), c.dr.probs...)
}

// nativeClient returns the native client of endpoint ep's node, dialing
// it the first time; nil when ep has no direct address or direct reads
// through it stopped.
func (c *Client) nativeClient(ctx context.Context, ep int) *client.Client {
	d := c.dr
	if ep < 0 || ep >= len(c.cfg.Direct) || c.cfg.Direct[ep] == "" || d.off[ep].Load() {
		return nil
	}
	d.once[ep].Do(func() {
		opts := client.DefaultOptions()
		opts.Conns = 1
		opts.DirectVerify = client.VerifyVersion
		opts.DirectPromote = true
		opts.AccessKeyID, opts.Secret = c.cfg.AccessKey, c.cfg.Secret
		cl, err := client.Dial(ctx, c.cfg.Direct[ep], opts)
		if err != nil {
			d.problem(ep, fmt.Errorf("weights: direct reads through %s: %w", c.cfg.Direct[ep], err))
			return
		}
		d.cl[ep] = cl
	})
	if d.off[ep].Load() {
		return nil
	}
	return d.cl[ep]
}

// readDirect copies sp, one whole block, into b out of its holder's DRAM
// by descriptor, and reports whether it did; false (b's contents then
// undefined) means: read it over S3.
func (c *Client) readDirect(ctx context.Context, sp span, b []byte) bool {
	if sp.key == "" {
		return false
	}
	if !c.routerInit().usable(sp.ep) {
		return false
	}
	nc := c.nativeClient(ctx, sp.ep)
	if nc == nil {
		return false
	}
	key, err := block.ParseObjectName(c.cfg.Namespace, sp.key)
	if err != nil {
		return false
	}
	leases, errs, err := nc.Describe(ctx, []block.Key{key})
	if err != nil {
		if ctx.Err() == nil {
			c.rt.markDown(sp.ep)
		}
		return false
	}
	if errs[0] != nil {
		return false // not here whole (ErrUnavailable), or gone: S3 knows
	}
	l := leases[0]
	defer nc.ReleaseAsync(l)
	if l.Desc.Tier != block.TierDRAM || l.Desc.Length != sp.n {
		return false
	}
	n, err := nc.ReadLease(l, b)
	var nce *client.NotColocatedError
	if errors.As(err, &nce) {
		c.dr.problem(sp.ep, fmt.Errorf("weights: direct reads through %s: %w", c.cfg.Direct[sp.ep], err))
	}
	return err == nil && int64(n) == sp.n
}

// Close closes the native connections direct reads opened; call it once
// no pull is running.
func (c *Client) Close() error {
	var errs []error
	for _, cl := range c.dr.cl {
		if cl != nil {
			errs = append(errs, cl.Close())
		}
	}
	return errors.Join(errs...)
}
