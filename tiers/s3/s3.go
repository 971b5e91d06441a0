// Package s3 is the S3 tier, the coldest and largest: blocks that reclamation
// drops from NVMe (nvme.Config.OnEvict) are buffered and packed many to an
// object — block bytes, then an index of (key, offset, length, CRC-32C,
// expiry), then a fixed trailer — uploaded with minio-go (multipart above the
// part size), and read back one block at a time with ranged GETs whose bytes
// are verified against the block's checksum before they are served.
//
// A local index (in memory, persisted as a journal file) maps each key to its
// pack, offset, length and checksum; Locate exposes it, and a node with no
// index rebuilds it from the packs' own indexes. Per-namespace policy decides
// whether a namespace reaches S3 and for how long; a maintenance pass drops
// expired blocks, deletes packs with nothing live, and re-packs the live
// blocks of packs that are mostly dead.
//
// S3 being slow or down never blocks the hotter tiers: demotion only copies
// into a bounded buffer (a block that does not fit is dropped and counted),
// uploads back off and retry, and a get of an S3-only block runs under a short
// timeout behind a circuit breaker, failing fast with block.ErrUnavailable.
// See docs/s3tier.md.
package s3

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Policy is a namespace's S3 policy.
type Policy struct {
	// Enabled: blocks of the namespace reach S3 at all.
	Enabled bool
	// TTL: how long a block stays in S3 after it is demoted; 0 for no limit.
	TTL time.Duration
}

// PolicyFor derives a namespace's S3 policy from its definition: enabled
// unless S3Disabled; kept for S3TTLSeconds if set, else for the namespace's
// TTLSeconds, else without limit.
func PolicyFor(ns block.Namespace) Policy {
	p := Policy{Enabled: !ns.S3Disabled, TTL: time.Duration(ns.S3TTLSeconds) * time.Second}
	if p.TTL == 0 {
		p.TTL = ns.TTL()
	}
	return p
}

// Config configures the S3 tier.
type Config struct {
	// Endpoint is the S3 server's host:port.
	Endpoint string
	// Bucket holds the packs; it is created if missing (CreateBucket).
	Bucket string
	// Prefix is prepended to every object name ("ctxtier/" for example).
	Prefix string
	// AccessKey and SecretKey sign requests (SigV4).
	AccessKey, SecretKey string
	// TLS uses https.
	TLS bool
	// Region is the signing region.
	Region string
	// CreateBucket makes the bucket on open when it does not exist.
	CreateBucket bool

	// Dir holds the local index journal.
	Dir string

	// PackSize seals a pack once its blocks reach this many bytes.
	PackSize int64
	// PackBlocks seals a pack once it holds this many blocks.
	PackBlocks int
	// SoloSize: a block of at least this many bytes is uploaded as a pack of
	// its own and read back with a whole-object GET instead of a ranged
	// one (0: every block is packed with others). Packing saves requests
	// for small blocks; a block this large costs one GET either way, a
	// whole-object GET is the server's fast path, and a dead solo pack is
	// deleted without compaction. See docs/s3tier.md.
	SoloSize int64
	// FlushInterval seals a pack this long after its first block arrived.
	FlushInterval time.Duration
	// MaxBuffer bounds the bytes of blocks waiting for upload (open and
	// sealed packs). A demoted block that does not fit is dropped and counted.
	MaxBuffer int64
	// PartSize is the multipart part size (>= 5 MiB); packs larger than it
	// are uploaded in parts, UploadThreads at a time.
	PartSize      int64
	UploadThreads int
	// UploadTimeout bounds one pack upload; a failed upload is retried after
	// a backoff that doubles from RetryMin to RetryMax.
	UploadTimeout      time.Duration
	RetryMin, RetryMax time.Duration

	// GetTimeout bounds one block read: an S3-only block that cannot be
	// fetched in time is a miss with block.ErrUnavailable.
	GetTimeout time.Duration
	// DialTimeout and ResponseTimeout bound connection setup and the wait
	// for response headers.
	DialTimeout, ResponseTimeout time.Duration
	// BreakerFailures consecutive failures open the circuit for
	// BreakerCooldown, during which gets fail at once.
	BreakerFailures int
	BreakerCooldown time.Duration

	// MaintainInterval is how often expired blocks are dropped, empty packs
	// deleted and mostly-dead packs compacted.
	MaintainInterval time.Duration
	// CompactBelow: a pack whose live bytes fall below this fraction of its
	// block bytes is compacted (its live blocks re-packed, then it is deleted).
	CompactBelow float64

	// MaxBlockSize bounds one block.
	MaxBlockSize int64

	// Policy resolves a namespace's policy; nil enables every namespace
	// without a TTL.
	Policy func(ns string) Policy

	// Quota, when set, returns a namespace's S3 quota in bytes (0 for
	// none): the payload bytes this tier may hold for it (quota.go). It
	// must be cheap and must not call back into the tier.
	Quota func(ns string) int64
	// OnDrop, when set, is told of every block that leaves the tier without
	// a Delete: evicted for its namespace's quota, or a demotion the tier
	// did not keep (policy, full buffer, quota). It runs without the tier's
	// lock held, in the evicting goroutine, and must not block.
	OnDrop func(key block.Key)
}

