// Package dram is the DRAM tier: blocks live in a fixed-capacity arena outside
// the Go heap (a shared mmap of a memory file, so co-located clients can later
// map it read-only), carved into 4 KiB pages by a coalescing good-fit
// allocator. Capacity is a hard bound. When full it evicts by the configured
// replacement policy (LRU within priority class by default), skipping blocks
// that are pinned or under a read lease. Every block keeps its CRC-32C (its
// checksum in the API and on the wire) and an xxh3-64 fingerprint of its bytes
// taken at put time, which is verified on every read (xxh3 runs about four
// times faster than CRC-32C here, and a read is the hot path); a block that
// fails is dropped and reported as a miss, never served.
//
// The memory file also holds a version table after the arena (version.go):
// one word per page, incremented whenever the page's allocation is freed, so
// a co-located reader can check a copy by version instead of by checksum.
package dram

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/internal/chunked"
	"github.com/ctxtier/ctxtier/tiers/policy"
)

// PageSize is the arena's allocation unit (and the alignment of every block).
const PageSize = 4096

// Config configures the DRAM tier.
type Config struct {
	// Capacity is the arena size in bytes: a hard bound on resident block bytes.
	Capacity int64
	// MemFile is the path of the memory file backing the arena. Empty means an
	// anonymous memfd (shared with co-located clients through /proc/PID/fd/N).
	// A path (for example under /dev/shm or a hugetlbfs mount) is created,
	// truncated, and removed on Close.
	MemFile string
	// MaxBlockSize bounds one block.
	MaxBlockSize int64
	// HugePages asks the kernel to back the arena with transparent huge
	// pages (hugepage.go); it takes effect only where the kernel's
	// shmem_enabled setting allows it, which the start-up log reports.
	HugePages bool
	// Prefault populates the whole arena when the tier starts (prefault.go),
	// so that no put pays a first-touch page fault. It costs start-up time
	// and makes the arena resident at once instead of as it fills.
	Prefault bool
	// Policy builds the replacement policy; nil means policy.NewLRU.
	Policy policy.Factory
	// SweepInterval is how often expired blocks are dropped by Run.
	SweepInterval time.Duration
	// Demote, when set, is offered every evicted block that no lower tier
	// holds yet (write-back). It runs outside the tier's lock, in the
	// goroutine whose put needed the space; the block stays readable from
	// DRAM until it returns. It decides itself whether the block is worth
	// keeping (admission) and must not call back into this tier.
	Demote func(ctx context.Context, key block.Key, data []byte, sum uint32, info block.Info)
	// Evicted, when set, is told of every block that eviction removed from
	// the index: clean ones at once, dirty ones after Demote returned. It
	// runs outside the tier's lock, after the block stopped being readable
	// here, so a caller that checks the lower tier in it cannot miss a
	// concurrent lower-tier drop (see tiers.Manager). Deletes and expiries
	// are not evictions and are not reported. It must not call back into
	// this tier.
	Evicted func(key block.Key)
	// Quota, when set, is a namespace's byte quota in this tier (0 or less:
	// none). It is called with the tier's lock held and must not call back
	// into the tier (quota.go).
	Quota func(ns string) int64
}

// DefaultConfig returns 1 GiB of arena, 64 MiB blocks, LRU.
func DefaultConfig() Config {
	return Config{
		Capacity:      1 << 30,
		MaxBlockSize:  block.DefaultMaxBlockSize,
		SweepInterval: 10 * time.Second,
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.Capacity < PageSize:
		return fmt.Errorf("%w: dram capacity %d below one page (%d)", block.ErrInvalidArgument, c.Capacity, PageSize)
	case c.Capacity/PageSize > 1<<32-1:
		return fmt.Errorf("%w: dram capacity %d above 16 TiB", block.ErrInvalidArgument, c.Capacity)
	case c.MaxBlockSize < 1 || c.MaxBlockSize > block.HardMaxBlockSize:
		return fmt.Errorf("%w: dram max block size %d out of range", block.ErrInvalidArgument, c.MaxBlockSize)
	case c.SweepInterval <= 0:
		return fmt.Errorf("%w: dram sweep interval must be positive", block.ErrInvalidArgument)
	}
	return nil
}

