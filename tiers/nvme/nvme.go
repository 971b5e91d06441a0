// Package nvme is the NVMe tier: blocks are appended to large segment files
// with O_DIRECT, each block one 4 KiB-aligned extent (a header page, then the
// payload), so one aligned read fetches a block and a GPUDirect-Storage reader
// could DMA the payload directly. A badger database indexes key → (segment,
// offset, length, checksum, generation) with bounded memory, so resident
// memory does not grow with the data on disk.
//
// Capacity is a hard bound on the bytes of segment files. Eviction reclaims
// whole segments, oldest first: live blocks that were read since they were
// written (or are pinned) are re-appended at the head, so writes stay
// sequential; cold ones are handed to Config.OnEvict (the next tier down) and
// dropped. Every read verifies the extent header and the payload CRC-32C; a
// block that fails is dropped, counted and reported as a miss, never served.
//
// After a crash (kill -9 at any moment) New rebuilds a consistent state:
// index entries that point outside their segment are dropped, and extents
// written after the last recorded head but never indexed are re-indexed if
// they verify. See docs/nvme.md.
package nvme

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/descriptor"
)

// Config configures the NVMe tier.
type Config struct {
	// Dir holds the tier: Dir/segments (segment files) and Dir/index (badger).
	Dir string
	// Capacity is a hard bound on the bytes of segment files in Dir. One
	// segment's worth is kept free for reclamation to re-append hot blocks,
	// so blocks fill at most Capacity - SegmentSize.
	Capacity int64
	// SegmentSize is the size of one segment file (a multiple of 4 KiB).
	SegmentSize int64
	// MaxBlockSize bounds one block; an extent must fit in a segment.
	MaxBlockSize int64
	// SyncWrites makes every put durable against power loss (fdatasync of the
	// segment and a synced index commit) instead of only against a process
	// crash. It costs a flush per put.
	SyncWrites bool
	// DisableDirectIO forces buffered I/O even where O_DIRECT works.
	DisableDirectIO bool
	// VerifyOnOpen reads every indexed extent's header page on open and drops
	// entries whose header disagrees. Without it, headers are checked on read.
	VerifyOnOpen bool
	// LeaseTTL bounds a descriptor lease: after it, the segment may be
	// reclaimed even if the lease was never released.
	LeaseTTL time.Duration
	// OnEvict, when set, receives every cold block that reclamation drops,
	// with its verified bytes (valid only during the call: copy them). It runs
	// while the tier is reclaiming, so it must not call back into this tier.
	OnEvict func(key block.Key, data []byte, sum uint32)
	// Index bounds the memory of the badger index.
	Index IndexConfig
	// spaceFn reports a directory's free bytes and its filesystem's size
	// (nil: statfs; tests fake it).
	spaceFn func(dir string) (free, total int64, err error)
	// MinFree is the free space the tier leaves on its filesystem (for its
	// index, whose memory-mapped files must never meet a full disk): a
	// write that would cross it reclaims segments first, or fails with
	// block.ErrNoSpace. 0 is 2 × Index.MemTableSize, at most a quarter of
	// the filesystem.
	MinFree int64
	// Quota, when set, is a namespace's byte quota in this tier (0 or less:
	// none); see quota.go. It must be cheap and must not call into the tier.
	Quota func(ns string) int64
	// PresenceSlots sizes the in-memory filter that answers a lookup of a
	// key the index does not hold without reading the index (presence.go):
	// a power of two, 4 bytes each; 0 turns it off. About as many slots as
	// blocks the tier holds keeps most misses off the index.
	PresenceSlots int
}

// IndexConfig bounds the badger index's memory. Its resident memory is about
// MemTableSize × (NumMemtables + 1) + BlockCacheSize + IndexCacheSize, however
// many blocks are indexed (an index entry is about 100 bytes on disk).
type IndexConfig struct {
	MemTableSize   int64 // one memtable (also the size of its write-ahead log)
	NumMemtables   int   // memtables held in memory before a flush stalls writes
	BlockCacheSize int64 // cache of SSTable data blocks
	IndexCacheSize int64 // cache of SSTable indexes and bloom filters (> 0 keeps them off the heap when cold)
}