// DefaultConfig returns 64 MiB packs of at most 4096 blocks sealed after 30 s,
// blocks of 1 MiB or more in packs of their own, a 512 MiB upload buffer, 16 MiB parts 4 at a time, 2 s gets, a breaker that
// opens after 3 failures for 5 s, and hourly maintenance compacting packs
// under half live. Endpoint, Bucket and Dir must be set.
func DefaultConfig() Config {
	return Config{
		Region:           "us-east-1",
		CreateBucket:     true,
		PackSize:         64 << 20,
		PackBlocks:       4096,
		SoloSize:         1 << 20,
		FlushInterval:    30 * time.Second,
		MaxBuffer:        512 << 20,
		PartSize:         16 << 20,
		UploadThreads:    4,
		UploadTimeout:    2 * time.Minute,
		RetryMin:         500 * time.Millisecond,
		RetryMax:         30 * time.Second,
		GetTimeout:       2 * time.Second,
		DialTimeout:      time.Second,
		ResponseTimeout:  2 * time.Second,
		BreakerFailures:  3,
		BreakerCooldown:  5 * time.Second,
		MaintainInterval: time.Hour,
		CompactBelow:     0.5,
		MaxBlockSize:     block.DefaultMaxBlockSize,
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: s3 tier: %s", block.ErrInvalidArgument, fmt.Sprintf(format, a...))
	}
	switch {
	case c.Endpoint == "":
		return bad("endpoint is empty")
	case c.Bucket == "":
		return bad("bucket is empty")
	case c.Dir == "":
		return bad("dir (for the local index) is empty")
	case c.MaxBlockSize < 1 || c.MaxBlockSize > block.HardMaxBlockSize:
		return bad("max block size %d out of range 1..%d", c.MaxBlockSize, block.HardMaxBlockSize)
	case c.PackSize < 1 || c.PackBlocks < 1 || c.PackBlocks > maxPackCount:
		return bad("pack size %d and pack blocks %d must be positive (blocks <= %d)", c.PackSize, c.PackBlocks, maxPackCount)
	case c.SoloSize < 0:
		return bad("solo size %d is negative", c.SoloSize)
	case c.MaxBuffer < c.MaxBlockSize:
		return bad("max buffer %d must hold one max-size block (%d)", c.MaxBuffer, c.MaxBlockSize)
	case c.PartSize < 5<<20:
		return bad("part size %d below the S3 minimum of 5 MiB", c.PartSize)
	case c.UploadThreads < 1:
		return bad("upload threads must be positive")
	case c.FlushInterval <= 0 || c.UploadTimeout <= 0 || c.GetTimeout <= 0 || c.DialTimeout <= 0 || c.ResponseTimeout <= 0:
		return bad("flush interval and timeouts must be positive")
	case c.RetryMin <= 0 || c.RetryMax < c.RetryMin:
		return bad("retry backoff %v..%v invalid", c.RetryMin, c.RetryMax)
	case c.BreakerFailures < 1 || c.BreakerCooldown <= 0:
		return bad("breaker failures and cooldown must be positive")
	case c.MaintainInterval <= 0:
		return bad("maintain interval must be positive")
	case c.CompactBelow < 0 || c.CompactBelow >= 1:
		return bad("compact-below %v out of range [0, 1)", c.CompactBelow)
	case strings.HasPrefix(c.Prefix, "/"):
		return bad("prefix %q must not start with /", c.Prefix)
	}
	return nil
}

