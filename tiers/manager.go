// Package tiers is a node's storage stack: the tier manager that puts blocks
// into DRAM, moves them down to a lower tier (NVMe) when DRAM evicts them
// (write-back) or at put time (write-through, per namespace), reads DRAM
// first and then the lower tier, and promotes blocks that are read again.
// The tiers themselves live in tiers/dram and tiers/nvme, the replacement and
// admission policies in tiers/policy.
package tiers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/tiers/dram"
	"github.com/ctxtier/ctxtier/tiers/policy"
)

// Lower is a tier below DRAM (tiers/nvme, tiers/s3, a Chain of them):
// block.Storage, the same interface as ctxstore.Tier. Its Put has the same
// immutability contract as DRAM's: identical bytes succeed, different bytes
// are block.ErrConflict.
type Lower = block.Storage

// AdmitAll admits everything.
type AdmitAll struct{}

// Record implements policy.Admitter.
func (AdmitAll) Record(uint64) {}

// Admit implements policy.Admitter.
func (AdmitAll) Admit(uint64) bool { return true }

// LockAdmitter makes an admitter safe for concurrent use (policy admitters
// are not locked: they are cheap, and their owner usually holds a lock).
func LockAdmitter(a policy.Admitter) policy.Admitter { return &lockedAdmitter{a: a} }

type lockedAdmitter struct {
	mu sync.Mutex
	a  policy.Admitter
}

func (l *lockedAdmitter) Record(h uint64) {
	l.mu.Lock()
	l.a.Record(h)
	l.mu.Unlock()
}

func (l *lockedAdmitter) Admit(h uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.a.Admit(h)
}

// Config configures the manager.
type Config struct {
	// DemoteAdmission filters blocks evicted from DRAM before they are written
	// to the lower tier; nil admits all (every evicted block is kept). It must
	// be safe for concurrent use (see LockAdmitter).
	DemoteAdmission policy.Admitter
	// PromoteAdmission filters lower-tier hits before they are copied into
	// DRAM; nil admits all.
	PromoteAdmission policy.Admitter
	// DemoteTimeout bounds one demotion write.
	DemoteTimeout time.Duration
	// OnDrop, when set, is told of every block that an eviction made leave
	// the last of this node's tiers: a DRAM eviction (dirty or clean) when
	// the lower tier does not hold the key, and a lower-tier eviction
	// (LowerEvicted) when DRAM does not. Each side removes its copy before
	// it looks at the other, so a block that leaves both tiers at once is
	// reported at least once (rarely twice; the hook must be idempotent),
	// and a block still held by a tier is never reported, except when a
	// concurrent put or promotion brings back a block just reported gone.
	// Deletes are not drops. A cluster uses it to keep its index truthful.
	// It runs in the evicting goroutine (often a put's) and must not block
	// or call back into the manager.
	OnDrop func(key block.Key)
	// Quota, when set, returns a namespace's byte quotas per tier; the
	// manager hands the DRAM quota to the DRAM tier, which keeps each
	// namespace within it by evicting (demoting) that namespace's own least
	// recently used blocks (tiers/dram quota.go). It must be cheap and must
	// not call back into the manager.
	Quota func(ns string) block.Quota
	// TrimInterval is how often RunQuotaTrim brings namespaces that hold
	// more than their quota in a tier (a quota was lowered) down to it;
	// TrimBudget bounds the bytes one pass evicts per tier (trim.go).
	TrimInterval time.Duration
	TrimBudget   int64
}

// DefaultConfig admits everything, gives a demotion 5 s, and trims
// namespaces over a lowered quota once a second, at most 256 MiB per tier
// per pass.
func DefaultConfig() Config {
	return Config{DemoteTimeout: 5 * time.Second, TrimInterval: time.Second, TrimBudget: 256 << 20}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.DemoteTimeout <= 0 {
		return fmt.Errorf("%w: tiers: DemoteTimeout must be positive", block.ErrInvalidArgument)
	}
	if c.TrimInterval <= 0 || c.TrimBudget <= 0 {
		return fmt.Errorf("%w: tiers: TrimInterval and TrimBudget must be positive", block.ErrInvalidArgument)
	}
	return nil
}