// entry is one resident (or being-written) block. Entries live in a slice
// indexed by handle; the policy keeps its own state per handle.
type entry struct {
	key      block.Key
	page     uint32 // first page
	pages    uint32
	size     int64
	sum      uint32 // CRC-32C, the block's checksum on the wire and in the API
	fp       uint64 // xxh3-64 of the bytes, verified on every read
	version  uint64 // the first page's version word when the block was indexed
	priority uint8
	leases   int32
	live     bool  // indexed (visible to readers)
	tracked  bool  // known to the policy (false while being demoted)
	clean    bool  // a lower tier already holds it: eviction need not demote
	never    bool  // put with the agent hint block.ReuseNever: eviction drops it, never demotes
	doomed   bool  // removed from the index while leased; freed at last release
	spliced  bool  // its pages were handed to sendfile: punch them out when freed
	pinUntil int64 // unix nanoseconds
	expires  int64 // unix nanoseconds, 0 = never
	created  int64
	access   int64
	// nsPrev and nsNext link the live entries of one namespace (quota.go).
	nsPrev, nsNext uint32
}

// Tier is the DRAM tier. It is safe for concurrent use.
type Tier struct {
	cfg   Config
	log   *slog.Logger
	file  *os.File
	fd    int // file's descriptor, for Ref.SetFile
	path  string
	mem   []byte   // the whole memory file: arena, then the version table
	arena []byte   // mem[:tableOff]
	vers  []uint64 // the version table, one word per arena page (version.go)
	now   func() time.Time

	tableOff int64 // byte offset of the version table in the memory file

	mu      sync.Mutex
	alloc   *allocator
	index   map[block.Key]uint32
	entries chunked.Array[entry] // by handle; grows without a copy (internal/chunked)
	free    []uint32             // free handles
	policy  policy.Policy
	clock   policy.Clocked     // the policy, when its order depends on time
	ns      map[string]*nsAcct // per-namespace accounts (quota.go)
	closed  bool
	// busy counts the work on arena bytes done outside mu (a put's copy,
	// a read's check, a demotion): entered under mu while not closed,
	// left when done; Close waits for it before unmapping (close.go).
	busy sync.WaitGroup

	st stats
}

type stats struct {
	residentBytes atomic.Int64
	blocks        atomic.Int64
	hits          atomic.Uint64
	misses        atomic.Uint64
	puts          atomic.Uint64
	evictions     atomic.Uint64
	evictedBytes  atomic.Uint64
	expirations   atomic.Uint64
	corruptions   atomic.Uint64
	noSpace       atomic.Uint64
	// readerVerified counts hits handed out unverified to a reader that
	// checks the bytes itself (block.GetOptions.ReaderVerifies).
	readerVerified atomic.Uint64
	// quotaEvictions counts blocks evicted to keep their namespace within
	// its quota; quotaRefused the puts refused with ErrQuotaExceeded.
	quotaEvictions, quotaRefused atomic.Uint64
}

// Stats is a snapshot of the tier's counters.
type Stats struct {
	Capacity      int64
	ResidentBytes int64 // payload bytes of resident blocks
	AllocatedB    int64 // bytes of allocated pages (>= ResidentBytes)
	Blocks        int64
	Hits, Misses  uint64
	Puts          uint64
	Evictions     uint64
	EvictedBytes  uint64
	Expirations   uint64
	Corruptions   uint64
	NoSpace       uint64
	// ReaderVerified counts the Hits that skipped the tier's at-rest check
	// because the reader verifies the bytes end to end (block.GetOptions.ReaderVerifies).
	ReaderVerified uint64
	// QuotaEvictions are evictions made to keep a namespace within its
	// quota; QuotaRefused the puts refused with block.ErrQuotaExceeded.
	QuotaEvictions, QuotaRefused uint64
	// WindowLeads is whether the policy's victims come from Window now
	// (the window policy, or duel while its Window shadow leads);
	// PolicySwitches counts duel's changes of lead (policy.Leading).
	WindowLeads    bool
	PolicySwitches uint64
}

