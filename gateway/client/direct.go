package client

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/descriptor"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
)

// NotColocatedError is ReadLease's (and, without Options.DirectFallback,
// ReadDirect's) answer when this process cannot open the file a descriptor
// names: the server runs on another machine, in another container, or as
// another user. Read the block with Get instead.
type NotColocatedError struct {
	Path string
	Err  error
}

func (e *NotColocatedError) Error() string {
	return fmt.Sprintf("client: the server is not co-located: cannot open %s: %v", e.Path, e.Err)
}

func (e *NotColocatedError) Unwrap() error { return e.Err }

// Lease is a leased direct-read descriptor (see Describe). It is valid until
// Expires or until it is released, whichever comes first.
type Lease struct {
	Key  block.Key
	ID   uint64
	Desc block.Descriptor
	// Expires is the lease's end by this machine's clock, counted from before
	// the request was sent (so never later than the server's).
	Expires time.Time

	nc       *nconn // RELEASE must go on the connection that described it
	released atomic.Bool
}

// DirectStats counts what ReadDirect did.
type DirectStats struct {
	Direct      uint64 // reads served through a descriptor
	Fallbacks   uint64 // reads served by GET (not co-located, no descriptor, or a failed check)
	Mismatches  uint64 // descriptor reads whose checksum or version did not match (then re-read by GET)
	Releases    uint64 // leases released by RELEASE frames
	ReleaseErrs uint64 // leases a RELEASE could not end (expired first, or the connection broke)
}

// directState is the client's direct-read state: the memory-file mappings
// (one per path, shared by all reads), the release batches per connection,
// and counters.
type directState struct {
	mu     sync.RWMutex // read-held while copying out of a mapping
	maps   map[string]memMap
	closed bool

	relMu sync.Mutex
	rels  map[*nconn]*releaseBatch

	notColocated                                         atomic.Bool // latched by DirectFallback
	noVersions                                           atomic.Bool // the server refused DESCRIBE's flags word
	direct, fallbacks, mismatches, releases, releaseErrs atomic.Uint64
}

// memMap is a read-only mapping of a memory file and the file it maps.
type memMap struct {
	b        []byte
	dev, ino uint64
}

type releaseBatch struct {
	ids  []uint64
	busy bool
}

// DirectStats returns ReadDirect's counters.
func (c *Client) DirectStats() DirectStats {
	d := &c.direct
	return DirectStats{Direct: d.direct.Load(), Fallbacks: d.fallbacks.Load(), Mismatches: d.mismatches.Load(),
		Releases: d.releases.Load(), ReleaseErrs: d.releaseErrs.Load()}
}

// Describe leases a direct-read descriptor for each key (DESCRIBE, pipelined
// in frames as GET). leases[i] is nil where errs[i] is not: block.ErrNotFound
// for a missing block, block.ErrUnavailable when the server hands out no
// descriptor for it (read it with Get). Every lease must be released
// (Release or ReleaseAsync); unreleased ones end at their TTL or when the
// connection closes. So do those of a frame abandoned because ctx ended: the
// server may have granted them, and this client never learns their ids.
//
// With Options.DirectVerify VerifyVersion it asks for DRAM version words
// (wire.DescribeFlagVersion); a server that predates them refuses such a
// frame as malformed, and the client then describes without them, from
// then on.
func (c *Client) Describe(ctx context.Context, keys []block.Key) (leases []*Lease, errs []error, err error) {
	return c.waitDescribe(ctx, c.startDescribe(ctx, keys))
}

// pendingDescribe is a DESCRIBE whose frames are sent and whose answers are
// not read yet (startDescribe, then waitDescribe), so a caller can copy one
// batch while the next one's round trip is under way.
type pendingDescribe struct {
	keys  []block.Key
	flags uint32
	fl    []flight
	sent  []time.Time // when frame j was sent
	owner []int       // frame of key i
}