// DefaultConfig returns 16 GiB of capacity in 256 MiB segments under Dir
// "ctxtier-nvme", 64 MiB blocks, leases of 30 s, an index bounded to about
// 80 MiB, and a presence filter of 2^21 slots (8 MiB).
func DefaultConfig() Config {
	return Config{
		Dir:          "ctxtier-nvme",
		Capacity:     16 << 30,
		SegmentSize:  256 << 20,
		MaxBlockSize: block.DefaultMaxBlockSize,
		LeaseTTL:     30 * time.Second,
		// 16 GiB of 64 KiB blocks is 256 Ki blocks: an eighth of the slots.
		PresenceSlots: 1 << 21,
		Index: IndexConfig{
			MemTableSize:   16 << 20,
			NumMemtables:   2,
			BlockCacheSize: 16 << 20,
			IndexCacheSize: 16 << 20,
		},
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: nvme: %s", block.ErrInvalidArgument, fmt.Sprintf(format, a...))
	}
	switch {
	case c.Dir == "":
		return bad("dir is empty")
	case c.SegmentSize < 4*Align || c.SegmentSize%Align != 0:
		return bad("segment size %d must be a multiple of %d and at least %d", c.SegmentSize, Align, 4*Align)
	case c.MaxBlockSize < 1 || c.MaxBlockSize > block.HardMaxBlockSize:
		return bad("max block size %d out of range 1..%d", c.MaxBlockSize, block.HardMaxBlockSize)
	case descriptor.ExtentLen(c.MaxBlockSize) > c.SegmentSize:
		return bad("a max-size block (%d bytes, extent %d) does not fit in a segment of %d", c.MaxBlockSize, descriptor.ExtentLen(c.MaxBlockSize), c.SegmentSize)
	case c.Capacity < 3*c.SegmentSize:
		return bad("capacity %d must hold at least 3 segments of %d", c.Capacity, c.SegmentSize)
	case c.LeaseTTL <= 0:
		return bad("lease TTL must be positive")
	case c.Index.MemTableSize < 1<<20 || c.Index.NumMemtables < 1:
		return bad("index memtable size %d must be >= 1 MiB and memtables >= 1", c.Index.MemTableSize)
	case c.Index.BlockCacheSize < 0 || c.Index.IndexCacheSize < 0:
		return bad("index cache sizes must not be negative")
	case c.MinFree < 0:
		return bad("min free %d must not be negative", c.MinFree)
	case c.PresenceSlots < 0 || c.PresenceSlots > 1<<28 || c.PresenceSlots&(c.PresenceSlots-1) != 0:
		return bad("presence slots %d must be 0 or a power of two up to 2^28", c.PresenceSlots)
	}
	return nil
}

const stripes = 256

// Tier is the NVMe tier. It is safe for concurrent use.
type Tier struct {
	cfg    Config
	log    *slog.Logger
	db     *badger.DB
	segDir string
	direct bool
	now    func() time.Time
	pool   bufPool

	// life is held shared by every operation and exclusively by Close.
	life sync.RWMutex

	// wmu serialises space reservation and reclamation.
	wmu sync.Mutex
	// commitMu orders index commits that move the head.
	commitMu sync.Mutex
	// keyMu stripes serialise read-modify-writes of one key's index entry.
	keyMu [stripes]sync.Mutex
	// present filters lookups of keys the index does not hold (nil: off).
	present *presence

	mu       sync.Mutex
	segs     map[uint64]*segment
	active   *segment
	nextSeg  uint64
	nextGen  uint64
	used     int64 // bytes of segment files (reserved or written)
	head     head  // last committed head
	inflight map[block.Key]chan struct{}
	// nsBytes is each namespace's indexed payload bytes; nsPending the
	// bytes quota-admitted puts are still writing (quota.go).
	nsBytes, nsPending map[string]int64
	leaseSeq           uint64
	closed             bool
	recovery           Recovery

	// spaceFn asks the filesystem (fsSpace; tests replace it); floor is
	// the free space the tier keeps on it (see space.go).
	spaceFn func(dir string) (free, total int64, err error)
	floor   int64
	space   struct {
		free atomic.Int64 // bytes free at the last statfs
		at   atomic.Int64 // when (unix ns)
	}

	st       stats
	readLat  prometheus.Histogram
	writeLat prometheus.Histogram
}

type stats struct {
	residentBytes  atomic.Int64
	liveBytes      atomic.Int64
	blocks         atomic.Int64
	hits           atomic.Uint64
	misses         atomic.Uint64
	puts           atomic.Uint64
	evictions      atomic.Uint64
	evictedBytes   atomic.Uint64
	demotions      atomic.Uint64
	relocations    atomic.Uint64
	relocatedBytes atomic.Uint64
	reclaimed      atomic.Uint64
	expirations    atomic.Uint64
	corruptions    atomic.Uint64
	noSpace        atomic.Uint64
	indexRefused   atomic.Uint64
	readBytes      atomic.Uint64
	writeBytes     atomic.Uint64
	leases         atomic.Uint64
	quotaEvictions atomic.Uint64
	quotaRefused   atomic.Uint64
}