// New maps the arena and returns an empty tier.
func New(cfg Config, log *slog.Logger) (*Tier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	size := (cfg.Capacity / PageSize) * PageSize
	fileSize := size + tableSize(size)
	var (
		f    *os.File
		path string
	)
	if cfg.MemFile == "" {
		fd, err := unix.MemfdCreate("ctxtier-dram", unix.MFD_CLOEXEC)
		if err != nil {
			return nil, fmt.Errorf("dram: memfd_create: %w", err)
		}
		f = os.NewFile(uintptr(fd), "ctxtier-dram")
		path = fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), fd)
	} else {
		// A file left by an earlier run may still be mapped by clients:
		// truncating it would make their mappings fault (SIGBUS). Unlink it
		// and create a fresh inode instead; old mappings keep the old one
		// (and its version words, so their checks fail and they fall back).
		if err := os.Remove(cfg.MemFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("dram: replace memory file: %w", err)
		}
		var err error
		f, err = os.OpenFile(cfg.MemFile, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o640)
		if err != nil {
			return nil, fmt.Errorf("dram: %w", err)
		}
		path = cfg.MemFile
	}
	if err := f.Truncate(fileSize); err != nil {
		f.Close()
		return nil, fmt.Errorf("dram: size memory file to %d: %w", fileSize, err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(fileSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("dram: mmap %d bytes: %w", fileSize, err)
	}
	if cfg.HugePages {
		setting, err := adviseHugePages(mem[:size])
		switch {
		case err != nil:
			log.Warn("dram arena: huge pages not available", "err", err, "shmem_enabled", setting)
		case !hugePagesHonoured(setting):
			log.Warn("dram arena: huge pages asked for, but the kernel's shmem_enabled does not allow them for shared memory; the arena uses 4 KiB pages",
				"shmem_enabled", setting, "file", shmemTHPFile)
		default:
			log.Info("dram arena: huge pages advised", "shmem_enabled", setting)
		}
	}
	// After the advice, so that a populated arena gets huge pages where
	// the kernel allows them.
	if cfg.Prefault {
		start := time.Now()
		how := prefault(mem[:size])
		log.Info("dram arena prefaulted", "bytes", size, "how", how, "took", time.Since(start))
	}
	// The mapping is page-aligned, so every version word is 8-byte aligned.
	vers := unsafe.Slice((*uint64)(unsafe.Pointer(&mem[size])), size/PageSize)
	base := rand.Uint64() // one random start per memory file (version.go)
	for i := range vers {
		vers[i] = base
	}
	pf := cfg.Policy
	if pf == nil {
		pf = policy.NewLRU
	}
	expected := int(min(size/(256<<10), 1<<20)) // sized for 256 KiB blocks, a hint only
	t := &Tier{
		cfg: cfg, log: log, file: f, fd: int(f.Fd()), path: path, mem: mem, arena: mem[:size:size], vers: vers, tableOff: size, now: time.Now,
		alloc:  newAllocator(uint32(size / PageSize)),
		index:  make(map[block.Key]uint32, expected),
		ns:     map[string]*nsAcct{},
		policy: pf(expected),
	}
	t.clock, _ = t.policy.(policy.Clocked)
	log.Info("dram tier ready", "capacity", size, "memfile", path, "version_table", fileSize-size)
	return t, nil
}

// MemFile is the path a co-located process can open to map the arena.
func (t *Tier) MemFile() string { return t.path }

func (t *Tier) bytesOf(e *entry) []byte {
	off := int64(e.page) * PageSize
	return t.arena[off : off+e.size : off+e.size]
}

func (t *Tier) newHandle() uint32 {
	if n := len(t.free); n > 0 {
		h := t.free[n-1]
		t.free = t.free[:n-1]
		return h
	}
	return t.entries.Add()
}

// evictable reports whether handle h may be evicted now.
func (t *Tier) evictableAt(now int64) func(policy.Handle) bool {
	return func(h policy.Handle) bool {
		e := t.entries.At(uint32(h))
		return e.leases == 0 && e.pinUntil <= now
	}
}

// unindexLocked removes a live entry from the index and the policy, and frees
// its pages unless it is leased (then the last Release frees them).
func (t *Tier) unindexLocked(h uint32) {
	e := t.entries.At(h)
	delete(t.index, e.key)
	if e.tracked {
		t.policy.Remove(policy.Handle(h))
		e.tracked = false
	}
	e.live = false
	t.unlinkLocked(h)
	t.unchargeLocked(e.key.Namespace, e.size)
	t.st.residentBytes.Add(-e.size)
	t.st.blocks.Add(-1)
	if e.leases > 0 {
		e.doomed = true
		return
	}
	t.releaseLocked(h)
}

func (t *Tier) releaseLocked(h uint32) {
	e := t.entries.At(h)
	if e.spliced && !t.closed {
		// See markSpliced. After Close the memory file is gone and t.fd
		// may already number another file of the process, which a punch
		// would zero. If the punch fails the pages may be rewritten
		// under a socket still sending them; the client's end-to-end CRC-32C
		// catches that and reads again, so it is logged, not fatal.
		off, n := int64(e.page)*PageSize, int64(e.pages)*PageSize
		if err := unix.Fallocate(t.fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n); err != nil {
			t.log.Error("dram: punch out pages sent with sendfile", "offset", off, "bytes", n, "err", err)
		}
	}
	t.freePagesLocked(e.page, e.pages)
	*e = entry{}
	t.free = append(t.free, h)
}

// MarkClean records that a lower tier now holds key, so evicting it needs no demotion.
func (t *Tier) MarkClean(key block.Key) {
	t.mu.Lock()
	if h, ok := t.index[key]; ok {
		t.entries.At(h).clean = true
	}
	t.mu.Unlock()
}

// lookupLocked returns the live, unexpired handle of key, dropping it if expired.
func (t *Tier) lookupLocked(key block.Key, now int64) (uint32, bool) {
	h, ok := t.index[key]
	if !ok {
		return 0, false
	}
	if e := t.entries.At(h); e.expires != 0 && e.expires <= now {
		t.st.expirations.Add(1)
		t.unindexLocked(h)
		return 0, false
	}
	return h, true
}

// Get returns a leased view of the block's verified bytes. With
// opts.ReaderVerifies it skips its own pass over the bytes: the reader
// checks them against Ref.Sum, the CRC-32C recorded at put time, and reads
// again without it on a mismatch, which verifies, counts and drops a
// corrupt block here (see docs/tiers.md, "Who verifies a read").
// opts.Retain > 0 re-arms the block's retain window.
func (t *Tier) Get(_ context.Context, key block.Key, opts block.GetOptions) (*block.Ref, error) {
	return t.get(key, !opts.ReaderVerifies, opts.Retain)
}

// get is Get; verify false leaves the check to the reader; retain > 0 is
// the read's retain window (block.GetOptions.Retain).
func (t *Tier) get(key block.Key, verify bool, retain time.Duration) (*block.Ref, error) {
	now := t.now().UnixNano()
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, block.ErrClosed
	}
	h, ok := t.lookupLocked(key, now)
	if !ok {
		t.mu.Unlock()
		t.st.misses.Add(1)
		return nil, fmt.Errorf("%w: %s", block.ErrNotFound, key)
	}
	e := t.entries.At(h)
	e.leases++
	e.access = now
	if e.tracked {
		t.setClockLocked(now)
		t.policy.Touch(policy.Handle(h))
		t.retainLocked(h, now, retain)
	}
	t.nsTouchLocked(h)
	data, sum, fp, off := t.bytesOf(e), e.sum, e.fp, int64(e.page)*PageSize
	if !verify {
		t.mu.Unlock()
		t.st.hits.Add(1)
		t.st.readerVerified.Add(1)
		return t.fileRef(data, sum, h, off), nil
	}
	t.busy.Add(1) // enterLocked: closed was checked above, under this hold of mu
	t.mu.Unlock()

	// Verify outside the lock; the lease keeps the bytes in place, the gate
	// keeps them mapped.
	got := xxh3.Hash(data)
	t.busy.Done()
	if got != fp {
		t.st.corruptions.Add(1)
		t.st.misses.Add(1)
		t.log.Error("dram block failed its checksum; dropped", "key", key.String(), "want", fp, "got", got)
		t.mu.Lock()
		if t.entries.At(h).live && t.index[key] == h {
			t.unindexLocked(h)
		}
		t.mu.Unlock()
		t.releaseLease(h)
		return nil, fmt.Errorf("%w: %s failed verification at rest and was dropped", block.ErrNotFound, key)
	}
	t.st.hits.Add(1)
	return t.fileRef(data, sum, h, off), nil
}