// startDescribe sends the DESCRIBE frames for keys; waitDescribe must read
// their answers (the leases they grant are only released through it).
func (c *Client) startDescribe(ctx context.Context, keys []block.Key) *pendingDescribe {
	var flags uint32
	if c.opts.DirectVerify == VerifyVersion && descriptor.VersionReads && !c.direct.noVersions.Load() {
		flags = wire.DescribeFlagVersion
	}
	if c.opts.DirectPromote && !c.direct.noVersions.Load() {
		flags |= wire.DescribeFlagPromote
	}
	chs := c.chunks(len(keys), func(i int) string { return keys[i].Namespace }, nil)
	p := &pendingDescribe{keys: keys, flags: flags, fl: make([]flight, len(chs)), sent: make([]time.Time, len(chs)), owner: make([]int, len(keys))}
	for j, ch := range chs {
		f := &p.fl[j]
		f.ch = ch
		for i := ch.lo; i < ch.hi; i++ {
			p.owner[i] = j
		}
		if f.nc, f.err = c.conn(ctx); f.err != nil {
			continue
		}
		f.cl = &call{op: wire.OpDescribe, flags: frameFlags(ctx, wire.OpDescribe), count: uint32(ch.hi - ch.lo)}
		p.sent[j] = time.Now()
		f.err = f.nc.start(f.cl, wire.AppendDescribeFlags(keyFrame(wire.OpDescribe, keys[ch.lo:ch.hi], 0, 0), flags), nil, 0)
	}
	return p
}

// waitDescribe reads the answers to p's frames: Describe's results.
func (c *Client) waitDescribe(ctx context.Context, p *pendingDescribe) (leases []*Lease, errs []error, err error) {
	keys, fl := p.keys, p.fl
	leases = make([]*Lease, len(keys))
	errs = make([]error, len(keys))
	err = c.collect(ctx, fl, identity, errs, func(i int, it *wire.ItemResult) error {
		j := p.owner[i]
		leases[i] = &Lease{Key: keys[i], ID: it.Lease.ID, Desc: it.Lease.Desc, Expires: p.sent[j].Add(it.Lease.TTL), nc: fl[j].nc}
		return nil
	})
	if p.flags == 0 || err == nil {
		return leases, errs, err
	}
	// A frame answered MalformedFrame on a connection still open is an
	// older server refusing the flags word: describe its keys again without.
	var redo []int
	err = nil
	for j := range fl {
		f := &fl[j]
		switch {
		case f.err == nil:
		case errors.Is(f.err, errcode.ErrMalformedFrame) && f.nc != nil && f.nc.healthy():
			for i := f.ch.lo; i < f.ch.hi; i++ {
				redo = append(redo, i)
			}
		case err == nil:
			err = f.err
		}
	}
	if len(redo) == 0 {
		return leases, errs, err
	}
	c.direct.noVersions.Store(true)
	rk := make([]block.Key, len(redo))
	for k, i := range redo {
		rk[k] = keys[i]
	}
	rl, re, rerr := c.Describe(ctx, rk)
	for k, i := range redo {
		leases[i], errs[i] = rl[k], re[k]
	}
	if err == nil {
		err = rerr
	}
	return leases, errs, err
}

// ReadLease copies l's block into buf itself (a read-only mmap of the memory
// file for DRAM, an O_DIRECT pread of the extent for NVMe, via
// descriptor.ReadExtent) and verifies it: by CRC-32C, or for a DRAM block with
// a version word under Options.DirectVerify VerifyVersion, by that word
// (descriptor.CopyVersioned). It returns *NotColocatedError when the file cannot
// be opened, block.ErrTooLarge when buf is short, block.ErrUnavailable when
// the lease has ended (before the read, or for VerifyVersion by the end of
// it), and block.ErrChecksum when the bytes read do not match (a lease that
// ended while reading, or for VerifyChecksum corruption at rest). It does
// not release l.
func (c *Client) ReadLease(l *Lease, buf []byte) (int, error) {
	d := l.Desc
	if int64(len(buf)) < d.Length {
		return 0, fmt.Errorf("%w: %s: block is %d bytes, buffer %d", block.ErrTooLarge, l.Key, d.Length, len(buf))
	}
	if l.released.Load() || !time.Now().Before(l.Expires) {
		return 0, fmt.Errorf("%w: %s: lease %d has ended", block.ErrUnavailable, l.Key, l.ID)
	}
	switch d.Tier {
	case block.TierDRAM:
		if c.opts.DirectVerify == VerifyVersion && d.VersionOffset != 0 && descriptor.VersionReads {
			return c.readMemVersioned(l, buf)
		}
		return c.readMem(l, buf)
	case block.TierNVMe:
		data, err := descriptor.ReadExtent(l.Key, d)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
				return 0, &NotColocatedError{Path: d.Path, Err: err}
			}
			return 0, err
		}
		return copy(buf, data), nil
	}
	return 0, fmt.Errorf("%w: descriptor of tier %q", errcode.ErrMalformedFrame, d.Tier)
}