// Manager is the per-node tier stack. It implements ctxstore.Tier.
type Manager struct {
	cfg   Config
	dram  *dram.Tier
	lower Lower // nil when the node has only DRAM
	log   *slog.Logger

	promotions, promoteSkipped     atomic.Uint64
	directPromotions               atomic.Uint64 // promotions read straight into DRAM (promoteInto)
	demotions, demoteSkipped       atomic.Uint64
	demoteErrors, demotedBytes     atomic.Uint64
	lowerHits, lowerMisses, writes atomic.Uint64
	drops                          atomic.Uint64
	sharedReads                    atomic.Uint64
	trimmed                        atomic.Uint64 // bytes TrimQuotas evicted

	// flights are the lower-tier reads in progress, by key: a Get that
	// misses DRAM while another Get of the same key reads the lower tier
	// waits for that read's promotion instead of reading again.
	flightMu sync.Mutex
	flights  map[block.Key]*flight
	joins    atomic.Int64 // Gets that joined a flight (tests wait on it)
}

// flight is one lower-tier read of a key that other Gets may wait for.
type flight struct {
	done     chan struct{}
	promoted bool // set before done closes: the block is in DRAM
}

// New builds the DRAM tier from dcfg (installing the demotion hook) over an
// optional lower tier.
func New(cfg Config, dcfg dram.Config, lower Lower, log *slog.Logger) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	if cfg.DemoteAdmission == nil {
		cfg.DemoteAdmission = AdmitAll{}
	}
	if cfg.PromoteAdmission == nil {
		cfg.PromoteAdmission = AdmitAll{}
	}
	m := &Manager{cfg: cfg, lower: lower, log: log, flights: map[block.Key]*flight{}}
	if lower != nil {
		dcfg.Demote = m.demote
	}
	dcfg.Evicted = m.dramEvicted
	if cfg.Quota != nil {
		dcfg.Quota = func(ns string) int64 { return cfg.Quota(ns).DRAM }
	}
	d, err := dram.New(dcfg, log)
	if err != nil {
		return nil, err
	}
	m.dram = d
	return m, nil
}

// DRAM is the manager's DRAM tier.
func (m *Manager) DRAM() *dram.Tier { return m.dram }

// Close closes the DRAM tier (the lower tier belongs to the caller).
func (m *Manager) Close() error { return m.dram.Close() }

// demote is the DRAM tier's write-back hook. A block it does not write is
// reported by dramEvicted once DRAM has let it go.
func (m *Manager) demote(ctx context.Context, key block.Key, data []byte, sum uint32, info block.Info) {
	if !m.cfg.DemoteAdmission.Admit(key.Hash) {
		m.demoteSkipped.Add(1)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.DemoteTimeout)
	defer cancel()
	opts := block.PutOptions{Sum: sum, HasSum: true, Priority: info.Priority, HasPriority: true}
	if !info.PinnedUntil.IsZero() {
		opts.PinTTL = time.Until(info.PinnedUntil)
	}
	if err := m.lower.Put(ctx, key, data, sum, opts); err != nil && !errors.Is(err, block.ErrConflict) {
		m.demoteErrors.Add(1)
		m.log.Warn("demotion to the lower tier failed; block dropped", "key", key.String(), "err", err)
		return
	}
	m.demotions.Add(1)
	m.demotedBytes.Add(uint64(len(data)))
}

func (m *Manager) drop(key block.Key) {
	m.drops.Add(1)
	if m.cfg.OnDrop != nil {
		m.cfg.OnDrop(key)
	}
}