// fileRef is a Ref on entry h's bytes, leased from t (EndLease), that also
// says where they lie in the memory file, so a server can sendfile them
// (LeaseSent). One allocation per read: the Ref.
func (t *Tier) fileRef(data []byte, sum uint32, h uint32, off int64) *block.Ref {
	return block.NewLeasedRef(data, sum, block.TierDRAM, (*lessor)(t), uint64(h), t.fd, off)
}

// lessor is the Tier as its Refs' block.Lessor (kept off Tier's own method
// set: only a Ref ends a read's lease).
type lessor Tier

// EndLease ends the lease a Ref of entry h held (block.Lessor).
func (l *lessor) EndLease(h uint64) { (*Tier)(l).releaseLease(uint32(h)) }

// LeaseSent marks entry h's pages as handed to sendfile (block.Lessor).
func (l *lessor) LeaseSent(h uint64) { (*Tier)(l).markSpliced(uint32(h)) }

// markSpliced notes that entry h's pages were handed to sendfile. The
// caller holds a lease on h, so h is still that block.
//
// Why it matters: sendfile (and splice) into a TCP socket queues
// references to the memory file's pages, not copies. The call returns once
// the socket has taken those references, but the pages are read again
// whenever the data is (re)transmitted, and on loopback the receiver's
// queue holds them until the client reads. Releasing the lease when
// sendfile returns is therefore only safe if the freed pages are never
// written in place afterwards; releaseLocked guarantees that by punching
// spliced pages out of the file (FALLOC_FL_PUNCH_HOLE), which drops them
// from the file while the socket's references keep their old contents
// alive, and the next put into that range faults in fresh pages.
func (t *Tier) markSpliced(h uint32) {
	t.mu.Lock()
	t.entries.At(h).spliced = true
	t.mu.Unlock()
}