// rlockMem returns the mapping of path, at least need bytes long, with
// c.direct.mu read-held; the caller unlocks it when it is done reading.
func (c *Client) rlockMem(key block.Key, path string, need int64) ([]byte, error) {
	st := &c.direct
	st.mu.RLock()
	mm, ok := st.maps[path]
	if !ok || int64(len(mm.b)) < need {
		st.mu.RUnlock()
		if err := c.mapMem(path, need); err != nil {
			return nil, err
		}
		st.mu.RLock()
		mm = st.maps[path]
	}
	if st.closed || int64(len(mm.b)) < need {
		st.mu.RUnlock()
		return nil, fmt.Errorf("%w: %s: %s holds %d bytes, the descriptor needs %d", block.ErrChecksum, key, path, len(mm.b), need)
	}
	return mm.b, nil
}

func (c *Client) readMem(l *Lease, buf []byte) (int, error) {
	d := l.Desc
	st := &c.direct
	m, err := c.rlockMem(l.Key, d.Path, d.Offset+d.Length)
	if err != nil {
		return 0, err
	}
	// One pass: CopyChecksum folds each byte into the CRC as it stores it
	// (or copies and checksums cache-sized chunks where there is no fused
	// kernel), and the CRC is of the bytes that landed in buf.
	sum := block.CopyChecksum(buf[:d.Length], m[d.Offset:d.Offset+d.Length], 0)
	st.mu.RUnlock()
	if sum != d.Sum {
		c.dropIfReplaced(d.Path)
		return 0, fmt.Errorf("%w: %s: bytes read through the descriptor are %08x, lease says %08x", block.ErrChecksum, l.Key, sum, d.Sum)
	}
	return int(d.Length), nil
}

// readMemVersioned is readMem for VerifyVersion: a plain copy, then the
// block's version word must still hold the descriptor's Generation (see
// descriptor.CopyVersioned for why that proves the copy right) and the lease must
// not have ended by the time the copy did.
func (c *Client) readMemVersioned(l *Lease, buf []byte) (int, error) {
	d := l.Desc
	m, err := c.rlockMem(l.Key, d.Path, max(d.Offset+d.Length, d.VersionOffset+8))
	if err != nil {
		return 0, err
	}
	ok := descriptor.CopyVersioned(buf, m, d.Offset, d.Length, d.VersionOffset, d.Generation)
	c.direct.mu.RUnlock()
	if !ok {
		c.dropIfReplaced(d.Path)
		return 0, fmt.Errorf("%w: %s: the version word at %d no longer holds %d: the block's pages were freed while or before it was read",
			block.ErrChecksum, l.Key, d.VersionOffset, d.Generation)
	}
	if l.released.Load() || !time.Now().Before(l.Expires) {
		return 0, fmt.Errorf("%w: %s: lease %d ended during the read", block.ErrUnavailable, l.Key, l.ID)
	}
	return int(d.Length), nil
}

// mapMem maps path read-only (replacing a mapping shorter than need).
func (c *Client) mapMem(path string, need int64) error {
	st := &c.direct
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return fmt.Errorf("client: %w", block.ErrClosed)
	}
	if mm, ok := st.maps[path]; ok && int64(len(mm.b)) >= need {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return &NotColocatedError{Path: path, Err: err}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return &NotColocatedError{Path: path, Err: err}
	}
	if fi.Size() < need {
		return fmt.Errorf("%w: %s is %d bytes, the descriptor needs %d", block.ErrChecksum, path, fi.Size(), need)
	}
	var sys unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &sys); err != nil {
		return &NotColocatedError{Path: path, Err: err}
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return &NotColocatedError{Path: path, Err: err}
	}
	if old, ok := st.maps[path]; ok {
		unix.Munmap(old.b)
	}
	if st.maps == nil {
		st.maps = map[string]memMap{}
	}
	st.maps[path] = memMap{b: m, dev: uint64(sys.Dev), ino: sys.Ino} //nolint:unconvert // Stat_t.Dev is not uint64 on every platform
	return nil
}