// Location is where an S3-resident block lives: the object and the byte
// range of the block in it, and its CRC-32C. It is what the cluster index
// keeps as a tier hint, so any node can fetch the block.
type Location struct {
	Object string
	Offset int64
	Length int64
	Sum    uint32
}

// packMeta is what the index knows about one uploaded pack.
type packMeta struct {
	name       string
	size       int64
	created    int64
	dataBytes  int64 // bytes of all its blocks
	count      int   // blocks written into it
	live       int   // blocks the index points to it
	liveBytes  int64
	compacting bool
}

// loc is an index entry.
type loc struct {
	pack    *packMeta
	off     int64
	length  int64
	sum     uint32
	expires int64
}

// Tier is the S3 tier. It is safe for concurrent use.
type Tier struct {
	cfg   Config
	log   *slog.Logger
	store objectStore
	brk   *breaker
	// clock is time.Now; tests swap it (setClock) while the tier's
	// goroutines run, so it is read atomically.
	clock atomic.Pointer[func() time.Time]

	mu      sync.Mutex
	index   map[block.Key]loc
	packs   map[string]*packMeta
	pend    map[block.Key]*pending
	open    map[string]*openPack // by namespace
	sealed  []*openPack
	buffer  int64 // bytes in open and sealed packs
	journal *journal
	closed  bool
	// held and nsAcct count each namespace's bytes (quota.go).
	held   map[block.Key]*held
	nsAcct map[string]*nsAcct

	kick     chan struct{}
	stop     chan struct{}
	wg       sync.WaitGroup
	rebuilt  atomic.Bool
	uploadMu sync.Mutex // one upload pass at a time (uploader, Flush)

	st stats
}

type stats struct {
	demoted, demotedBytes        atomic.Uint64
	dropped, droppedBytes        atomic.Uint64
	skippedPolicy, duplicates    atomic.Uint64
	uploads, uploadedBytes       atomic.Uint64
	uploadErrors                 atomic.Uint64
	hits, misses, readBytes      atomic.Uint64
	bufferHits                   atomic.Uint64
	unavailable, fastFails       atomic.Uint64
	corruptions, expirations     atomic.Uint64
	packsDeleted, compactions    atomic.Uint64
	compactedBlocks              atomic.Uint64
	quotaEvictions, quotaRefused atomic.Uint64
}

// Stats is a snapshot of the tier's counters.
type Stats struct {
	Demoted, DemotedBytes uint64 // blocks accepted into the upload buffer
	Dropped, DroppedBytes uint64 // blocks dropped because the buffer was full
	SkippedPolicy         uint64 // blocks of namespaces that do not reach S3
	Duplicates            uint64 // blocks already in S3 when demoted
	Uploads               uint64 // packs uploaded
	UploadedBytes         uint64
	UploadErrors          uint64
	Hits, Misses          uint64
	BufferHits            uint64 // hits served from the upload buffer
	ReadBytes             uint64
	Unavailable           uint64 // gets that failed because S3 did not answer
	FastFails             uint64 // gets refused by the open circuit breaker
	Corruptions           uint64 // blocks that failed verification
	Expirations           uint64
	PacksDeleted          uint64
	Compactions           uint64 // packs compacted
	CompactedBlocks       uint64 // live blocks re-packed by compaction
	QuotaEvictions        uint64 // blocks forgotten to keep a namespace within its quota
	QuotaRefused          uint64 // puts and demotions refused by a quota
	Blocks                int64  // blocks indexed in S3
	Packs                 int    // packs indexed
	BufferedBytes         int64  // bytes waiting for upload
	PendingPacks          int    // sealed packs waiting for upload
	Rebuilding            bool   // the index is being rebuilt from the bucket
	BreakerOpen           bool
}