// dramEvicted is the DRAM tier's eviction hook (dram.Config.Evicted), run
// after the block left DRAM's index: it is gone from this node unless the
// lower tier holds it. This covers clean copies too: the lower tier may have
// evicted its own copy since DRAM was told it was there.
func (m *Manager) dramEvicted(key block.Key) {
	if m.lower == nil || !m.lower.Contains(key) {
		m.drop(key)
	}
}

// LowerEvicted is the lower tier's eviction hook (nvme.Config.OnEvict), run
// after the block left the lower tier's index: it is gone from this node
// unless DRAM still holds it, and then dramEvicted reports it when DRAM
// evicts it, whether that copy is clean or not.
func (m *Manager) LowerEvicted(key block.Key, _ []byte, _ uint32) {
	if m.dram == nil || !m.dram.Contains(key) {
		m.drop(key)
	}
}

// Put stores a block in DRAM, and in the lower tier first when the namespace
// writes through. A key the lower tier already holds with other bytes is a
// conflict even when DRAM does not hold it.
func (m *Manager) Put(ctx context.Context, key block.Key, data []byte, sum uint32, opts block.PutOptions) error {
	m.writes.Add(1)
	m.cfg.DemoteAdmission.Record(key.Hash)
	if m.lower == nil {
		return m.dram.Put(ctx, key, data, sum, opts)
	}
	if opts.WriteThrough {
		if err := m.lower.Put(ctx, key, data, sum, opts); err != nil {
			return err
		}
		return m.dram.PutClean(ctx, key, data, sum, opts, true)
	}
	// Immutability across tiers: a key only the lower tier holds must not
	// get other bytes in DRAM. A new key is ruled out by the lower tier's
	// Contains, which the NVMe tier answers from its in-memory presence
	// filter (tiers/nvme presence.go) without an index read or the
	// formatted error of a Stat miss; Stat then runs only for keys below.
	// Until the lower tiers' indexes are loaded Contains may miss a block
	// they hold, so Stat decides alone.
	if !m.dram.Contains(key) && (!m.IndexLoaded() || m.lower.Contains(key)) {
		if info, err := m.lower.Stat(ctx, key); err == nil {
			if info.Size != int64(len(data)) || info.Sum != sum {
				return fmt.Errorf("%w: %s: the lower tier holds %d bytes, crc32c %08x; put has %d bytes, crc32c %08x",
					block.ErrConflict, key, info.Size, info.Sum, len(data), sum)
			}
			// Identical bytes already below: the put is idempotent; keep a
			// clean DRAM copy since the block is evidently in use again.
			return m.dram.PutClean(ctx, key, data, sum, opts, true)
		}
	}
	return m.dram.Put(ctx, key, data, sum, opts)
}

// Get reads DRAM, then the lower tier, promoting lower-tier hits that the
// promotion admission accepts. Concurrent Gets of a key that is not in
// DRAM share one lower-tier read: the first reads and promotes, the others
// wait for it and read the promoted copy from DRAM (each with its own
// lease). When the promotion does not happen (admission, no space, an
// error, the first reader's context ending) each waiter reads the lower
// tier itself. opts go to every tier read (block.GetOptions).
func (m *Manager) Get(ctx context.Context, key block.Key, opts block.GetOptions) (*block.Ref, error) {
	m.cfg.DemoteAdmission.Record(key.Hash)
	ref, err := m.dram.Get(ctx, key, opts)
	if err == nil || m.lower == nil || !errors.Is(err, block.ErrNotFound) {
		return ref, err
	}
	m.flightMu.Lock()
	if f, ok := m.flights[key]; ok {
		m.flightMu.Unlock()
		m.joins.Add(1)
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if f.promoted {
			if ref, err := m.dram.Get(ctx, key, opts); err == nil {
				m.sharedReads.Add(1)
				return ref, nil
			}
		}
		ref, _, err := m.lowerGet(ctx, key, opts)
		return ref, err
	}
	f := &flight{done: make(chan struct{})}
	m.flights[key] = f
	m.flightMu.Unlock()
	defer func() {
		m.flightMu.Lock()
		delete(m.flights, key)
		m.flightMu.Unlock()
		close(f.done)
	}()
	// A flight that ended between the DRAM miss and this one may have
	// promoted the block.
	if ref, err := m.dram.Get(ctx, key, opts); err == nil {
		f.promoted = true
		return ref, nil
	}
	ref, f.promoted, err = m.lowerGet(ctx, key, opts)
	return ref, err
}