// dropIfReplaced unmaps path's mapping when path no longer names the file
// it maps (the server restarted and made a new memory file there), so the
// next read maps the new one. A read that failed its check on the right
// file keeps the mapping: remapping would only cost page faults.
func (c *Client) dropIfReplaced(path string) {
	var sys unix.Stat_t
	err := unix.Stat(path, &sys)
	st := &c.direct
	st.mu.Lock()
	if mm, ok := st.maps[path]; ok && (err != nil || uint64(sys.Dev) != mm.dev || sys.Ino != mm.ino) { //nolint:unconvert // Stat_t.Dev is not uint64 on every platform
		unix.Munmap(mm.b)
		delete(st.maps, path)
	}
	st.mu.Unlock()
}

// closeDirect unmaps every memory file (reads in progress finish first).
func (c *Client) closeDirect() {
	st := &c.direct
	st.mu.Lock()
	st.closed = true
	for p, mm := range st.maps {
		unix.Munmap(mm.b)
		delete(st.maps, p)
	}
	st.mu.Unlock()
}

// ReadDirect reads key's block into buf through a descriptor: DESCRIBE, then
// ReadLease, then an asynchronous, batched RELEASE (the call does not wait
// for it). It falls back to GET when the server hands out no descriptor for
// the block (block.ErrUnavailable, e.g. a segment being reclaimed), when the
// lease ended before the copy, and when the copied bytes fail their checksum
// (the server then verifies the block at rest and drops it if it is corrupt).
// When the descriptor's file cannot be opened it returns *NotColocatedError,
// unless Options.DirectFallback is set: then it reads with GET, and so does
// every later ReadDirect of this client.
func (c *Client) ReadDirect(ctx context.Context, key block.Key, buf []byte) (int, error) {
	if buf == nil {
		buf = []byte{}
	}
	sizes, errs, err := c.ReadDirectBatch(ctx, []block.Key{key}, [][]byte{buf})
	if err != nil {
		return 0, err
	}
	return sizes[0], errs[0]
}

// ReadDirectBatch is ReadDirect for several blocks: one DESCRIBE round trip
// (per frame) for all of them, then each is copied into bufs[i]; fallbacks
// go in one GET batch. err is as for GetBatch.
func (c *Client) ReadDirectBatch(ctx context.Context, keys []block.Key, bufs [][]byte) (sizes []int, errs []error, err error) {
	if len(bufs) != len(keys) {
		return nil, nil, fmt.Errorf("%w: %d buffers for %d keys", block.ErrInvalidArgument, len(bufs), len(keys))
	}
	st := &c.direct
	if st.notColocated.Load() {
		st.fallbacks.Add(uint64(len(keys)))
		return c.GetBatchInto(ctx, keys, bufs)
	}
	leases, errs, err := c.Describe(ctx, keys)
	sizes = make([]int, len(keys))
	retry := c.readLeases(leases, errs, bufs, sizes, 0, nil)
	c.ReleaseAsync(leases...)
	if gerr := c.getFallbacks(ctx, keys, bufs, retry, sizes, errs); err == nil {
		err = gerr
	}
	return sizes, errs, err
}

// readLeases copies each described block leases[i] into bufs[i] with
// ReadLease, setting sizes[i] or errs[i], and appends to retry (offset by
// base) the items to read with GET instead: no descriptor
// (block.ErrUnavailable), a lease that ended first, a failed check, or a
// file this process cannot open under Options.DirectFallback. It does not
// release the leases.
func (c *Client) readLeases(leases []*Lease, errs []error, bufs [][]byte, sizes []int, base int, retry []int) []int {
	st := &c.direct
	for i, l := range leases {
		if l == nil {
			if errors.Is(errs[i], block.ErrUnavailable) {
				retry = append(retry, base+i)
			}
			continue
		}
		n, rerr := c.ReadLease(l, bufs[i])
		var nc *NotColocatedError
		switch {
		case rerr == nil:
			sizes[i] = n
			st.direct.Add(1)
			continue
		case errors.As(rerr, &nc):
			if !c.opts.DirectFallback {
				errs[i] = rerr
				continue
			}
			st.notColocated.Store(true)
		case errors.Is(rerr, block.ErrChecksum):
			st.mismatches.Add(1)
		case errors.Is(rerr, block.ErrUnavailable): // the lease ended first
		default:
			errs[i] = rerr
			continue
		}
		retry = append(retry, base+i)
	}
	return retry
}