// New opens the tier: it replays the local index from cfg.Dir and starts the
// uploader and maintenance goroutines. It makes no request that could block
// on S3 except creating the bucket (bounded by GetTimeout; a failure is
// logged, not fatal, so a node starts while S3 is down). When no index
// existed, the index is rebuilt from the packs in the bucket in the
// background.
func New(cfg Config, log *slog.Logger) (*Tier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ms, err := newMinioStore(cfg)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	if cfg.CreateBucket {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.GetTimeout)
		if err := ms.EnsureBucket(ctx, cfg.Region); err != nil {
			log.Warn("s3 tier: cannot check or create the bucket now; continuing", "bucket", cfg.Bucket, "err", err)
		}
		cancel()
	}
	return newTier(cfg, ms, log)
}

// now reads the tier's clock.
func (t *Tier) now() time.Time { return (*t.clock.Load())() }

// setClock replaces the tier's clock (tests move time forward with it).
func (t *Tier) setClock(f func() time.Time) { t.clock.Store(&f) }

// newTier opens the tier over any object store (unit tests pass a fake).
func newTier(cfg Config, store objectStore, log *slog.Logger) (*Tier, error) {
	if cfg.Prefix != "" && !strings.HasSuffix(cfg.Prefix, "/") {
		cfg.Prefix += "/"
	}
	if cfg.Policy == nil {
		cfg.Policy = func(string) Policy { return Policy{Enabled: true} }
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("s3 tier: %w", err)
	}
	t := &Tier{
		cfg: cfg, log: log, store: store,
		index:  make(map[block.Key]loc),
		packs:  make(map[string]*packMeta),
		pend:   make(map[block.Key]*pending),
		open:   make(map[string]*openPack),
		held:   make(map[block.Key]*held),
		nsAcct: make(map[string]*nsAcct),
		kick:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
	}
	t.setClock(time.Now)
	t.brk = &breaker{threshold: cfg.BreakerFailures, cooldown: cfg.BreakerCooldown, now: func() time.Time { return t.now() }}
	fresh, err := t.openJournal()
	if err != nil {
		return nil, err
	}
	log.Info("s3 tier ready", "endpoint", cfg.Endpoint, "bucket", cfg.Bucket, "prefix", cfg.Prefix,
		"blocks", len(t.index), "packs", len(t.packs), "rebuild", fresh)
	t.wg.Add(2)
	go t.uploader()
	go t.maintainer()
	if fresh {
		t.wg.Add(1)
		go t.rebuildLoop()
	} else {
		t.rebuilt.Store(true)
	}
	return t, nil
}

// openJournal replays the index journal and rewrites it as a snapshot. It
// reports whether there was none (a fresh node).
func (t *Tier) openJournal() (fresh bool, err error) {
	path := filepath.Join(t.cfg.Dir, "index.journal")
	f, err := os.Open(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		fresh = true
	case err != nil:
		return false, fmt.Errorf("s3 tier: %w", err)
	default:
		_, rerr := readJournal(f, t.apply)
		f.Close()
		if rerr != nil {
			t.log.Warn("s3 tier: index journal has a damaged tail; keeping what precedes it", "path", path, "err", rerr)
		}
	}
	tmp := path + ".tmp"
	nf, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return false, fmt.Errorf("s3 tier: %w", err)
	}
	j := &journal{f: nf}
	for _, rec := range t.snapshot() {
		if err := j.append(rec, false); err != nil {
			nf.Close()
			return false, err
		}
	}
	if err := nf.Sync(); err != nil {
		nf.Close()
		return false, fmt.Errorf("s3 tier: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		nf.Close()
		return false, fmt.Errorf("s3 tier: %w", err)
	}
	if _, err := nf.Seek(0, 2); err != nil {
		nf.Close()
		return false, fmt.Errorf("s3 tier: %w", err)
	}
	t.journal = j
	return fresh, nil
}

// snapshot encodes the live state as pack records.
func (t *Tier) snapshot() [][]byte {
	byPack := make(map[*packMeta][]packEntry, len(t.packs))
	for k, l := range t.index {
		byPack[l.pack] = append(byPack[l.pack], packEntry{Key: k, Off: l.off, Len: l.length, Sum: l.sum, Expires: l.expires})
	}
	out := make([][]byte, 0, len(t.packs))
	for _, p := range t.packs {
		out = append(out, encodePackRecord(packRecord{
			name: p.name, size: p.size, created: p.created, dataBytes: p.dataBytes, count: p.count, entries: byPack[p],
		}))
	}
	return out
}