func (t *Tier) releaseLease(h uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries.At(h)
	e.leases--
	if e.leases == 0 && e.doomed {
		t.releaseLocked(h)
	}
}

// Descriptor is where a DRAM-resident block's bytes live in the arena's
// memory file: a co-located reader maps MemFile read-only and copies
// [Offset, Offset+Length) itself, then checks Sum, or checks that the word
// at VersionOffset still holds Version (descriptor.CopyVersioned).
type Descriptor struct {
	MemFile       string
	Offset        int64
	Length        int64
	Sum           uint32
	Version       uint64 // the block's version word while it is resident
	VersionOffset int64  // where that word is in MemFile
}

// Descriptor leases key's bytes in place and says where they are. Until
// release is called the block is neither evicted nor moved. The bytes are
// verified before the descriptor is handed out, whatever ctx says.
func (t *Tier) Descriptor(_ context.Context, key block.Key) (Descriptor, func(), error) {
	ref, err := t.get(key, true, 0)
	if err != nil {
		return Descriptor{}, nil, err
	}
	// The lease keeps the block (and so its first page's word) in place;
	// the lock keeps Close from unmapping the arena and the word while they
	// are read. (Not ref.FileRange: that marks the pages as sent with
	// sendfile, and they would be punched out of the file when freed.)
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		ref.Release()
		return Descriptor{}, nil, block.ErrClosed
	}
	off := int64(0)
	if len(ref.Data) > 0 {
		off = int64(uintptr(unsafe.Pointer(&ref.Data[0])) - uintptr(unsafe.Pointer(&t.arena[0])))
	}
	page := uint32(off / PageSize)
	v := atomic.LoadUint64(&t.vers[page])
	t.mu.Unlock()
	return Descriptor{MemFile: t.path, Offset: off, Length: int64(len(ref.Data)), Sum: ref.Sum,
		Version: v, VersionOffset: t.versionOffset(page)}, ref.Release, nil
}

// DescriptorUnverified is Descriptor without reading the bytes: the lease
// costs no pass over the block. It is for a reader that verifies the bytes
// it copies against Sum itself (the native protocol's DESCRIBE): on a
// mismatch it reads the block with Get, which verifies it at rest and drops
// it if it is corrupt.
func (t *Tier) DescriptorUnverified(_ context.Context, key block.Key) (Descriptor, func(), error) {
	now := t.now().UnixNano()
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return Descriptor{}, nil, block.ErrClosed
	}
	h, ok := t.lookupLocked(key, now)
	if !ok {
		t.mu.Unlock()
		t.st.misses.Add(1)
		return Descriptor{}, nil, fmt.Errorf("%w: %s", block.ErrNotFound, key)
	}
	e := t.entries.At(h)
	e.leases++
	e.access = now
	if e.tracked {
		t.setClockLocked(now)
		t.policy.Touch(policy.Handle(h))
	}
	t.nsTouchLocked(h)
	d := Descriptor{MemFile: t.path, Offset: int64(e.page) * PageSize, Length: e.size, Sum: e.sum,
		Version: e.version, VersionOffset: t.versionOffset(e.page)}
	t.mu.Unlock()
	t.st.hits.Add(1)
	var once sync.Once
	return d, func() { once.Do(func() { t.releaseLease(h) }) }, nil
}

// Stat returns a resident block's metadata without touching its recency.
func (t *Tier) Stat(_ context.Context, key block.Key) (block.Info, error) {
	now := t.now().UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	h, ok := t.lookupLocked(key, now)
	if !ok {
		return block.Info{}, fmt.Errorf("%w: %s", block.ErrNotFound, key)
	}
	return t.infoLocked(t.entries.At(h), now), nil
}