// lowerGet reads the lower tier and promotes the block if admitted; it
// reports whether the block is now in DRAM. A lower tier that can read into
// caller memory (IntoReader) reads an admitted block straight into its new
// DRAM pages, and the read is served from that copy (promoteInto); else the
// block is read into the lower tier's buffer, served from it, and copied
// into DRAM.
//
// The lower tier's Stat comes first (the old path also asked it, after the
// read, for the block's priority); a block no lower tier holds therefore
// costs a second lookup there, which the NVMe tier's presence filter
// answers in memory for most absent keys.
func (m *Manager) lowerGet(ctx context.Context, key block.Key, opts block.GetOptions) (*block.Ref, bool, error) {
	info, serr := m.lower.Stat(ctx, key)
	decided, admit, noRoom := false, false, false
	if serr == nil {
		decided, admit = true, m.admitPromotion(key)
		if admit {
			var ref *block.Ref
			var ok bool
			if ref, ok, noRoom = m.promoteInto(ctx, key, info, opts); ok {
				return ref, true, nil
			}
		}
	}
	ref, err := m.lower.Get(ctx, key, opts)
	if err != nil {
		m.lowerMisses.Add(1)
		return nil, false, err
	}
	m.lowerHits.Add(1)
	if noRoom {
		return ref, false, nil // DRAM had no room a moment ago: served from below
	}
	if !decided {
		admit = m.admitPromotion(key)
	}
	if !admit {
		m.promoteSkipped.Add(1)
		return ref, false, nil
	}
	popts := block.PutOptions{Namespace: opts.Namespace}
	if serr == nil {
		popts.Priority, popts.HasPriority = info.Priority, true
	}
	perr := m.dram.PutClean(ctx, key, ref.Data, ref.Sum, popts, true)
	if perr == nil {
		m.promotions.Add(1)
	} else if !errors.Is(perr, block.ErrNoSpace) && !errors.Is(perr, block.ErrQuotaExceeded) {
		// No space, or a block above its namespace's DRAM quota, is not
		// worth a warning per read: the block is served from below.
		m.log.Warn("promotion to dram failed", "key", key.String(), "err", perr)
	}
	return ref, perr == nil, nil
}

// admitPromotion records a lower-tier hit of key with the promotion
// admission and asks it whether to promote.
func (m *Manager) admitPromotion(key block.Key) bool {
	m.cfg.PromoteAdmission.Record(key.Hash)
	return m.cfg.PromoteAdmission.Admit(key.Hash)
}

// Stat returns the metadata of the hottest copy.
func (m *Manager) Stat(ctx context.Context, key block.Key) (block.Info, error) {
	info, err := m.dram.Stat(ctx, key)
	if err == nil || m.lower == nil || !errors.Is(err, block.ErrNotFound) {
		return info, err
	}
	return m.lower.Stat(ctx, key)
}

// IndexLoaded reports whether the lower tiers have loaded their indexes
// (IndexLoader): before that, Contains may miss blocks they hold.
func (m *Manager) IndexLoaded() bool {
	l, ok := m.lower.(IndexLoader)
	return !ok || l.IndexLoaded()
}

// Contains reports presence in any tier.
func (m *Manager) Contains(key block.Key) bool {
	return m.dram.Contains(key) || (m.lower != nil && m.lower.Contains(key))
}