// apply applies one journal record to the in-memory index (t.mu held or
// not yet shared).
func (t *Tier) apply(rec record) {
	switch rec.kind {
	case recPack:
		t.addPackLocked(rec.pack, nil)
	case recDelete:
		t.unindexLocked(rec.key)
	case recRemove:
		if p := t.packs[rec.name]; p != nil {
			for k, l := range t.index {
				if l.pack == p {
					delete(t.index, k)
					t.syncHeldLocked(k)
				}
			}
			delete(t.packs, rec.name)
		}
	}
}

// addPackLocked indexes a pack's entries; when keep is not nil, only the
// entries it accepts. Newer entries replace older ones of the same key.
func (t *Tier) addPackLocked(r packRecord, keep func(packEntry) bool) *packMeta {
	p := t.packs[r.name]
	if p == nil {
		p = &packMeta{name: r.name, size: r.size, created: r.created, dataBytes: r.dataBytes, count: r.count}
		t.packs[r.name] = p
	}
	for _, e := range r.entries {
		if keep != nil && !keep(e) {
			continue
		}
		t.unindexLocked(e.Key)
		t.index[e.Key] = loc{pack: p, off: e.Off, length: e.Len, sum: e.Sum, expires: e.Expires}
		t.syncHeldLocked(e.Key)
		p.live++
		p.liveBytes += e.Len
	}
	return p
}

// unindexLocked drops key from the index, reporting whether it was there.
func (t *Tier) unindexLocked(k block.Key) bool {
	l, ok := t.index[k]
	if !ok {
		return false
	}
	delete(t.index, k)
	l.pack.live--
	l.pack.liveBytes -= l.length
	t.syncHeldLocked(k)
	return true
}

// Close uploads what is buffered (bounded by ctx-free UploadTimeout), stops
// the background goroutines and closes the journal. Blocks still buffered
// when S3 cannot take them are lost from S3 (they were cold blocks that NVMe
// had already dropped).
func (t *Tier) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.UploadTimeout)
	ferr := t.Flush(ctx)
	cancel()
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	close(t.stop)
	t.wg.Wait()
	t.mu.Lock()
	defer t.mu.Unlock()
	if ferr != nil {
		t.log.Warn("s3 tier: closing with blocks not uploaded", "bytes", t.buffer, "err", ferr)
	}
	return t.journal.f.Close()
}

// Locate returns where an S3-resident block lives. Blocks still waiting in
// the upload buffer have no location yet.
func (t *Tier) Locate(key block.Key) (Location, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.index[key]
	if !ok || t.expiredLocked(l.expires) {
		return Location{}, false
	}
	return Location{Object: l.pack.name, Offset: l.off, Length: l.length, Sum: l.sum}, true
}

func (t *Tier) expiredLocked(expires int64) bool {
	return expires != 0 && expires <= t.now().UnixNano()
}

// Get reads a block: from the upload buffer if it is still there, otherwise
// with one ranged GET of its pack (a whole-object GET when the pack holds
// only that block), verified against its checksum. A block
// the tier does not have is block.ErrNotFound at once; one S3 cannot serve
// now is block.ErrUnavailable within GetTimeout, or at once while the
// circuit breaker is open.
func (t *Tier) Get(ctx context.Context, key block.Key, _ block.GetOptions) (*block.Ref, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, block.ErrClosed
	}
	t.touchLocked(key)
	if p := t.pend[key]; p != nil {
		t.mu.Unlock()
		t.st.hits.Add(1)
		t.st.bufferHits.Add(1)
		return block.NewRef(p.data, p.sum, block.TierS3, nil), nil
	}
	l, ok := t.index[key]
	if ok && t.expiredLocked(l.expires) {
		t.unindexLocked(key)
		t.st.expirations.Add(1)
		ok = false
	}
	t.mu.Unlock()
	if !ok {
		if !t.rebuilt.Load() {
			// The index is still being rebuilt from the bucket: the block
			// may be there. Unavailable, not NotFound, so that no caller
			// (the cluster index) concludes it is gone.
			t.st.unavailable.Add(1)
			return nil, fmt.Errorf("%w: %s: the s3 tier's index is still being rebuilt from the bucket", block.ErrUnavailable, key)
		}
		t.st.misses.Add(1)
		return nil, fmt.Errorf("%w: %s not in the s3 tier", block.ErrNotFound, key)
	}
	buf := getBuf(l.length)
	data, err := t.fetch(ctx, key, l, buf)
	if err != nil {
		putBuf(buf)
		return nil, err
	}
	t.st.hits.Add(1)
	return block.NewRef(data, l.sum, block.TierS3, func() { putBuf(buf) }), nil
}