// Contains reports whether key is resident (and unexpired).
func (t *Tier) Contains(key block.Key) bool {
	now := t.now().UnixNano()
	t.mu.Lock()
	_, ok := t.lookupLocked(key, now)
	t.mu.Unlock()
	return ok
}

// Delete evicts key now (its pages are freed once any read lease ends).
func (t *Tier) Delete(_ context.Context, key block.Key) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return block.ErrClosed
	}
	h, ok := t.index[key]
	if !ok {
		return fmt.Errorf("%w: %s", block.ErrNotFound, key)
	}
	t.unindexLocked(h)
	return nil
}

// Pin protects key from eviction until the given time (never shortening a pin).
func (t *Tier) Pin(_ context.Context, key block.Key, until time.Time) error {
	now := t.now().UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	h, ok := t.lookupLocked(key, now)
	if !ok {
		return fmt.Errorf("%w: %s", block.ErrNotFound, key)
	}
	e := t.entries.At(h)
	e.pinUntil = max(e.pinUntil, until.UnixNano())
	return nil
}

// List returns the metadata of up to limit resident blocks of namespace ns
// whose object names sort after `after` and start with prefix, in object-name
// order (limit <= 0 means all). It scans the index, so it is an
// administrative call (S3 listings), not a data-path one.
func (t *Tier) List(_ context.Context, ns, prefix, after string, limit int) ([]block.Info, error) {
	now := t.now().UnixNano()
	t.mu.Lock()
	var out []block.Info
	for k, h := range t.index {
		if k.Namespace != ns {
			continue
		}
		e := t.entries.At(h)
		if e.expires != 0 && e.expires <= now {
			continue
		}
		name := k.ObjectName()
		if name <= after || !strings.HasPrefix(name, prefix) {
			continue
		}
		out = append(out, t.infoLocked(e, now))
	}
	t.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Key.ObjectName() < out[j].Key.ObjectName() })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (t *Tier) infoLocked(e *entry, now int64) block.Info {
	info := block.Info{
		Key: e.key, Size: e.size, Sum: e.sum, Tier: block.TierDRAM, Priority: e.priority,
		Created: time.Unix(0, e.created), LastAccess: time.Unix(0, e.access),
	}
	if e.pinUntil > now {
		info.PinnedUntil = time.Unix(0, e.pinUntil)
	}
	return info
}

// Sweep drops every expired block and returns how many it dropped.
func (t *Tier) Sweep() int {
	now := t.now().UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for h := range t.entries.Len() {
		if e := t.entries.At(uint32(h)); e.live && e.expires != 0 && e.expires <= now {
			t.unindexLocked(uint32(h))
			n++
		}
	}
	t.st.expirations.Add(uint64(n))
	return n
}

// Run sweeps expired blocks every SweepInterval until ctx ends.
func (t *Tier) Run(ctx context.Context) {
	tk := time.NewTicker(t.cfg.SweepInterval)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
			if n := t.Sweep(); n > 0 {
				t.log.Debug("dram expired blocks dropped", "count", n)
			}
		}
	}
}

// Stats returns a snapshot of the counters.
func (t *Tier) Stats() Stats {
	t.mu.Lock()
	capacity := int64(t.alloc.npages) * PageSize
	allocated := int64(t.alloc.npages-t.alloc.freePages) * PageSize
	windowLeads, switches := policy.Leading(t.policy)
	t.mu.Unlock()
	return Stats{
		Capacity:       capacity,
		ResidentBytes:  t.st.residentBytes.Load(),
		AllocatedB:     allocated,
		Blocks:         t.st.blocks.Load(),
		Hits:           t.st.hits.Load(),
		Misses:         t.st.misses.Load(),
		Puts:           t.st.puts.Load(),
		Evictions:      t.st.evictions.Load(),
		EvictedBytes:   t.st.evictedBytes.Load(),
		Expirations:    t.st.expirations.Load(),
		Corruptions:    t.st.corruptions.Load(),
		NoSpace:        t.st.noSpace.Load(),
		ReaderVerified: t.st.readerVerified.Load(),
		QuotaEvictions: t.st.quotaEvictions.Load(),
		QuotaRefused:   t.st.quotaRefused.Load(),
		WindowLeads:    windowLeads,
		PolicySwitches: uint64(switches),
	}
}

// LargestFree is the longest free run of the arena in bytes. It scans the free
// extents, so it is for tests and diagnostics, not for scrapes.
func (t *Tier) LargestFree() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return int64(t.alloc.largestFree()) * PageSize
}