// Delete removes key from every tier; ErrNotFound only if no tier had it.
func (m *Manager) Delete(ctx context.Context, key block.Key) error {
	err := m.dram.Delete(ctx, key)
	if m.lower == nil {
		return err
	}
	lerr := m.lower.Delete(ctx, key)
	notFound := func(e error) bool { return e == nil || errors.Is(e, block.ErrNotFound) }
	switch {
	case !notFound(err):
		return err
	case !notFound(lerr):
		return lerr
	case err == nil || lerr == nil:
		return nil
	default:
		return err
	}
}

// Pin pins the block wherever it is resident.
func (m *Manager) Pin(ctx context.Context, key block.Key, until time.Time) error {
	err := m.dram.Pin(ctx, key, until)
	if m.lower == nil {
		return err
	}
	lerr := m.lower.Pin(ctx, key, until)
	if err == nil || lerr == nil {
		return nil
	}
	return err
}

// List merges the tiers' listings in object-name order, each block once.
func (m *Manager) List(ctx context.Context, ns, prefix, after string, limit int) ([]block.Info, error) {
	a, err := m.dram.List(ctx, ns, prefix, after, limit)
	if err != nil || m.lower == nil {
		return a, err
	}
	b, err := m.lower.List(ctx, ns, prefix, after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]block.Info, 0, len(a)+len(b))
	for i, j := 0, 0; i < len(a) || j < len(b); {
		switch {
		case j == len(b) || i < len(a) && a[i].Key.ObjectName() < b[j].Key.ObjectName():
			out = append(out, a[i])
			i++
		case i == len(a) || b[j].Key.ObjectName() < a[i].Key.ObjectName():
			out = append(out, b[j])
			j++
		default: // in both: report the DRAM copy
			out = append(out, a[i])
			i, j = i+1, j+1
		}
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out, nil
}

// Stats are the manager's own counters (each tier has its own too).
type Stats struct {
	Promotions, PromoteSkipped uint64
	// DirectPromotions are the Promotions read straight into DRAM's pages
	// (IntoReader), with no staging buffer or copy.
	DirectPromotions                       uint64
	Demotions, DemoteSkipped, DemoteErrors uint64
	DemotedBytes                           uint64
	LowerHits, LowerMisses                 uint64
	Drops                                  uint64 // blocks that left every tier without a Delete
	// SharedReads are Gets served from DRAM by another Get's concurrent
	// lower-tier read and promotion, instead of a lower-tier read of their own.
	SharedReads uint64
	// QuotaTrimmedBytes were evicted by TrimQuotas, bringing namespaces
	// down to quotas that were lowered.
	QuotaTrimmedBytes uint64
}

// Stats returns a snapshot of the counters.
func (m *Manager) Stats() Stats {
	return Stats{
		Promotions: m.promotions.Load(), PromoteSkipped: m.promoteSkipped.Load(), DirectPromotions: m.directPromotions.Load(),
		Demotions: m.demotions.Load(), DemoteSkipped: m.demoteSkipped.Load(), DemoteErrors: m.demoteErrors.Load(),
		DemotedBytes: m.demotedBytes.Load(),
		LowerHits:    m.lowerHits.Load(), LowerMisses: m.lowerMisses.Load(),
		Drops: m.drops.Load(), SharedReads: m.sharedReads.Load(),
		QuotaTrimmedBytes: m.trimmed.Load(),
	}
}

// ReleaseSession implements block.SessionReleaser on the DRAM tier, where
// retain windows live (the lower tiers keep no hints).
func (m *Manager) ReleaseSession(ctx context.Context, ns string, session uint64) (int, error) {
	if m.dram == nil {
		return 0, nil
	}
	return m.dram.ReleaseSession(ctx, ns, session)
}

// Retain re-arms key's retain window in DRAM (a LOOKUP's read hint); see
// dram.Tier.Retain.
func (m *Manager) Retain(key block.Key, d time.Duration) bool {
	return m.dram != nil && m.dram.Retain(key, d)
}
