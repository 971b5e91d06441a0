// Package blocktest is the in-memory block store every test of the project
// shares: a block.Storage (so a ctxstore.Tier and a tiers.Lower) over a Go
// map, with what the tests around a store look at and inject: open leases,
// each read's reader-verify mark and retain window, the options each put
// gave, pins, sessions, call counts, and on request a capacity (first in,
// first out), slow or failing puts and corrupted reads. It also answers the
// batch calls a Store or a client offers on top of a tier (Lookup,
// PinBatch, GetBatchInto, PutBatch), so the router's and the replay's tests
// use it as their tier too. Syncing wraps any block.Storage as a
// ctxstore.ReadSyncer that counts the syncs of linearizable reads.
//
// It imports nothing of the project but ctxstore/block (its own layer in
// internal/layers: only test code and the test kits may import it).
package blocktest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Tier is an in-memory block.Storage. Put copies the bytes into a memory
// file (a memfd, mapped, like the DRAM tier's arena); Get hands out the
// mapped bytes themselves under a lease that the tier counts, so tests can
// check that every lease is released, and says where they lie in the file
// (block.Ref.SetFile), so a server's sendfile path is exercised. Blocks are
// never rewritten in place. Safe for concurrent use.
type Tier struct {
	cfg    config
	leases atomic.Int64

	mu    sync.Mutex
	m     map[block.Key]*entry
	order []block.Key // insertion order, kept for a capacity's eviction
	// marks records, per Get, whether the reader said it verifies the
	// bytes (block.GetOptions.ReaderVerifies, TakeReaderMarks).
	marks []bool
	// retains records the read retain window (block.GetOptions.Retain,
	// LookupRetain) of each read and Retain by key, the last one (Retains).
	retains  map[block.Key]time.Duration
	counts   Counts
	inFlight int // put calls in progress
	failPuts error
	failLook error

	file *os.File // the memory file; nil until the first Put
	end  int64    // its size: where the next Put's bytes go
}

type entry struct {
	data   []byte // a mapping of the memory file at off
	off    int64
	pinned time.Time
	info   block.Info
	opts   block.PutOptions // as the first put gave them
}

// Counts are the tier's calls since New.
type Counts struct {
	// Lookups are Lookup calls; Gets and Puts the blocks asked for by Get
	// and GetBatchInto, and given to Put and PutBatch calls that did not
	// fail as a whole.
	Lookups, Gets, Puts int
	// MaxPutsInFlight is the most put calls (Put or PutBatch) in progress
	// at once, ReadsDuringPuts the reads (Get, GetBatchInto, Lookup) that
	// started while one was.
	MaxPutsInFlight, ReadsDuringPuts int
}

type config struct {
	medium   block.Tier
	capacity int
	putDelay time.Duration
	corrupt  bool
}

// Option configures a Tier.
type Option func(*config)

// WithMedium makes the tier say it is medium (block.TierNVMe, say: a lower
// tier) in the refs and infos it hands out; block.TierDRAM by default.
func WithMedium(medium block.Tier) Option { return func(c *config) { c.medium = medium } }

// WithCapacity bounds the tier to n blocks: a put beyond them evicts the
// oldest block (first in, first out). 0, the default, is unbounded.
func WithCapacity(n int) Option { return func(c *config) { c.capacity = n } }

// WithPutDelay holds each put call this long before it stores anything,
// outside the tier's lock, so concurrent puts overlap: a slow tier.
func WithPutDelay(d time.Duration) Option { return func(c *config) { c.putDelay = d } }

// WithCorruptReads makes every read hand out the block with its first byte
// flipped (the stored bytes stay intact): a tier that serves wrong bytes.
func WithCorruptReads() Option { return func(c *config) { c.corrupt = true } }

// New returns an empty tier.
func New(opts ...Option) *Tier {
	t := &Tier{m: map[block.Key]*entry{}, cfg: config{medium: block.TierDRAM}}
	for _, o := range opts {
		o(&t.cfg)
	}
	return t
}

// FailPuts makes every put call fail with err as a whole, after its delay;
// nil heals the tier.
func (t *Tier) FailPuts(err error) { t.mu.Lock(); t.failPuts = err; t.mu.Unlock() }