// bufPool recycles read buffers: a Ref's bytes go back to it on Release.
var bufPool sync.Pool

func getBuf(n int64) *[]byte {
	if b, ok := bufPool.Get().(*[]byte); ok && int64(cap(*b)) >= n {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n)
	return &b
}

func putBuf(b *[]byte) { bufPool.Put(b) }

// fetch reads and verifies one indexed block.
func (t *Tier) fetch(ctx context.Context, key block.Key, l loc, into *[]byte) ([]byte, error) {
	if !t.brk.allow() {
		t.st.fastFails.Add(1)
		return nil, fmt.Errorf("%w: s3 tier: %s: s3 is failing, circuit open (retry after %v)", block.ErrUnavailable, key, t.cfg.BreakerCooldown)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	gctx, cancel := context.WithTimeout(ctx, t.cfg.GetTimeout)
	defer cancel()
	buf := *into
	var err error
	if l.off == 0 && l.pack.count == 1 {
		err = t.store.ReadHead(gctx, l.pack.name, buf)
	} else {
		err = t.store.ReadRange(gctx, l.pack.name, l.off, buf)
	}
	switch {
	case err == nil:
		t.brk.success()
	case errors.Is(err, errNoObject):
		t.brk.success() // S3 answered
		t.dropIfSame(key, l)
		t.st.misses.Add(1)
		return nil, fmt.Errorf("%w: %s: its pack %s is gone from s3", block.ErrNotFound, key, l.pack.name)
	case ctx.Err() != nil:
		return nil, ctx.Err() // the caller gave up: not S3's fault
	default:
		t.brk.failure()
		t.st.unavailable.Add(1)
		return nil, fmt.Errorf("%w: s3 tier: get %s (%d bytes at %d of %s): %v", block.ErrUnavailable, key, l.length, l.off, l.pack.name, err)
	}
	t.st.readBytes.Add(uint64(l.length))
	if s := block.Checksum(buf); s != l.sum {
		t.st.corruptions.Add(1)
		t.dropIfSame(key, l)
		t.log.Error("s3 tier: block failed verification; dropped", "key", key.String(), "pack", l.pack.name, "want", l.sum, "got", s)
		return nil, fmt.Errorf("%w: %s from s3 has crc32c %08x, want %08x (%v); dropped", block.ErrNotFound, key, s, l.sum, block.ErrChecksum)
	}
	return buf, nil
}

// dropIfSame unindexes key if it still points where l does.
func (t *Tier) dropIfSame(key block.Key, l loc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if cur, ok := t.index[key]; ok && cur.pack == l.pack && cur.off == l.off {
		t.unindexLocked(key)
		t.journalLocked(encodeDeleteRecord(key), false)
	}
}

func (t *Tier) journalLocked(rec []byte, sync bool) {
	if t.journal == nil {
		return
	}
	if err := t.journal.append(rec, sync); err != nil {
		t.log.Error("s3 tier: index journal write failed", "err", err)
	}
}

// Stat returns a block's metadata without reading it.
func (t *Tier) Stat(_ context.Context, key block.Key) (block.Info, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.pend[key]; p != nil {
		return block.Info{Key: key, Size: int64(len(p.data)), Sum: p.sum, Tier: block.TierS3}, nil
	}
	if l, ok := t.index[key]; ok && !t.expiredLocked(l.expires) {
		return block.Info{Key: key, Size: l.length, Sum: l.sum, Tier: block.TierS3, Created: time.Unix(0, l.pack.created)}, nil
	}
	if !t.rebuilt.Load() {
		return block.Info{}, fmt.Errorf("%w: %s: the s3 tier's index is still being rebuilt from the bucket", block.ErrUnavailable, key)
	}
	return block.Info{}, fmt.Errorf("%w: %s not in the s3 tier", block.ErrNotFound, key)
}

// IndexLoaded reports whether the index is complete: false while it is being
// rebuilt from the bucket, when Contains may miss blocks the bucket holds.
func (t *Tier) IndexLoaded() bool { return t.rebuilt.Load() }

// Contains reports whether the tier holds key (buffered or uploaded).
func (t *Tier) Contains(key block.Key) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pend[key] != nil {
		return true
	}
	l, ok := t.index[key]
	return ok && !t.expiredLocked(l.expires)
}