// Stats is a snapshot of the tier's counters.
type Stats struct {
	Capacity       int64
	UsedBytes      int64 // bytes of segment files
	LiveBytes      int64 // extent bytes of indexed blocks (<= UsedBytes)
	ResidentBytes  int64 // payload bytes of indexed blocks
	Blocks         int64
	Segments       int
	Hits, Misses   uint64
	Puts           uint64
	Evictions      uint64 // cold blocks dropped by reclamation
	EvictedBytes   uint64
	Demotions      uint64 // evicted blocks handed to OnEvict
	Relocations    uint64 // hot or pinned blocks re-appended by reclamation
	RelocatedBytes uint64
	Reclaimed      uint64 // segments reclaimed
	Expirations    uint64
	Corruptions    uint64 // blocks that failed verification and were dropped
	NoSpace        uint64
	IndexRefused   uint64 // index writes refused: the filesystem was below half the floor
	ReadBytes      uint64 // bytes read from segment files
	WriteBytes     uint64 // bytes written to segment files
	Leases         uint64 // descriptor leases granted
	QuotaEvictions uint64 // blocks evicted to keep their namespace within its quota
	QuotaRefused   uint64 // puts refused with block.ErrQuotaExceeded
	PresenceSkips  uint64 // lookups of absent keys answered without reading the index
	DirectIO       bool
}

// New opens (or creates) the tier in cfg.Dir, recovering from whatever state
// a crash left.
func New(cfg Config, log *slog.Logger) (*Tier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	segDir := filepath.Join(cfg.Dir, "segments")
	idxDir := filepath.Join(cfg.Dir, "index")
	for _, d := range []string{segDir, idxDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, fmt.Errorf("nvme: %w", err)
		}
	}
	direct := false
	if !cfg.DisableDirectIO {
		ok, err := probeDirect(segDir)
		if err != nil {
			return nil, err
		}
		direct = ok
		if !ok {
			log.Warn("nvme: O_DIRECT is not supported here; using buffered I/O (reads may come from the page cache)", "dir", segDir)
		}
	}
	spaceFn := cfg.spaceFn
	if spaceFn == nil {
		spaceFn = fsSpace
	}
	floor, err := makeRoom(cfg, segDir, spaceFn, log)
	if err != nil {
		return nil, err
	}
	db, rebuilt, err := openIndex(idxDir, cfg, log)
	if err != nil {
		return nil, err
	}
	buckets := prometheus.ExponentialBuckets(25e-6, 2, 16) // 25 µs .. 0.8 s
	t := &Tier{
		cfg: cfg, log: log, db: db, segDir: segDir, direct: direct, now: time.Now,
		spaceFn: spaceFn, floor: floor,
		segs:      make(map[uint64]*segment),
		inflight:  make(map[block.Key]chan struct{}),
		nsBytes:   map[string]int64{},
		nsPending: map[string]int64{},
		present:   newPresence(cfg.PresenceSlots),
		readLat: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "ctxtier_tier_read_seconds", Help: "Latency of reads from the tier.",
			ConstLabels: prometheus.Labels{"tier": "nvme"}, Buckets: buckets,
		}),
		writeLat: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "ctxtier_tier_write_seconds", Help: "Latency of writes to the tier.",
			ConstLabels: prometheus.Labels{"tier": "nvme"}, Buckets: buckets,
		}),
	}
	start := time.Now()
	rep, err := t.recover()
	if err != nil {
		_ = t.closeFiles()
		db.Close()
		return nil, err
	}
	rep.Duration = time.Since(start)
	rep.IndexRebuilt = rebuilt
	t.recovery = rep
	if limit, free, ok := t.fsLimit(); ok && limit < cfg.Capacity {
		log.Warn("nvme: the filesystem cannot hold the configured capacity: the tier keeps min_free bytes free on it and evicts to stay there",
			"dir", cfg.Dir, "capacity", cfg.Capacity, "usable_now", max(limit, 0), "free", free, "min_free", t.minFree())
	}
	log.Info("nvme tier ready", "dir", cfg.Dir, "capacity", cfg.Capacity, "direct_io", direct,
		"blocks", t.st.blocks.Load(), "segments", len(t.segs), "startup", rep.Duration,
		"dropped", rep.Dropped, "reindexed", rep.Reindexed, "truncated", rep.Truncated,
		"skipped", rep.Skipped, "index_rebuilt", rep.IndexRebuilt)
	return t, nil
}

// openIndex opens the badger index in dir. An index that cannot be opened
// (corrupt files) is moved aside to dir.corrupt-<unix time> and a fresh one
// is opened: with no head recorded, recovery scans every segment from its
// start and indexes each extent that verifies, so the blocks come back.
// It reports whether it did that.
func openIndex(dir string, cfg Config, log *slog.Logger) (*badger.DB, bool, error) {
	db, err := badger.Open(indexOptions(dir, cfg, log))
	if err == nil {
		return db, false, nil
	}
	aside := fmt.Sprintf("%s.corrupt-%d", dir, time.Now().Unix())
	log.Error("nvme: the index cannot be opened; rebuilding it from the segment files", "dir", dir, "moved_to", aside, "err", err)
	if rerr := os.Rename(dir, aside); rerr != nil {
		return nil, false, fmt.Errorf("nvme: open index: %w (and moving it aside failed: %v)", err, rerr)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, false, fmt.Errorf("nvme: %w", err)
	}
	db, err = badger.Open(indexOptions(dir, cfg, log))
	if err != nil {
		return nil, false, fmt.Errorf("nvme: open a fresh index: %w", err)
	}
	return db, true, nil
}