// FailLookups makes every Lookup fail with err; nil heals the tier.
func (t *Tier) FailLookups(err error) { t.mu.Lock(); t.failLook = err; t.mu.Unlock() }

// Put stores a copy of data.
func (t *Tier) Put(_ context.Context, key block.Key, data []byte, sum uint32, opts block.PutOptions) error {
	if err := t.beginPut(1); err != nil {
		return err
	}
	defer t.mu.Unlock()
	return t.storeLocked(key, data, sum, opts)
}

// PutBatch stores data[i] under keys[i] with opts[i] (replay.TierClient),
// checksummed here, and returns one error per block; err is a failure of
// the whole call (FailPuts).
func (t *Tier) PutBatch(_ context.Context, keys []block.Key, data [][]byte, opts []block.PutOptions) ([]error, error) {
	if err := t.beginPut(len(keys)); err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	errs := make([]error, len(keys))
	for i, k := range keys {
		errs[i] = t.storeLocked(k, data[i], block.Checksum(data[i]), opts[i])
	}
	return errs, nil
}

// beginPut runs the start of a put call of n blocks: it counts the call in
// flight, waits the put delay outside the lock and returns with the lock
// held, or unlocked with the injected failure.
func (t *Tier) beginPut(n int) error {
	t.mu.Lock()
	t.inFlight++
	t.counts.MaxPutsInFlight = max(t.counts.MaxPutsInFlight, t.inFlight)
	t.mu.Unlock()
	time.Sleep(t.cfg.putDelay)
	t.mu.Lock()
	t.inFlight--
	if err := t.failPuts; err != nil {
		t.mu.Unlock()
		return err
	}
	t.counts.Puts += n
	return nil
}

func (t *Tier) storeLocked(key block.Key, data []byte, sum uint32, opts block.PutOptions) error {
	if e, ok := t.m[key]; ok {
		if e.info.Sum == sum && bytes.Equal(e.data, data) {
			return nil
		}
		return fmt.Errorf("%w: %s", block.ErrConflict, key)
	}
	now := time.Now()
	off, mapped, err := t.appendLocked(data)
	if err != nil {
		return err
	}
	e := &entry{data: mapped, off: off, opts: opts,
		info: block.Info{Key: key, Size: int64(len(data)), Sum: sum, Tier: t.cfg.medium, Priority: opts.Priority, Created: now, LastAccess: now}}
	if opts.PinTTL > 0 {
		e.pinned = now.Add(opts.PinTTL)
	}
	t.m[key] = e
	if t.cfg.capacity == 0 {
		return nil
	}
	t.order = append(t.order, key)
	for len(t.m) > t.cfg.capacity {
		delete(t.m, t.order[0])
		t.order = t.order[1:]
	}
	return nil
}

// appendLocked appends data to the memory file, page-aligned, and returns
// where it went and a shared mapping of those bytes. Space is never reused.
func (t *Tier) appendLocked(data []byte) (int64, []byte, error) {
	if t.file == nil {
		fd, err := unix.MemfdCreate("blocktest", unix.MFD_CLOEXEC)
		if err != nil {
			return 0, nil, fmt.Errorf("blocktest: memfd_create: %w", err)
		}
		t.file = os.NewFile(uintptr(fd), "blocktest")
	}
	off := t.end
	if len(data) == 0 {
		return off, []byte{}, nil
	}
	page := int64(os.Getpagesize())
	size := (int64(len(data)) + page - 1) / page * page
	if err := t.file.Truncate(off + size); err != nil {
		return 0, nil, fmt.Errorf("blocktest: grow memory file: %w", err)
	}
	m, err := unix.Mmap(int(t.file.Fd()), off, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return 0, nil, fmt.Errorf("blocktest: mmap: %w", err)
	}
	copy(m, data)
	t.end = off + size
	return off, m[:len(data):len(data)], nil
}