// Delete forgets a block; its bytes stay in its pack until maintenance
// deletes or compacts the pack.
func (t *Tier) Delete(_ context.Context, key block.Key) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.forgetLocked(key) {
		return fmt.Errorf("%w: %s not in the s3 tier", block.ErrNotFound, key)
	}
	return nil
}

// Pin succeeds for a block the tier holds and keeps it from being evicted
// for its namespace's quota until until (S3 never evicts for capacity;
// expiry still applies).
func (t *Tier) Pin(_ context.Context, key block.Key, until time.Time) error {
	if !t.Contains(key) {
		return fmt.Errorf("%w: %s not in the s3 tier", block.ErrNotFound, key)
	}
	t.mu.Lock()
	t.pinLocked(key, until.UnixNano())
	t.mu.Unlock()
	return nil
}

// List returns up to limit blocks of namespace ns whose object names start
// with prefix and sort after after, in object-name order.
func (t *Tier) List(_ context.Context, ns, prefix, after string, limit int) ([]block.Info, error) {
	t.mu.Lock()
	var out []block.Info
	add := func(k block.Key, size int64, sum uint32) {
		if k.Namespace != ns {
			return
		}
		name := k.ObjectName()
		if strings.HasPrefix(name, prefix) && name > after {
			out = append(out, block.Info{Key: k, Size: size, Sum: sum, Tier: block.TierS3})
		}
	}
	for k, p := range t.pend {
		add(k, int64(len(p.data)), p.sum)
	}
	for k, l := range t.index {
		if t.pend[k] == nil && !t.expiredLocked(l.expires) {
			add(k, l.length, l.sum)
		}
	}
	t.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Key.ObjectName() < out[j].Key.ObjectName() })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Stats returns a snapshot of the counters.
func (t *Tier) Stats() Stats {
	t.mu.Lock()
	blocks, packs, buf, sealed := int64(len(t.index)), len(t.packs), t.buffer, len(t.sealed)
	t.mu.Unlock()
	return Stats{
		Demoted: t.st.demoted.Load(), DemotedBytes: t.st.demotedBytes.Load(),
		Dropped: t.st.dropped.Load(), DroppedBytes: t.st.droppedBytes.Load(),
		SkippedPolicy: t.st.skippedPolicy.Load(), Duplicates: t.st.duplicates.Load(),
		Uploads: t.st.uploads.Load(), UploadedBytes: t.st.uploadedBytes.Load(), UploadErrors: t.st.uploadErrors.Load(),
		Hits: t.st.hits.Load(), Misses: t.st.misses.Load(), BufferHits: t.st.bufferHits.Load(),
		ReadBytes: t.st.readBytes.Load(), Unavailable: t.st.unavailable.Load(), FastFails: t.st.fastFails.Load(),
		Corruptions: t.st.corruptions.Load(), Expirations: t.st.expirations.Load(),
		PacksDeleted: t.st.packsDeleted.Load(), Compactions: t.st.compactions.Load(),
		CompactedBlocks: t.st.compactedBlocks.Load(),
		QuotaEvictions:  t.st.quotaEvictions.Load(), QuotaRefused: t.st.quotaRefused.Load(),
		Blocks: blocks, Packs: packs, BufferedBytes: buf, PendingPacks: sealed,
		BreakerOpen: t.brk.open(), Rebuilding: !t.rebuilt.Load(),
	}
}

// packName returns a fresh, time-ordered, collision-free object name for a
// pack of namespace ns.
func (t *Tier) packName(ns string, created time.Time) string {
	var r [8]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("%s%s/%016x-%016x.pack", t.cfg.Prefix, ns, uint64(created.UnixNano()), binary.LittleEndian.Uint64(r[:]))
}