// Recovery reports what opening the tier found and repaired, and how long
// it took (the startup time).
func (t *Tier) Recovery() Recovery { return t.recovery }

func indexOptions(dir string, cfg Config, log *slog.Logger) badger.Options {
	return badger.DefaultOptions(dir).
		WithLogger(badgerLog{log}).
		WithLoggingLevel(badger.WARNING).
		WithDetectConflicts(false).
		WithNumVersionsToKeep(1).
		WithSyncWrites(cfg.SyncWrites).
		WithMemTableSize(cfg.Index.MemTableSize).
		WithNumMemtables(cfg.Index.NumMemtables).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(8).
		WithBlockCacheSize(cfg.Index.BlockCacheSize).
		WithIndexCacheSize(cfg.Index.IndexCacheSize).
		WithValueThreshold(1 << 10). // index values are ~70 bytes: always inline in the LSM tree
		WithValueLogFileSize(64 << 20).
		WithCompression(options.None).
		WithNumCompactors(2).
		WithMetricsEnabled(false)
}

// badgerLog bridges badger's logger to slog (its info chatter goes to debug).
type badgerLog struct{ l *slog.Logger }

func (b badgerLog) Errorf(f string, a ...any)   { b.l.Error("nvme index: " + fmt.Sprintf(f, a...)) }
func (b badgerLog) Warningf(f string, a ...any) { b.l.Warn("nvme index: " + fmt.Sprintf(f, a...)) }
func (b badgerLog) Infof(f string, a ...any)    { b.l.Debug("nvme index: " + fmt.Sprintf(f, a...)) }
func (b badgerLog) Debugf(string, ...any)       {}

// DirectIO reports whether segment files use O_DIRECT (false: buffered fallback).
func (t *Tier) DirectIO() bool { return t.direct }

// Close closes the index and the segment files. Outstanding Refs stay valid
// (they hold copies); outstanding descriptors may stop working.
func (t *Tier) Close() error {
	t.life.Lock()
	defer t.life.Unlock()
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.mu.Unlock()
	err := t.db.Close()
	if cerr := t.closeFiles(); err == nil {
		err = cerr
	}
	return err
}

func (t *Tier) closeFiles() error {
	var err error
	for _, s := range t.segs {
		if cerr := s.file.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	return err
}

// enter takes the shared life lock; it fails once the tier is closed.
func (t *Tier) enter() error {
	t.life.RLock()
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		t.life.RUnlock()
		return block.ErrClosed
	}
	return nil
}

func (t *Tier) leave() { t.life.RUnlock() }

// Stats returns a snapshot of the counters.
func (t *Tier) Stats() Stats {
	t.mu.Lock()
	used, nseg := t.used, len(t.segs)
	t.mu.Unlock()
	return Stats{
		Capacity:       t.cfg.Capacity,
		UsedBytes:      used,
		LiveBytes:      t.st.liveBytes.Load(),
		ResidentBytes:  t.st.residentBytes.Load(),
		Blocks:         t.st.blocks.Load(),
		Segments:       nseg,
		Hits:           t.st.hits.Load(),
		Misses:         t.st.misses.Load(),
		Puts:           t.st.puts.Load(),
		Evictions:      t.st.evictions.Load(),
		EvictedBytes:   t.st.evictedBytes.Load(),
		Demotions:      t.st.demotions.Load(),
		Relocations:    t.st.relocations.Load(),
		RelocatedBytes: t.st.relocatedBytes.Load(),
		Reclaimed:      t.st.reclaimed.Load(),
		Expirations:    t.st.expirations.Load(),
		Corruptions:    t.st.corruptions.Load(),
		NoSpace:        t.st.noSpace.Load(),
		IndexRefused:   t.st.indexRefused.Load(),
		ReadBytes:      t.st.readBytes.Load(),
		WriteBytes:     t.st.writeBytes.Load(),
		PresenceSkips:  t.present.skipped(),
		Leases:         t.st.leases.Load(),
		QuotaEvictions: t.st.quotaEvictions.Load(),
		QuotaRefused:   t.st.quotaRefused.Load(),
		DirectIO:       t.direct,
	}
}

// checkCtx returns ctx's error, if any, for blocking calls.
func checkCtx(ctx context.Context) error {
	if ctx == nil {
		return nil
	}
	return ctx.Err()
}