// Get returns a lease on the stored bytes.
func (t *Tier) Get(_ context.Context, key block.Key, opts block.GetOptions) (*block.Ref, error) {
	t.mu.Lock()
	t.marks = append(t.marks, opts.ReaderVerifies)
	t.noteReadLocked()
	e, err := t.readLocked(key, opts.Retain)
	t.mu.Unlock()
	if err != nil {
		return nil, err
	}
	t.leases.Add(1)
	release := func() { t.leases.Add(-1) }
	if t.cfg.corrupt {
		return block.NewRef(corrupted(e.data), e.info.Sum, t.cfg.medium, release), nil
	}
	ref := block.NewRef(e.data, e.info.Sum, t.cfg.medium, release)
	// Entries are never rewritten in place (Put appends), so sending from
	// the file needs nothing from the tier afterwards.
	ref.SetFile(int(t.file.Fd()), e.off, nil)
	return ref, nil
}

// noteReadLocked counts a read call that starts while a put is in flight.
func (t *Tier) noteReadLocked() {
	if t.inFlight > 0 {
		t.counts.ReadsDuringPuts++
	}
}

// readLocked is one block's read: counted, its retain window noted.
func (t *Tier) readLocked(key block.Key, retain time.Duration) (*entry, error) {
	t.counts.Gets++
	if d := retain; d > 0 {
		t.noteRetainLocked(key, d)
	}
	e, ok := t.m[key]
	if !ok {
		return nil, fmt.Errorf("%w: %s", block.ErrNotFound, key)
	}
	return e, nil
}

func corrupted(b []byte) []byte {
	c := bytes.Clone(b)
	if len(c) > 0 {
		c[0] ^= 0xff
	}
	return c
}

// GetBatchInto copies keys' blocks into bufs (replay.TierClient) and
// returns each one's size and error: block.ErrNotFound when absent,
// block.ErrTooLarge when its buffer is too small.
func (t *Tier) GetBatchInto(_ context.Context, keys []block.Key, bufs [][]byte) ([]int, []error, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.noteReadLocked()
	sizes, errs := make([]int, len(keys)), make([]error, len(keys))
	for i, k := range keys {
		e, err := t.readLocked(k, 0)
		switch {
		case err != nil:
			errs[i] = err
		case len(e.data) > len(bufs[i]):
			errs[i] = fmt.Errorf("%w: buffer too small", block.ErrTooLarge)
		default:
			sizes[i] = copy(bufs[i], e.data)
			if t.cfg.corrupt && sizes[i] > 0 {
				bufs[i][0] ^= 0xff
			}
		}
	}
	return sizes, errs, nil
}

// Lookup returns how many leading keys the tier holds (replay.TierClient).
func (t *Tier) Lookup(ctx context.Context, keys []block.Key) (int, error) {
	return t.LookupRetain(ctx, keys, 0)
}

// LookupRetain is Lookup with a read retain window (router.TierIndex's
// through a test's adapter): when positive it is noted for each key found,
// as a Store re-arms the prefix it finds.
func (t *Tier) LookupRetain(_ context.Context, keys []block.Key, retain time.Duration) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.counts.Lookups++
	t.noteReadLocked()
	if t.failLook != nil {
		return 0, t.failLook
	}
	n := 0
	for n < len(keys) {
		if _, ok := t.m[keys[n]]; !ok {
			break
		}
		n++
	}
	if d := retain; d > 0 {
		for _, k := range keys[:n] {
			t.noteRetainLocked(k, d)
		}
	}
	return n, nil
}

// Stat returns the block's metadata.
func (t *Tier) Stat(_ context.Context, key block.Key) (block.Info, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.m[key]
	if !ok {
		return block.Info{}, fmt.Errorf("%w: %s", block.ErrNotFound, key)
	}
	info := e.info
	info.PinnedUntil = e.pinned
	return info, nil
}

// Contains reports presence.
func (t *Tier) Contains(key block.Key) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.m[key]
	return ok
}

// Delete removes key.
func (t *Tier) Delete(_ context.Context, key block.Key) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.m[key]; !ok {
		return fmt.Errorf("%w: %s", block.ErrNotFound, key)
	}
	delete(t.m, key)
	if t.cfg.capacity > 0 {
		t.order = slices.DeleteFunc(t.order, func(k block.Key) bool { return k == key })
	}
	return nil
}