// getFallbacks reads the items retry names with one GET batch, setting
// their sizes and errs; it returns GetBatchInto's frame error.
func (c *Client) getFallbacks(ctx context.Context, keys []block.Key, bufs [][]byte, retry []int, sizes []int, errs []error) error {
	if len(retry) == 0 {
		return nil
	}
	c.direct.fallbacks.Add(uint64(len(retry)))
	rk := make([]block.Key, len(retry))
	rb := make([][]byte, len(retry))
	for j, i := range retry {
		rk[j], rb[j] = keys[i], bufs[i]
	}
	rs, rerrs, err := c.GetBatchInto(ctx, rk, rb)
	for j, i := range retry {
		sizes[i], errs[i] = rs[j], rerrs[j]
	}
	return err
}

// ReleaseAsync ends leases without waiting: their ids are queued per
// connection and sent in RELEASE frames by one goroutine per connection,
// which batches whatever accumulated while the previous frame was in flight.
// Nil and already released leases are skipped.
func (c *Client) ReleaseAsync(leases ...*Lease) {
	st := &c.direct
	for _, l := range leases {
		if l == nil || l.nc == nil || !l.released.CompareAndSwap(false, true) {
			continue
		}
		st.relMu.Lock()
		if st.rels == nil {
			st.rels = map[*nconn]*releaseBatch{}
		}
		rb := st.rels[l.nc]
		if rb == nil {
			rb = &releaseBatch{}
			st.rels[l.nc] = rb
		}
		rb.ids = append(rb.ids, l.ID)
		start := !rb.busy
		rb.busy = true
		st.relMu.Unlock()
		if start {
			go c.flushReleases(l.nc, rb)
		}
	}
}

func (c *Client) flushReleases(nc *nconn, rb *releaseBatch) {
	st := &c.direct
	for {
		st.relMu.Lock()
		ids := rb.ids
		rb.ids = nil
		if len(ids) == 0 {
			rb.busy = false
			if !nc.healthy() {
				delete(st.rels, nc)
			}
			st.relMu.Unlock()
			return
		}
		st.relMu.Unlock()
		errs := c.releaseIDs(context.Background(), nc, ids)
		for _, err := range errs {
			if err != nil {
				st.releaseErrs.Add(1)
			} else {
				st.releases.Add(1)
			}
		}
	}
}

// Release ends leases and waits for the server's answer; errs[i] is
// block.ErrNotFound when lease i had already ended (expired, or its
// connection closed, which ends every lease it held).
func (c *Client) Release(ctx context.Context, leases ...*Lease) []error {
	errs := make([]error, len(leases))
	byConn := map[*nconn][]int{}
	for i, l := range leases {
		if l == nil || l.nc == nil || !l.released.CompareAndSwap(false, true) {
			errs[i] = fmt.Errorf("%w: lease already released", block.ErrNotFound)
			continue
		}
		byConn[l.nc] = append(byConn[l.nc], i)
	}
	for nc, idx := range byConn {
		ids := make([]uint64, len(idx))
		for j, i := range idx {
			ids[j] = leases[i].ID
		}
		for j, err := range c.releaseIDs(ctx, nc, ids) {
			errs[idx[j]] = err
		}
	}
	return errs
}

// releaseIDs sends RELEASE frames (at most MaxBatch ids each, pipelined) on
// nc and returns one error per id.
func (c *Client) releaseIDs(ctx context.Context, nc *nconn, ids []uint64) []error {
	errs := make([]error, len(ids))
	maxBatch := max(int(c.limits.MaxBatch), 1)
	var fl []flight
	for lo := 0; lo < len(ids); lo += maxBatch {
		hi := min(lo+maxBatch, len(ids))
		f := flight{ch: chunk{lo, hi}, nc: nc, cl: &call{op: wire.OpRelease, count: uint32(hi - lo)}}
		head := wire.AppendLeaseIDs(make([]byte, wire.HeaderSize, wire.HeaderSize+(hi-lo)*wire.LeaseIDSize), ids[lo:hi])
		f.err = nc.start(f.cl, head, nil, 0)
		fl = append(fl, f)
	}
	_ = c.collect(ctx, fl, identity, errs, nil)
	return errs
}