// Pin extends key's pin to until.
func (t *Tier) Pin(_ context.Context, key block.Key, until time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pinLocked(key, until)
}

func (t *Tier) pinLocked(key block.Key, until time.Time) error {
	e, ok := t.m[key]
	if !ok {
		return fmt.Errorf("%w: %s", block.ErrNotFound, key)
	}
	if until.After(e.pinned) {
		e.pinned = until
	}
	return nil
}

// PinBatch pins keys for ttl from now (router.Pinner, a Store's PinBatch)
// and returns one error per key (block.ErrNotFound when absent).
func (t *Tier) PinBatch(_ context.Context, keys []block.Key, ttl time.Duration) []error {
	t.mu.Lock()
	defer t.mu.Unlock()
	until := time.Now().Add(ttl)
	errs := make([]error, len(keys))
	for i, k := range keys {
		errs[i] = t.pinLocked(k, until)
	}
	return errs
}

// List returns up to limit blocks of ns in object-name order.
func (t *Tier) List(_ context.Context, ns, prefix, after string, limit int) ([]block.Info, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []block.Info
	for k, e := range t.m {
		if n := k.ObjectName(); k.Namespace == ns && n > after && strings.HasPrefix(n, prefix) {
			out = append(out, e.info)
		}
	}
	slices.SortFunc(out, func(a, b block.Info) int { return strings.Compare(a.Key.ObjectName(), b.Key.ObjectName()) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Retain records a lookup's read retain window (ctxstore.Retainer) and
// reports whether key is stored.
func (t *Tier) Retain(key block.Key, d time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.noteRetainLocked(key, d)
	_, ok := t.m[key]
	return ok
}

func (t *Tier) noteRetainLocked(key block.Key, d time.Duration) {
	if t.retains == nil {
		t.retains = map[block.Key]time.Duration{}
	}
	t.retains[key] = d
}

// ReleaseSession implements block.SessionReleaser: it counts the stored
// blocks put with session in ns, and forgets their session and retain
// window (a map keeps no eviction order).
func (t *Tier) ReleaseSession(_ context.Context, ns string, session uint64) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for k, e := range t.m {
		if k.Namespace == ns && e.opts.Session == session {
			e.opts.Session, e.opts.Retain = 0, 0
			n++
		}
	}
	return n, nil
}

// Len is the number of stored blocks.
func (t *Tier) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// Data returns a copy of key's stored bytes, nil when absent.
func (t *Tier) Data(key block.Key) []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.m[key]; ok {
		return bytes.Clone(e.data)
	}
	return nil
}

// PutOptions returns the options key was stored with (as the first put
// gave them, less a released session), and whether it is stored.
func (t *Tier) PutOptions(key block.Key) (block.PutOptions, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.m[key]
	if !ok {
		return block.PutOptions{}, false
	}
	return e.opts, true
}

// PinnedUntil returns key's pin expiry (zero when not pinned or absent).
func (t *Tier) PinnedUntil(key block.Key) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.m[key]; ok {
		return e.pinned
	}
	return time.Time{}
}

// TakeReaderMarks returns, for every Get since the last call, whether its
// options said the reader verifies the bytes itself
// (block.GetOptions.ReaderVerifies), in call order, and forgets them.
func (t *Tier) TakeReaderMarks() []bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.marks
	t.marks = nil
	return out
}

// Retains returns and forgets the read retain windows recorded by key.
func (t *Tier) Retains() map[block.Key]time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.retains
	t.retains = nil
	return r
}

// Counts returns the tier's call counts.
func (t *Tier) Counts() Counts {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.counts
}

// OpenLeases is the number of Refs handed out and not yet released.
func (t *Tier) OpenLeases() int { return int(t.leases.Load()) }

// WaitLeases waits up to d for every lease to be released (a server releases
// a lease just after writing the response, so a client may see the answer a
// moment before) and returns how many are still open.
func (t *Tier) WaitLeases(d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		n := t.OpenLeases()
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(time.Millisecond)
	}
}
